"""A restarted engine replays the session under the target chosen in it (real engine): the same
steps, passes run under that target, builds for it."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest
from test_bridge import SLOW, Recorder, call

from irviz.ui.bridge import EngineBridge


@pytest.fixture
def bridge(qapp):
    b = EngineBridge(spare=False)
    yield b
    b.shutdown()


def test_a_killed_engine_comes_back_under_the_chosen_target(qtbot, bridge):
    rec = Recorder(bridge)
    call(qtbot, bridge, rec, "open", spec="sample:mlp", pipeline="zero")
    call(qtbot, bridge, rec, "run_to_end")
    state = call(qtbot, bridge, rec, "set_target", target="aarch64")
    assert state["target"] == "aarch64" and bridge.recipe["target"] == "aarch64"
    with qtbot.waitSignal(bridge.engineRestarted, timeout=SLOW) as sig:
        bridge.kill_engine()
    assert "replayed to step 5" in sig.args[0], sig.args[0]
    again = call(qtbot, bridge, rec, "state")
    assert again["target"] == "aarch64" and again["pipeline_text"] == state["pipeline_text"]
    rid = bridge.request("build_run")
    qtbot.waitUntil(lambda: rec.done(rid), timeout=SLOW)
    assert rec.failures[rid]["not_run"] == "aarch64"  # built for aarch64 again, not for the host
