"""An IR file's get_inputs() / get_params() are called once per opened workspace: a learner's
get_inputs() that draws from a module-level generator gives other numbers on each call, and a run,
its reference() and a bisect must all see the same ones."""
from __future__ import annotations

import json
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("tvm")

from irviz.cli.main import main
from irviz.core.backend.step_bisect import bisect, reference_for
from irviz.core.passes import PassInvocation
from irviz.core.workspace import Workspace

# a hand-written module calling its prim_funcs by name, with a stateful get_inputs()
MODULE = '''
import numpy as np
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

rng = np.random.default_rng(11)
CALLS = {"get_inputs": 0, "get_params": 0}


@I.ir_module
class TwoLayer:
    @T.prim_func(s_tir=True)
    def relu0(x: T.handle, y: T.handle):
        n = T.int64()
        X = T.match_buffer(x, (1, n), "float32")
        Y = T.match_buffer(y, (1, n), "float32")
        for i, j in T.grid(1, n):
            with T.sblock("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.max(X[vi, vj], T.float32(0))

    @T.prim_func(s_tir=True)
    def dense0(x: T.handle, w: T.handle, z: T.handle):
        m, n = T.int64(), T.int64()
        X = T.match_buffer(x, (1, m), "float32")
        W = T.match_buffer(w, (n, m), "float32")
        Z = T.match_buffer(z, (1, n), "float32")
        for i, j, k in T.grid(1, n, m):
            with T.sblock("Z"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Z[vi, vj] = T.float32(0)
                Z[vi, vj] = Z[vi, vj] + X[vi, vk] * W[vj, vk]

    @R.function
    def main(x: R.Tensor((1, "m"), "float32"), w0: R.Tensor(("n", "m"), "float32"),
             w1: R.Tensor(("k", "n"), "float32")):
        m, n, k = T.int64(), T.int64(), T.int64()
        with R.dataflow():
            lv0 = R.call_dps_packed("dense0", (x, w0), R.Tensor((1, n), "float32"))
            lv1 = R.call_dps_packed("relu0", (lv0,), R.Tensor((1, n), "float32"))
            out = R.call_dps_packed("dense0", (lv1, w1), R.Tensor((1, k), "float32"))
            R.output(out)
        return out


def get_inputs():
    CALLS["get_inputs"] += 1
    return (rng.standard_normal((1, 12)).astype("float32"),)

PARAMS_LINE

def reference(x, w0, w1):
    return np.maximum(x @ w0.T, 0) @ w1.T
'''
# weights from a stateful get_params(), keyed by name
WITH_PARAMS = '''
def get_params():
    CALLS["get_params"] += 1
    return {"w0": rng.standard_normal((16, 12)).astype("float32"),
            "w1": rng.standard_normal((5, 16)).astype("float32")}
'''
# every parameter from get_inputs() (the tuple in parameter order, as the course writes it)
ALL_INPUTS = MODULE.replace(
    "    return (rng.standard_normal((1, 12)).astype(\"float32\"),)",
    "    return (rng.standard_normal((1, 12)).astype(\"float32\"),\n"
    "            rng.standard_normal((16, 12)).astype(\"float32\"),\n"
    "            rng.standard_normal((5, 16)).astype(\"float32\"))").replace("PARAMS_LINE", "")


def _user_module(path):
    """The module irviz executed the file as (the last one, when it was opened again)."""
    found = [m for m in list(sys.modules.values())
             if getattr(m, "__file__", None) == str(path) and hasattr(m, "CALLS")]
    assert found, path
    return found[-1]


def _write(tmp_path, text, name="stateful_mlp.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_check_runs_and_compares_on_the_same_draw_of_a_module_level_rng(tmp_path, capsys):
    path = _write(tmp_path, ALL_INPUTS)
    code = main(["check", str(path), "--pipeline", "LegalizeOps", "--json", "-"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0, summary
    assert summary["allclose"] is True and summary["max_abs_error"] < 1e-4, summary


def test_bisect_blames_no_step_and_get_inputs_is_called_once(tmp_path):
    path = _write(tmp_path, MODULE.replace("PARAMS_LINE", WITH_PARAMS))
    ws = Workspace()
    ws.open(str(path), planned=[PassInvocation("LegalizeOps"), PassInvocation("FoldConstant")])
    ws.run_to_end()
    assert len(ws.session.steps) == 3
    ref = reference_for(ws)
    result = bisect(ws.session, ref)
    assert result.first_bad is None, result.as_dict()
    ws.build_run(step=len(ws.session.steps) - 1)
    _, run = ws.build_run(step=0)
    assert run.max_abs_error < 1e-4
    assert _user_module(path).CALLS == {"get_inputs": 1, "get_params": 1}
    # the run's inputs are the reference's: one draw, reused
    named = ws._ir_named_inputs(ws.session.steps[0].mod, "main")
    assert np.array_equal(named["x"], ref.params["x"])


def test_reference_cannot_change_the_inputs_later_runs_get(tmp_path):
    text = ALL_INPUTS.replace("    return np.maximum(x @ w0.T, 0) @ w1.T",
                              "    out = np.maximum(x @ w0.T, 0) @ w1.T\n    x *= 0\n    return out")
    path = _write(tmp_path, text, "mutating_reference.py")
    ws = Workspace()
    ws.open(str(path), planned=[PassInvocation("LegalizeOps")])
    ws.run_to_end()
    for step in (0, 1, 1):
        _, run = ws.build_run(step=step)
        assert run.max_abs_error < 1e-4, (step, run.max_abs_error)
