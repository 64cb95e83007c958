"""The app on a model opened without weights ("Structure only"): the panes fill, the window says
structure only, Run becomes Estimate (the kernels timed alone), a run request says there are no
weights and the session stays, with the real engine."""
from __future__ import annotations

import os
import re
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

pytest.importorskip("pytestqt")
pytest.importorskip("transformers")

T = 180_000
TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture
def win(qtbot, real_window):
    return real_window


def test_structure_only_opens_steps_estimates_and_run_says_no_weights(qtbot, win, tmp_path):
    src = (TESTS / "core" / "test_structure_only.py").read_text()
    model = tmp_path / "tiny_llama.py"  # the tiny decoder the core tests open, written the usual way
    model.write_text(re.search(r"TINY_LLAMA = '''(.*?)'''", src, re.S).group(1))
    win.open_spec(str(model), pipeline="LegalizeOps", no_weights=True)
    qtbot.waitUntil(lambda: (bool(win.state.get("model")) and win.all_filled())
                    or win.last_error is not None, timeout=T)
    assert win.last_error is None, win.last_error
    assert win.state["structure_only"] is True
    assert "(structure only)" in win.step_label.text() and "(structure only)" in win.windowTitle()
    assert "p_model_model_embed_tokens_weight" in win.relax.code.toPlainText()
    assert win.bridge.recipe["no_weights"] is True  # a restarted engine opens it the same way
    win.step()
    qtbot.waitUntil(lambda: win.state.get("cursor") == 1, timeout=T)
    # Run (Ctrl+R) on a model without weights estimates instead: the kernels timed alone
    assert win.run.run_button.text() == "Estimate"
    win.build_run()
    qtbot.waitUntil(lambda: win.run.estimate.result is not None
                    or "failed" in win.run.estimate.status.text(), timeout=T)
    est = win.run.estimate.result
    assert est is not None, win.run.estimate.status.text()
    assert win.run.tabs.currentWidget() is win.run.estimate
    assert est["step"] == 1 and est["estimated_ms"] > 0
    assert win.run.estimate.table.rowCount() == len(est["kernels"]) > 0
    assert "estimated" in win.run.estimate.total.text()
    assert win.run.status.text().startswith("Structure only: no weights to run with")
    # the engine itself still refuses a run, saying what it needs
    win.run.ask("run", "build_run", step=1)
    qtbot.waitUntil(lambda: win.last_error is not None, timeout=T)
    assert win.last_error["stage"] == "run"
    assert win.last_error["message"].startswith("structure only: no weights to run with")
    assert any("The session stays at step 1" in m for m in win.messages)
    assert win.state["cursor"] == 1 and win.state["model"]
