"""Parsing TVMScript back (export checks, opening a step file) without inspect's source look-ups:
the same module comes back, inspect is TVM's own again afterwards, and a module written as a
Python class still parses inside the context."""
from __future__ import annotations

import inspect

import tvm
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

from irviz.core.export.step_files import parse_script
from irviz.core.tvm_compat import quick_script_parsing, structural_equal


def _module():
    bb = tvm.relax.BlockBuilder()
    x = tvm.relax.Var("x", tvm.relax.TensorType((4, 8), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(tvm.relax.op.add(x, x))
            b = bb.emit(tvm.relax.op.multiply(a, x))
            gv = bb.emit_output(tvm.relax.op.nn.relu(b))
        bb.emit_func_output(gv)
    return tvm.relax.transform.LegalizeOps()(bb.get())


def test_parse_back_looks_up_no_module_source(monkeypatch):
    mod = _module()
    calls = []
    real = inspect.getmodule
    monkeypatch.setattr(inspect, "getmodule", lambda *a, **k: calls.append(a) or real(*a, **k))
    back = parse_script(mod.script(), [])
    assert structural_equal(back, mod)
    # three prim_funcs and main: inspect.stack() would have looked up modules for each
    assert calls == []


def test_inspect_is_restored_and_a_class_module_still_parses():
    import tvm.tirx.script.parser.entry as tir_entry

    with quick_script_parsing(), quick_script_parsing():  # nested: restored once, at the end
        assert tir_entry.inspect is not inspect

        @I.ir_module
        class Module:
            @T.prim_func(s_tir=True)
            def add_one(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
                for i in range(4):
                    with T.sblock("b"):
                        vi = T.axis.spatial(4, i)
                        B[vi] = A[vi] + T.float32(1)

            @R.function
            def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
                cls = Module
                y = R.call_tir(cls.add_one, (x,), out_ty=R.Tensor((4,), "float32"))
                return y

        assert tir_entry.inspect is not inspect
    assert tir_entry.inspect is inspect
    assert {g.name_hint for g in Module.get_global_vars()} == {"add_one", "main"}
