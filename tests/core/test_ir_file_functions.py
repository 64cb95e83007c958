"""IR files with several Relax functions and extern calls: any function runs (--func), its sizes
are known before a build, every function is in the Relax graph, an extern that is not registered
is flagged, and one that raises is named without taking the engine down."""
from __future__ import annotations

import json
import textwrap

import pytest

pytest.importorskip("tvm")

from irviz.cli import main  # noqa: E402
from irviz.core.errors import RunError  # noqa: E402
from irviz.core.workspace import Workspace  # noqa: E402

# the course's MyModule, cut down: one prim_func, main and a second public function
MODULE = '''
import numpy as np
import tvm
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T


@I.ir_module
class MyModule:
    @T.prim_func(s_tir=True)
    def relu0(x: T.handle, y: T.handle):
        n = T.int64()
        X = T.match_buffer(x, (1, n), "float32")
        Y = T.match_buffer(y, (1, n), "float32")
        for i, j in T.grid(1, n):
            with T.sblock("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.max(X[vi, vj], T.float32(0))

    @R.function
    def main(x: R.Tensor((1, "m"), "float32"), w: R.Tensor(("n", "m"), "float32")):
        m, n = T.int64(), T.int64()
        with R.dataflow():
            lv0 = R.matmul(x, R.permute_dims(w))
            out = R.call_dps_packed("relu0", (lv0,), R.Tensor((1, n), "float32"))
            R.output(out)
        return out

    @R.function
    def doubled(x: R.Tensor((1, "m"), "float32"), w: R.Tensor(("n", "m"), "float32")):
        m, n = T.int64(), T.int64()
        with R.dataflow():
            lv0 = R.matmul(x, R.permute_dims(w))
            lv1 = R.add(lv0, lv0)
            R.output(lv1)
        return lv1
'''

INPUTS = '''
def get_inputs():
    rng = np.random.default_rng(0)
    return rng.standard_normal((1, 6)).astype("float32"), rng.standard_normal((4, 6)).astype("float32")


def reference(x, w):
    return np.maximum(x @ w.T, 0)
'''

# MyModuleWithExternCall: main calls two functions that only Python can provide
EXTERN = '''
import numpy as np
import tvm
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T
{register}

@I.ir_module
class MyModuleWithExternCall:
    @R.function
    def main(x: R.Tensor((1, "m"), "float32"), w0: R.Tensor(("n", "m"), "float32"),
             b0: R.Tensor(("n",), "float32")):
        m, n = T.int64(), T.int64()
        with R.dataflow():
            lv0 = R.call_dps_packed("{name}.linear", (x, w0, b0), R.Tensor((1, n), "float32"))
            out = R.call_dps_packed("{name}.relu", (lv0,), R.Tensor((1, n), "float32"))
            R.output(out)
        return out


def get_inputs():
    rng = np.random.default_rng(0)
    return tuple(rng.standard_normal(s).astype("float32") for s in [(1, 5), (3, 5), (3,)])
'''

REGISTER = '''
@tvm.register_global_func("{name}.linear", override=True)
def _linear(x, w, b, out):
    out.copyfrom(x.numpy() @ w.numpy().T + b.numpy())


@tvm.register_global_func("{name}.relu", override=True)
def _relu(x, out):
    {relu_body}
'''


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def _extern_file(tmp_path, name, registered=True, raises=False):
    relu_body = ("raise ValueError('relu got a bad tensor')" if raises else
                 "out.copyfrom(np.maximum(x.numpy(), 0))")
    register = REGISTER.format(name=name, relu_body=relu_body) if registered else ""
    return _write(tmp_path, f"{name}.py", EXTERN.replace("{register}", register).replace("{name}", name))


def _check(*argv, capsys):
    code = main(["check", *map(str, argv), "--json", "-", "--repeats", "1"])
    return code, json.loads(capsys.readouterr().out)


# --------------------------------------------------------------------------------------------
# any Relax function runs


def test_check_runs_the_function_named_by_func(tmp_path, capsys):
    path = _write(tmp_path, "two_funcs.py", MODULE + INPUTS)
    code, summary = _check(path, capsys=capsys)
    assert code == 0 and summary["func"] == "main" and summary["allclose"] is True
    # doubled computes 2 x @ w.T, which reference() does not: a mismatch proves doubled ran
    code, summary = _check(path, "--func", "doubled", capsys=capsys)
    assert code == 1 and summary["func"] == "doubled" and summary["failed_stage"] == "compare"


def test_func_without_reference_runs_on_made_up_inputs(tmp_path, capsys):
    path = _write(tmp_path, "bare.py", MODULE)
    code, summary = _check(path, "--func", "doubled", "--dim", "m=6,n=4", capsys=capsys)
    assert code == 0 and summary["func"] == "doubled" and summary["reference"] == "none"
    assert summary["tvm_ms"] > 0


def test_a_missing_function_lists_the_ones_there_are(tmp_path, capsys):
    path = _write(tmp_path, "two_funcs.py", MODULE + INPUTS)
    code, summary = _check(path, "--func", "mian", capsys=capsys)
    assert code == 1 and summary["failed_stage"] == "run"
    assert "'mian'" in summary["error"] and "main, doubled" in summary["error"]
    # the prim_func is not a Relax function to run
    assert "relu0" not in summary["error"].split("it has:")[1].split("\n")[0]


def test_export_reports_the_function_it_ran(tmp_path, capsys):
    path = _write(tmp_path, "two_funcs.py", MODULE + INPUTS)
    out = tmp_path / "trace"
    assert main(["export", str(path), "--func", "doubled", "--out", str(out)]) == 0
    steps = json.loads((out / "steps.json").read_text())
    runs = [s["run"] for s in steps["steps"] if s.get("run")]
    assert runs and runs[-1]["func"] == "doubled"
    assert "(doubled)" in (out / "report.html").read_text()


def test_run_sizes_in_order_of_appearance_and_where_inputs_come_from(tmp_path):
    ws = Workspace()
    ws.open(str(_write(tmp_path, "bare.py", MODULE)))
    assert ws.run_sizes(func="doubled") == {"func": "doubled", "sizes": ["m", "n"], "inputs": "random",
                                            "dims": {}}
    with pytest.raises(RunError, match="m, n"):
        ws.build_run(repeats=1)
    _, res = ws.build_run(repeats=1, dims={"m": 6, "n": 4})
    assert res.func == "main" and res.allclose is None and res.tvm_ms > 0
    ws.open(str(_write(tmp_path, "with_inputs.py", MODULE + INPUTS)))
    assert ws.run_sizes()["inputs"] == "get_inputs"


def test_dims_for_another_function_are_asked_before_the_build(tmp_path):
    ws = Workspace()
    ws.open(str(_write(tmp_path, "bare.py", MODULE)))
    with pytest.raises(RunError, match="doubled has symbolic sizes with no value: m, n"):
        ws.build_run(repeats=1, func="doubled")
    assert ws._last_build is None   # nothing was built for a run that could not start


def test_get_inputs_that_do_not_fit_name_the_parameter_for_any_function(tmp_path):
    bad = INPUTS.replace("(4, 6)", "(4, 5)")
    ws = Workspace()
    ws.open(str(_write(tmp_path, "bad.py", MODULE + bad)))
    with pytest.raises(RunError) as info:
        ws.build_run(repeats=1, func="doubled")
    msg = info.value.user_message()
    assert "w has shape (4, 5)" in msg and "doubled expects (n, m)" in msg and "m = 6 (from x)" in msg
