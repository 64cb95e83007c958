"""Modules of PrimFuncs only (te.create_prim_func, @T.prim_func without Relax): they open, step,
and run one function alone with its outputs allocated, compared with reference()."""
from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

pytest.importorskip("tvm")

from irviz.cli.main import main
from irviz.core.backend.step_bisect import bisect, check_module, reference_for
from irviz.core.errors import RunError
from irviz.core.passes import get_pipeline
from irviz.core.workspace import Workspace

TE_MM = '''
import numpy as np
from tvm import te

A = te.placeholder((64, 32), name="A", dtype="float32")
B = te.placeholder((32, 16), name="B", dtype="float32")
k = te.reduce_axis((0, 32), name="k")
C = te.compute((64, 16), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")


def get_irmodule():
    return te.create_prim_func([A, B, C])   # a PrimFunc, as the chapter has it


_rng = np.random.default_rng(1)


def get_inputs():
    return _rng.standard_normal((64, 32)).astype("float32"), np.ones((32, 16), "float32")


def reference(a, b):
    return a @ b
'''

TWO_PRIMS = '''
from tvm.script import ir as I
from tvm.script import tirx as T


@I.ir_module
class Prims:
    @T.prim_func(s_tir=True)
    def add_one(a: T.handle, b: T.handle):
        n = T.int64()
        A = T.match_buffer(a, (n, 4), "float32")
        B = T.match_buffer(b, (n, 4), "float32")
        for i, j in T.grid(n, 4):
            with T.sblock("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] + T.float32(1)

    @T.prim_func(s_tir=True)
    def double(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.sblock("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi] * T.float32(2)


def reference(a):
    return a + 1
'''


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def _check(*argv, capsys):
    code = main(["check", *map(str, argv), "--json", "-", "--repeats", "1"])
    return code, json.loads(capsys.readouterr().out)


def test_a_te_prim_func_runs_against_its_reference_at_every_scheduling_step(tmp_path):
    ws = Workspace()
    ws.open(str(_write(tmp_path, "te_mm.py", TE_MM)), planned=get_pipeline("tir-cpu"))
    assert list(ws.session.steps[0].mod.functions)[0].name_hint == "main"
    ws.run_to_end()
    changed = [st for st in ws.session.steps[1:] if st.changed]
    assert changed, "the TensorIR passes scheduled nothing"
    _, res = ws.build_run(repeats=1)
    assert res.func == "main" and res.allclose is True and res.max_abs_error < 1e-4
    assert res.outputs == 1 and res.kernels[0].name == "main"
    ref = reference_for(ws)
    assert ref.what == "reference()"
    assert all(check_module(st.mod, ref, index=st.index).ok for st in ws.session.steps)
    assert bisect(ws.session, ref).first_bad is None
    trace = ws.latency_trace(steps=[0, len(ws.session.steps) - 1], repeats=1)
    assert all(e["ok"] and e["tvm_ms"] > 0 for e in trace), trace
    # the TensorIR pane's data: the loops of the function
    from irviz.core.views.graph import tir_functions

    loops = tir_functions(ws.session.steps[0].mod)[0]["loops"]
    assert len(loops) == 3


def test_func_picks_a_prim_func_and_a_symbolic_size_needs_dim(tmp_path, capsys):
    path = _write(tmp_path, "prims.py", TWO_PRIMS)
    code, s = _check(path, capsys=capsys)
    assert code != 0 and s["failed_stage"] == "run"
    assert "add_one has symbolic sizes with no value: n" in s["error"]
    assert "--func add_one --dim n=" in s["error"]
    code, s = _check(path, "--dim", "n=5", capsys=capsys)
    assert code == 0 and s["func"] == "add_one" and s["allclose"] is True
    code, s = _check(path, "--func", "nope", capsys=capsys)
    assert "has no function 'nope' to run; it has: add_one, double" in s["error"]
    # double has no reference of its own: reference() is add_one's, so the outputs differ
    code, s = _check(path, "--func", "double", capsys=capsys)
    assert s["func"] == "double" and s["allclose"] is False and s["failed_stage"] == "compare"


