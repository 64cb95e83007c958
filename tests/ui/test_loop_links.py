"""TensorIR loops <-> a kernel's LLVM IR and assembly: by the LLVM IR's for_body_VAR blocks, and
the assembly's natural loops where their nesting, or the LLVM IR's for_end_VAR exits, say which
loop is which ("unknown" otherwise, never the epilogue); the TensorIR pane and its Code tab follow a
loop both ways, and an FX/Relax selection reaches the tab."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

from irviz.ui.panes.loop_links import asm_loops, code_to_loop, ll_loop_blocks, loop_to_code

# the course MLP's matmul after tir-cpu: ax0_0 (4) unrolled by LLVM, so its ax1 loop comes 2× here
NEST = [{"var": "ax0_0", "extent": "4", "kind": "serial", "depth": 0},
        {"var": "ax0_1_init", "extent": "32", "kind": "vectorized", "depth": 1},
        {"var": "ax1", "extent": "784", "kind": "serial", "depth": 1},
        {"var": "ax0_1", "extent": "32", "kind": "vectorized", "depth": 2}]
LL = ("define void @k_compute_() {\nentry:\n  br label %for_body_ax1\n"
      "for_body_ax1:\n  %a = fadd <8 x float> %x, %y\n  br i1 %c, label %for_end_ax1, label %for_body_ax1\n"
      "for_end_ax1:\n  br label %for_body_ax1.1\n"
      "for_body_ax1.1:\n  %b = fadd <8 x float> %x, %y\n  br i1 %c, label %for_end_ax1.1, label %for_body_ax1.1\n"
      "for_end_ax1.1:\n  ret void\n}\n"
      "define i32 @__tvm_ffi_k() {\nentry:\n  ret i32 0\n}\n")
ASM = ("k_compute_:\n  xorl %eax, %eax\n.LBB0_1:\n  vfmadd231ps (%rax), %ymm1, %ymm0\n  addq $4, %rax\n"
       "  jne .LBB0_1\n.LBB0_2:\n  vfmadd231ps (%rcx), %ymm1, %ymm0\n  jne .LBB0_2\n  retq\n"
       "__tvm_ffi_k:\n.LBB1_1:\n  cmpl $3, %esi\n  jne .LBB1_1\n  retq\n")
CODE = {"asm": ASM, "ll": LL}


def test_the_llvm_ir_names_the_loops_and_the_assembly_loops_follow_its_blocks():
    assert asm_loops(ASM) == [(3, 6), (7, 9)]  # the FFI entry's loop is not the kernel's
    assert ll_loop_blocks(NEST, LL) == [(4, 2), (9, 2)]
    ll = loop_to_code(NEST, 2, CODE, "ll")
    assert ll.lines == (4, 9) and ll.exact
    asm = loop_to_code(NEST, 2, CODE, "asm")
    assert asm.lines == (3, 4, 5, 6, 7) and asm.exact and "2 copies" in asm.note
    assert code_to_loop(NEST, 5, CODE, "asm") == 2 and code_to_loop(NEST, 10, CODE, "asm") is None
    assert code_to_loop(NEST, 5, CODE, "ll") == 2 and code_to_loop(NEST, 8, CODE, "ll") is None


def test_loops_that_are_not_loops_in_the_code_say_why():
    assert "vectorized" in loop_to_code(NEST, 1, CODE, "asm").note
    unrolled = loop_to_code(NEST, 0, CODE, "ll")
    assert unrolled.lines == () and "unrolled" in unrolled.note
    # without the LLVM IR, two loops in the code for one TensorIR nest of two: nothing says which
    unknown = loop_to_code(NEST, 2, {"asm": ASM}, "asm")
    assert unknown.unknown and unknown.lines == () and unknown.where == "unknown"
    assert "do not nest as the TensorIR's" in unknown.note
    assert code_to_loop(NEST, 5, {"asm": ASM}, "asm") is None


# AArch64 as LLVM lays it out: argument checks that jump up the page without looping, the loop's
# exit test at its top, the epilogue and `ret` in the middle, the latch after them
ARM = """  .type       k_compute_,@function
k_compute_:
  cmp         w2, #4
  b.ne        .LBB3_9
.LBB3_1:
  cmp         w8, #63
  b.hi        .LBB3_4
  b           .LBB3_2
.LBB3_9:
  cmp         w8, #70
  b.le        .LBB3_1
.LBB3_2:
  cmp         x9, x10
  b.lt        .LBB3_5
.LBB3_4:
  ldp         x29, x30, [sp], #16
  ret
.LBB3_5:
  ldr         q0, [x1, x9]
  fadd        v0.4s, v0.4s, v1.4s
  add         x9, x9, #16
  b           .LBB3_2
  .size       k_compute_, .Lfunc_end3-k_compute_
