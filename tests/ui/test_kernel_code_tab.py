"""The Code tab under TensorIR: the selected kernel's code on the chosen target, asked of the engine
only while the tab is shown, coloured with the lexer the engine names, with its counts, searchable."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

pytest.importorskip("pytestqt")

from fake_bridge import FakeBridge, open_mlp, step

ASM = "  .type      {k}_compute_,@function\n{k}_compute_:\n  vfmadd231ps (%rax), %zmm2, %zmm1\n  retq\n"
CUDA = 'extern "C" __global__ void __launch_bounds__(64) {k}_kernel(float* A) {{\n  A[threadIdx.x] = 0;\n}}\n'


class CodeBridge(FakeBridge):
    """The shared fake engine, answering kernel_code as the engine shapes it."""

    def _compute(self, cmd, a):
        if cmd != "kernel_code":
            return super()._compute(cmd, a)
        gpu = a.get("target") == "cuda"
        if a.get("target") == "vulkan":
            return Exception("cannot build for target 'vulkan': no vulkan code generator")
        kernels = {k: {"name": k, "symbols": [], "error": None, "launch": [{"grid": [4, 1, 1], "block": [64, 1, 1]}]
                       if gpu else [], "counts": {"shared_bytes": 256, "barriers": 1, "lines": 3} if gpu else
                       {"instructions": 3, "vector": 1, "vector_bits": {"512": 1}, "fma": 1, "vector_fma": 1,
                        "calls": 0, "callees": {}}} for k in ("add", "matmul", "relu")}
        k = a.get("kernel")
        return {"target_name": a.get("target"), "target": {"kind": "cuda" if gpu else "llvm"},
                "kind": "cuda" if gpu else "llvm", "seconds": 0.1, "totals": {}, "kernels": kernels,
                "step": a.get("step"), "formats": ["cuda"] if gpu else ["asm", "ll"], "kernel": k,
                "lexers": {"cuda": "cuda"} if gpu else {"asm": "gas", "ll": "llvm"},
                "code": ({"cuda": CUDA.format(k=k)} if gpu else
                         {"asm": ASM.format(k=k), "ll": f"define void @{k}_compute_() {{\n}}\n"})}


@pytest.fixture
def code_win(qtbot, settings):
    from irviz.ui.main_window import MainWindow

    w = MainWindow(bridge=CodeBridge(), settings=settings)
    qtbot.addWidget(w)
    w.resize(1600, 1000)
    w.show()
    yield w
    w.close()


def _asked(win) -> list[dict]:
    return [a for cmd, a in win.bridge.sent if cmd == "kernel_code"]


def test_the_code_tab_shows_the_selected_kernel_on_the_chosen_target(qtbot, code_win):
    win = code_win
    open_mlp(qtbot, win)
    step(qtbot, win)
    tab = win.tir.kernel_code
    win.hub.select_tir("matmul")
    qtbot.waitUntil(lambda: win.tir.selected == "matmul", timeout=5000)
    assert _asked(win) == []  # nothing compiled while the tab is hidden
    win.tir.tabs.setCurrentWidget(tab)
    qtbot.waitUntil(lambda: tab.result is not None, timeout=5000)
    assert _asked(win)[-1] == {"step": 1, "target": "host", "kernel": "matmul"}
    assert "matmul_compute_:" in tab.code.toPlainText() and tab.code.language == "gas"
    assert tab.counts.text().startswith("3 instructions · 1 vector (1×512-bit) · 1 FMA (1 vector)")
    assert [tab.format.itemText(i) for i in range(tab.format.count())] == ["Assembly", "LLVM IR"]
    tab.format.setCurrentIndex(1)
    assert tab.code.toPlainText().startswith("define void @matmul_compute_") and tab.code.language == "llvm"

    # another kernel selected elsewhere follows; another target is compiled for
    win.hub.select_tir("relu")
    qtbot.waitUntil(lambda: "relu_compute_" in tab.code.toPlainText(), timeout=5000)
    tab.target.setEditText("cuda")
    tab.refresh()
    qtbot.waitUntil(lambda: "__global__" in tab.code.toPlainText(), timeout=5000)
    assert tab.code.language == "cuda" and tab.format.currentText() == "CUDA C"
    assert tab.counts.text().startswith("grid 4×1×1, block 64×1×1 · 256 B shared · 1 barriers")
    tab.search.setText("threadIdx")
    assert tab.code.match_count() == 1

    tab.target.setEditText("vulkan")
    tab.refresh()
    qtbot.waitUntil(lambda: tab.counts.text().startswith("Not compiled"), timeout=5000)
    assert "vulkan" in tab.counts.text() and tab.code.toPlainText() == ""
