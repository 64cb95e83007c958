"""The Pipeline pane's Vec and FMA columns: each step's kernels counted on request, one engine
request per changed step, a drop against the step before marked."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

pytest.importorskip("pytestqt")

from fake_bridge import open_mlp, step


def _col(pane, header):
    from irviz.ui.panes.pipeline import COLUMNS

    return [h for h, _t in COLUMNS].index(header)


def test_count_code_fills_vec_and_fma_per_step_asking_only_changed_steps(qtbot, win):
    open_mlp(qtbot, win)
    step(qtbot, win, 3)   # LegalizeOps (changes), then two passes that change nothing
    p = win.pipeline
    p.code_target.setCurrentText("x86-avx512")
    p.count_code()
    qtbot.waitUntil(lambda: p.code_button.isEnabled(), timeout=5000)
    asked = [a for cmd, a in win.bridge.sent if cmd == "kernel_code"]
    assert [(a["step"], a["target"]) for a in asked] == [(1, "x86-avx512")]  # import has no kernels
    vec, fma = _col(p, "Vec"), _col(p, "FMA")
    assert [p.table.item(r, fma).text() for r in range(4)] == ["", "3", "3", "3"]
    assert p.table.item(1, vec).text() == "6"
    assert "zmm" in p.table.item(1, vec).toolTip()


def test_a_step_whose_vector_count_falls_is_marked(qtbot, win):
    from irviz.ui import themes

    open_mlp(qtbot, win)
    step(qtbot, win, 2)
    p = win.pipeline
    win.bridge.applied[1]["name"] = "LegalizeOps"  # the fake engine: both steps change the module
    win.bridge.request("state")
    qtbot.waitUntil(lambda: p.steps[2].get("changed"), timeout=5000)
    p.count_code()
    p.counts._code_queue = []  # answer by hand: vectorised at step 1, scalar at step 2
    p.on_code_reply({"step": 1, "kind": "llvm", "target_name": "host", "totals": {"vector": 40, "fma": 8}})
    p.counts._code_asked = 2
    p.on_code_reply({"step": 2, "kind": "llvm", "target_name": "host", "totals": {"vector": 2, "fma": 8}})
    vec, fma = _col(p, "Vec"), _col(p, "FMA")
    bad = themes.colors().bad.lower()
    assert p.table.item(2, vec).text() == "2" and "the step before: 40" in p.table.item(2, vec).toolTip()
    assert p.table.item(2, vec).foreground().color().name() == bad
    assert p.table.item(2, fma).foreground().color().name() != bad


def test_a_step_that_changed_nothing_has_the_totals_of_the_step_just_before(qtbot, win):
    open_mlp(qtbot, win)
    step(qtbot, win, 4)
    p = win.pipeline
    win.bridge.applied[2]["name"] = "LegalizeOps"  # steps 1 and 3 change the module, 2 and 4 not
    win.bridge.request("state")
    qtbot.waitUntil(lambda: p.steps[3].get("changed"), timeout=5000)
    p.count_code()
    qtbot.waitUntil(lambda: p.code_button.isEnabled(), timeout=5000)
    assert [a["step"] for cmd, a in win.bridge.sent if cmd == "kernel_code"] == [1, 3]
    fma = _col(p, "FMA")
    assert [p.table.item(r, fma).text() for r in range(5)] == ["", "3", "3", "9", "9"]
