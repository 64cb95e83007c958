"""A module of PrimFuncs only in the app, on a real engine: the TensorIR pane lists the function
with its loops and script, the Run pane offers it, and a run after the tir-cpu schedules matches
reference()."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("pytestqt")

T = 180_000


def test_primfunc_only_module_opens_steps_and_runs(qtbot, real_window):
    w = real_window
    w.open_spec("sample:course_primfunc_only", pipeline="tir-cpu")
    qtbot.waitUntil(lambda: bool(w.state.get("model")) or w.last_error is not None, timeout=T)
    assert w.last_error is None, w.last_error
    assert w.state["relax_functions"] == [] and w.state["run_functions"] == ["mm_relu"]
    qtbot.waitUntil(lambda: "PrimFuncs only (mm_relu)" in w.relax.info.text(), timeout=T)
    qtbot.waitUntil(lambda: w.tir.tree.topLevelItemCount() > 0, timeout=T)
    item = w.tir.tree.topLevelItem(0)
    assert item.text(0) == "mm_relu" and item.text(1) == "128×128×128; 128×128"  # matmul, relu loops
    w.tir.tree.setCurrentItem(item)
    qtbot.waitUntil(lambda: "def mm_relu" in w.tir.code.toPlainText() or
                    "def main" in w.tir.code.toPlainText(), timeout=T)
    w.bridge.request("run_to_end")
    qtbot.waitUntil(lambda: w.state.get("cursor", 0) > 0 and not w.state.get("planned"), timeout=T)
    assert w.run.current_func() == "mm_relu"
    w.build_run()
    qtbot.waitUntil(lambda: w.run.result is not None or w.run.error is not None, timeout=T)
    assert w.run.error is None, w.run.error
    assert w.run.result["allclose"] is True and w.run.result["func"] == "mm_relu"
    qtbot.wait(300)
    shots = os.environ.get("IRVIZ_SHOTS")
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        w.grab().save(str(Path(shots) / "primfunc_window.png"))
        w.tir.grab().save(str(Path(shots) / "primfunc_tir.png"))
        w.run.grab().save(str(Path(shots) / "primfunc_run.png"))
