"""IR size per step: bindings in main, prim_funcs and TensorIR lines, on a small module."""
from __future__ import annotations

import tvm
from tvm import relax

from irviz.core.views import module_diff as diff_mod
from irviz.core.views.ir_size import ir_size, main_binding_count


def _module():
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((2, 3), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(relax.op.add(x, x))
            b = bb.emit(relax.op.multiply(a, x))
            c = bb.emit(relax.op.nn.relu(b))
            out = bb.emit_output(c)
        bb.emit_func_output(out)
    return bb.get()


def test_counts_bindings_prim_funcs_and_tir_lines_before_and_after_legalize():
    mod = _module()
    assert ir_size(mod) == {"bindings": 4, "prim_funcs": 0, "tir_lines": 0}

    lowered = relax.transform.LegalizeOps()(mod)
    size = ir_size(lowered)
    prims = [gv.name_hint for gv, f in lowered.functions.items() if isinstance(f, tvm.tirx.PrimFunc)]
    assert size["prim_funcs"] == len(prims) == 3            # add, multiply, relu
    assert size["bindings"] == main_binding_count(lowered) == 4
    # every prim_func has at least its signature, one loop nest and a store
    assert size["tir_lines"] == sum(len(diff_mod.function_text(lowered, n).splitlines()) for n in prims)
    assert size["tir_lines"] >= 3 * 5


def test_a_module_without_main_has_no_bindings():
    lowered = relax.transform.LegalizeOps()(_module())
    only_tir = tvm.IRModule({gv: f for gv, f in lowered.functions.items()
                             if isinstance(f, tvm.tirx.PrimFunc)})
    size = ir_size(only_tir)
    assert size["bindings"] == 0 and size["prim_funcs"] == 3
