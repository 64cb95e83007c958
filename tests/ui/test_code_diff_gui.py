"""The Diff pane's Kernel code mode: one kernel's assembly between two targets of one step, or
between two steps; the kernel follows the TensorIR selection."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

pytest.importorskip("pytestqt")

from fake_bridge import open_mlp, step


def _asked(win):
    return [a for cmd, a in win.bridge.sent if cmd == "kernel_code_diff"]


def test_avx2_against_avx512_of_one_step(qtbot, win):
    open_mlp(qtbot, win)
    step(qtbot, win)
    d = win.diff
    d.code_bar.set_code_mode(True)
    win.hub.select_tir("matmul")
    d.code_bar.target_a.setCurrentText("x86-avx2")
    d.code_bar.target_b.setCurrentText("x86-avx512")
    d.show_pair(1, 1)
    qtbot.waitUntil(lambda: d.result is not None and bool(d.result.get("functions")), timeout=5000)
    assert _asked(win)[-1] == {"a": 1, "b": 1, "kernel": "matmul", "target_a": "x86-avx2",
                               "target_b": "x86-avx512", "format": None}
    assert "%ymm" in d.view.left.toPlainText() and "%zmm" in d.view.right.toPlainText()
    assert d.view.left.language == "gas"
    assert "step 1 x86-avx2" in d.info.text() and "step 1 x86-avx512" in d.info.text()
    assert "lines differ" in d.info.text()


def test_same_step_and_target_asks_nothing_and_ir_mode_comes_back(qtbot, win):
    open_mlp(qtbot, win)
    step(qtbot, win)
    d = win.diff
    d.code_bar.set_code_mode(True)
    win.hub.select_tir("relu")
    n = len(_asked(win))  # the mode and the kernel each asked for the cursor's pair (0, 1)
    assert n and _asked(win)[-1]["kernel"] == "relu"
    d.show_pair(1, 1)
    assert len(_asked(win)) == n and "same step on the same target" in d.info.text()
    d.show_pair(0, 1)
    qtbot.waitUntil(lambda: d.result is not None and bool(d.result.get("functions")), timeout=5000)
    assert _asked(win)[-1]["kernel"] == "relu" and (_asked(win)[-1]["a"], _asked(win)[-1]["b"]) == (0, 1)
    d.code_bar.set_code_mode(False)
    qtbot.waitUntil(lambda: d.result is not None and d.view.left.language == "python", timeout=5000)
    assert [cmd for cmd, _a in win.bridge.sent][-1] == "diff"
    assert "R.call_tir" in d.view.right.toPlainText()