"""
ARM_NEST = [{"var": "i", "extent": "64", "kind": "serial", "depth": 0},
            {"var": "j", "extent": "4", "kind": "vectorized", "depth": 1}]


def test_an_assembly_loop_is_its_blocks_and_never_the_epilogue_between_them():
    assert asm_loops(ARM) == [(12, 22)]  # .LBB3_9 -> .LBB3_1 jumps up but is no loop
    link = loop_to_code(ARM_NEST, 0, {"asm": ARM}, "asm")
    assert link.lines == (12, 13, 14, 18, 19, 20, 21, 22) and link.exact
    assert link.where == "lines 12–14, 18–22"
    assert code_to_loop(ARM_NEST, 17, {"asm": ARM}, "asm") is None  # ret
    assert code_to_loop(ARM_NEST, 20, {"asm": ARM}, "asm") == 0


def test_a_short_loop_unrolled_fully_leaves_copies_of_the_loop_inside_it():
    loop = ".LBB0_{n}:\n  fadd        s0, s0, s1\n  subs        x9, x9, #1\n  b.ne        .LBB0_{n}\n"
    asm = "k_compute_:\n" + "".join(loop.format(n=n) for n in range(3)) + "  ret\n"
    nest = [{"var": "i", "extent": "3", "kind": "serial", "depth": 0},
            {"var": "k", "extent": "100", "kind": "serial", "depth": 1}]
    k = loop_to_code(nest, 1, {"asm": asm}, "asm")
    assert k.lines == (2, 3, 4, 5, 6, 10) and k.copies == (6, 10) and "3 copies" in k.note
    i = loop_to_code(nest, 0, {"asm": asm}, "asm")
    assert i.lines == () and not i.unknown and "unrolled" in i.note


def test_a_body_inlined_into_the_entry_is_linked_there():
    inlined = ARM.replace("k_compute_", "__tvm_ffi_k")
    assert loop_to_code(ARM_NEST, 0, {"asm": inlined}, "asm").lines[0] == 12
    # with a body function beside it, the entry only checks arguments
    both = "  .type       k_compute_,@function\nk_compute_:\n  ret\n" + inlined
    link = loop_to_code(ARM_NEST, 0, {"asm": both}, "asm")
    assert link.lines == () and "unrolled or removed" in link.note


class LoopBridge:
    """The shared fake engine, its TensorIR functions with a loop nest (as the engine sends)."""

    @staticmethod
    def make():
        from fake_bridge import FakeBridge

        class Bridge(FakeBridge):
            def _compute(self, cmd, a):
                out = super()._compute(cmd, a)
                if cmd == "tir_functions":
                    return [dict(f, loop_nest=[{"var": "i0", "extent": "1", "kind": "serial", "depth": 0},
                                               {"var": "i1", "extent": "32", "kind": "serial", "depth": 1}])
                            for f in out]
                return out
        return Bridge()


@pytest.fixture
def loop_win(qtbot, settings):
    pytest.importorskip("pytestqt")
    from irviz.ui.main_window import MainWindow

    w = MainWindow(bridge=LoopBridge.make(), settings=settings)
    qtbot.addWidget(w)
    w.resize(1600, 1000)
    w.show()
    yield w
    w.close()


def test_a_loop_row_marks_the_loop_in_the_code_and_a_click_in_the_code_selects_it(qtbot, loop_win):
    from fake_bridge import open_mlp, step

    win = loop_win
    open_mlp(qtbot, win)
    step(qtbot, win)
    tab = win.tir.kernel_code
    win.tir.tabs.setCurrentWidget(tab)
    win.hub.select_tir("matmul")
    qtbot.waitUntil(lambda: tab.result is not None and "matmul_compute_" in tab.code.toPlainText(),
                    timeout=5000)
    parent = win.tir._item_for("matmul")
    win.tir.tree.setCurrentItem(parent.child(1))   # the i1 loop
    assert tab.code.highlighted_lines() == [2, 3, 4, 5, 6]  # .LBB0_1 … jne .LBB0_1: not the retq
    assert "loop i1: lines 2–6" in tab.link_note.text()
    assert win.tir.code.highlighted_lines() == [3]  # "for i0, i1 in T.grid(1, 32):"
    win.tir.tree.setCurrentItem(parent)
    tab._line_clicked(4)
    assert win.tir.tree.currentItem() is parent.child(1) and win.tir.loop == 1


def test_an_fx_or_relax_selection_carries_down_to_the_code_tab(qtbot, loop_win):
    from fake_bridge import open_mlp, step

    win = loop_win
    open_mlp(qtbot, win)
    step(qtbot, win)
    tab = win.tir.kernel_code
    win.tir.tabs.setCurrentWidget(tab)
    win.hub.select_relax("lv1")   # lv1 calls the add kernel
    qtbot.waitUntil(lambda: "add_compute_" in tab.code.toPlainText(), timeout=5000)
    win.hub.select_fx("relu")
    qtbot.waitUntil(lambda: "relu_compute_" in tab.code.toPlainText(), timeout=5000)
    assert tab.kernel == "relu"
