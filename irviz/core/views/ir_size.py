"""How big a step's module is: bindings in ``main``, prim_funcs, and lines of TensorIR.

    ir_size(mod)  ->  {"bindings": 42, "prim_funcs": 7, "tir_lines": 310}

The Pipeline pane shows these per step and report.html lists them, so a pass that blows up the
module (or a lowering that turns ten ops into three hundred lines) stands out next to its time.
TensorIR lines count the TVMScript the TIR pane shows (``diff.function_text``, cached by
structural hash), so a prim_func that later passes leave alone is printed once for all steps.
"""
from __future__ import annotations

from irviz.core.tvm_compat import PrimFunc, relax
from irviz.core.views import module_diff as diff_mod

__all__ = ["ir_size", "main_binding_count"]


def main_binding_count(mod) -> int:
    """Bindings in main's blocks (dataflow and plain); 0 when there is no Relax main."""
    main = next((f for gv, f in mod.functions.items() if gv.name_hint == "main"), None)
    if not isinstance(main, relax.Function) or not isinstance(main.body, relax.SeqExpr):
        return 0
    return sum(len(block.bindings) for block in main.body.blocks)


def ir_size(mod) -> dict:
    prim = [gv.name_hint for gv, f in mod.functions.items() if isinstance(f, PrimFunc)]
    lines = sum(len(diff_mod.function_text(mod, name).splitlines()) for name in prim)
    return {"bindings": main_binding_count(mod), "prim_funcs": len(prim), "tir_lines": lines}