def test_outputs_are_allocated_and_random_inputs_without_get_inputs(tmp_path):
    ws = Workspace()
    ws.open(str(_write(tmp_path, "prims.py", TWO_PRIMS.replace("def reference", "def _unused"))))
    assert ws.run_sizes(func="add_one")["sizes"] == ["n"]
    _, res = ws.build_run(func="double", repeats=1)
    assert res.allclose is None and res.verdict == "ran"
    from irviz.core.backend import prim_run

    pa = prim_run.prim_args(ws.session.steps[0].mod, "add_one", dims={"n": 3})
    assert pa.outputs == [1] and pa.args[1].shape == (3, 4) and not pa.args[1].any()
    out = prim_run.call_prim(prim_run.build_prim(ws.session.steps[0].mod, "add_one"), pa)
    np.testing.assert_allclose(out[0], pa.args[0] + 1)


def test_get_inputs_with_the_output_buffer_and_wrong_shapes(tmp_path):
    given = TE_MM.replace('np.ones((32, 16), "float32")', 'np.ones((32, 16), "float32"), np.zeros((64, 16), "float32")')
    ws = Workspace()
    ws.open(str(_write(tmp_path, "all.py", given)))
    assert ws.build_run(repeats=1)[1].allclose is True
    ws.open(str(_write(tmp_path, "bad.py", TE_MM.replace("np.ones((32, 16)", "np.ones((16, 32)"))))
    with pytest.raises(RunError, match=r"B has shape \(16, 32\); main expects \(32, 16\)"):
        ws.build_run(repeats=1)


def test_the_engine_offers_the_prim_funcs_to_run_and_runs_one(tmp_path):
    """What the app asks: the Run pane's function choice, the TensorIR list, a run of one."""
    from irviz.engine import Engine

    eng = Engine(type("Chan", (), {"send": lambda self, msg: json.dumps(msg)})())

    def ok(cmd, **args):
        reply = eng.handle({"id": 1, "cmd": cmd, "args": args})
        json.dumps(reply, allow_nan=False)
        assert reply["ok"], reply.get("error")
        return reply["result"]

    state = ok("open", spec=str(_write(tmp_path, "prims.py", TWO_PRIMS)), pipeline="zero")
    assert state["run_functions"] == ["add_one", "double"]
    assert state["relax_functions"] == []
    assert {f["name"] for f in ok("tir_functions", step=0)} == {"add_one", "double"}
    assert ok("run_sizes", func="add_one")["sizes"] == ["n"]
    reply = eng.handle({"id": 2, "cmd": "build_run", "args": {"func": "add_one", "repeats": 1}})
    assert not reply["ok"] and "symbolic sizes with no value: n" in reply["error"]["message"]
    res = ok("build_run", func="add_one", dims={"n": 2}, repeats=1)
    assert res["allclose"] is True and res["func"] == "add_one"


def test_the_tile_search_times_a_prim_func_of_a_module_without_relax(tmp_path):
    """Big enough for CPUTuneReductions to measure tiles: it builds the kernel alone, with no
    Relax main to copy the call from, even when the kernel is itself called main."""
    from irviz.core.tuning import decision_cache

    decision_cache.set_cache_enabled(False)
    try:
        big = TE_MM.replace("(64, 32)", "(64, 64)").replace("(32, 16)", "(64, 64)") \
                   .replace("(0, 32)", "(0, 64)").replace("(64, 16)", "(64, 64)")
        ws = Workspace()
        ws.open(str(_write(tmp_path, "te_mm64.py", big)), planned=get_pipeline("tir-cpu"))
        ws.run_to_end()
        assert ws.session.error is None, ws.session.error.user_message()
        tuned = next(st for st in ws.session.steps if st.pass_name == "CPUTuneReductions")
        assert "irviz.tile_search" in tuned.mod["main"].attrs
        _, res = ws.build_run(repeats=1)
        assert res.allclose is True
    finally:
        decision_cache.set_cache_enabled(True)
