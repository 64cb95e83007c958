"""IR files: a Python file defining an IRModule opens, steps, builds, runs and compares like a model."""
from __future__ import annotations

import json
import textwrap

import pytest

pytest.importorskip("tvm")

from irviz.cli.main import main
from irviz.core.errors import LoadError, RunError
from irviz.core.passes import get_pipeline
from irviz.core.workspace import Workspace

HEADER = '''
import numpy as np
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T
'''

# the course's MyModule: prim_funcs with symbolic sizes, main through call_dps_packed
MY_MODULE = '''
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

    @T.prim_func(s_tir=True)
    def linear0(x: T.handle, w: T.handle, b: T.handle, z: T.handle):
        m, n = T.int64(), T.int64()
        X = T.match_buffer(x, (1, m), "float32")
        W = T.match_buffer(w, (n, m), "float32")
        B = T.match_buffer(b, (n,), "float32")
        Z = T.match_buffer(z, (1, n), "float32")
        Y = T.alloc_buffer((1, n), "float32")
        for i, j, k in T.grid(1, n, m):
            with T.sblock("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]
        for i, j in T.grid(1, n):
            with T.sblock("Z"):
                vi, vj = T.axis.remap("SS", [i, j])
                Z[vi, vj] = Y[vi, vj] + B[vj]

    @R.function
    def main(x: R.Tensor((1, "m"), "float32"), w0: R.Tensor(("n", "m"), "float32"),
             b0: R.Tensor(("n",), "float32"), w1: R.Tensor(("k", "n"), "float32"),
             b1: R.Tensor(("k",), "float32")):
        m, n, k = T.int64(), T.int64(), T.int64()
        with R.dataflow():
            lv0 = R.call_dps_packed("linear0", (x, w0, b0), R.Tensor((1, n), "float32"))
            lv1 = R.call_dps_packed("relu0", (lv0,), R.Tensor((1, n), "float32"))
            out = R.call_dps_packed("linear0", (lv1, w1, b1), R.Tensor((1, k), "float32"))
            R.output(out)
        return out
'''

INPUTS = '''
def get_inputs():
    rng = np.random.default_rng(0)
    return tuple(rng.standard_normal(s).astype("float32")
                 for s in [(1, 20), (7, 20), (7,), (3, 7), (3,)])
'''

REFERENCE = '''
def reference(x, w0, b0, w1, b1):
    return np.maximum(x @ w0.T + b0, 0) @ w1.T + b1
'''


def _write(tmp_path, name, *parts):
    path = tmp_path / name
    path.write_text(HEADER + "".join(textwrap.dedent(p) for p in parts))
    return path


def _check(*argv, capsys):
    code = main(["check", *map(str, argv), "--json", "-", "--repeats", "1"])
    return code, json.loads(capsys.readouterr().out)


def test_course_module_with_inputs_and_reference_steps_builds_and_matches(tmp_path):
    path = _write(tmp_path, "my_module.py", MY_MODULE, INPUTS, REFERENCE)
    ws = Workspace()
    ws.open(str(path), planned=get_pipeline("zero"))
    assert ws.model_name == "my_module:MyModule" and ws.captured is None
    ws.run_to_end()
    _, res = ws.build_run(repeats=1)
    assert res.allclose is True and res.max_abs_error < 1e-4 and ws.has_reference


def test_check_compares_with_reference_and_says_so(tmp_path, capsys):
    path = _write(tmp_path, "my_module.py", MY_MODULE, INPUTS, REFERENCE)
    code, summary = _check(path, capsys=capsys)
    assert code == 0 and summary["ok"] and summary["reference"] == "reference()"
    assert summary["allclose"] is True and summary["torch_ms"] is None


def test_a_wrong_reference_is_a_mismatch(tmp_path, capsys):
    path = _write(tmp_path, "my_module.py", MY_MODULE, INPUTS, REFERENCE.replace("+ b1", "+ 2 * b1"))
    code, summary = _check(path, capsys=capsys)
    assert code == 1 and summary["failed_stage"] == "compare" and "reference()" in summary["error"]


def test_symbolic_sizes_need_values_without_get_inputs(tmp_path, capsys):
    path = _write(tmp_path, "bare.py", MY_MODULE)
    code, summary = _check(path, capsys=capsys)
    assert code == 1 and summary["failed_stage"] == "run"
    assert "k, m, n" in summary["error"] and "--dim" in summary["error"]
    code, summary = _check(path, "--dim", "m=20,n=7,k=3", capsys=capsys)
    # built and ran; with nothing to compare with it is not a pass of the numbers, but not a failure
    assert code == 0 and summary["reference"] == "none" and summary["allclose"] is None


def test_get_inputs_that_do_not_fit_name_the_parameter(tmp_path):
    bad = INPUTS.replace("(7, 20), (7,)", "(7, 20), (6,)")
    path = _write(tmp_path, "bad_inputs.py", MY_MODULE, bad)
    ws = Workspace()
    ws.open(str(path))
    with pytest.raises(RunError, match=r"b0 has shape \(6,\)"):
        ws.build_run(repeats=1)
    few = INPUTS.replace("(3, 7), (3,)", "(3, 7)")
    ws.open(str(_write(tmp_path, "few_inputs.py", MY_MODULE, few)))
    with pytest.raises(RunError, match="returned 4 values; main takes 5"):
        ws.build_run(repeats=1)


def test_get_irmodule_with_a_registered_library_function(tmp_path, capsys):
    # the course's BlockBuilder + emit_te, and a library function registered in Python (torch via
    # DLPack), called with call_dps_packed
    path = tmp_path / "built.py"
    path.write_text(textwrap.dedent('''
        import numpy as np
        import torch
        import tvm
        from tvm import relax, te, topi

        @tvm.register_global_func("irviz_test.torch_relu", override=True)
        def torch_relu(x, out):
            torch.maximum(torch.from_dlpack(x), torch.tensor(0.0), out=torch.from_dlpack(out))

        def get_irmodule():
            bb = relax.BlockBuilder()
            x = relax.Var("x", relax.TensorType((4, 8), "float32"))
            w = relax.Var("w", relax.TensorType((8, 8), "float32"))
            with bb.function("main", [x, w]):
                with bb.dataflow():
                    lv = bb.emit_te(topi.nn.matmul, x, w)
                    out = bb.emit(relax.call_dps_packed("irviz_test.torch_relu", [lv],
                                                        relax.TensorType((4, 8), "float32")))
                    gv = bb.emit_output(out)
                bb.emit_func_output(gv)
            return bb.get()

        def get_inputs():
            rng = np.random.default_rng(1)
            return rng.standard_normal((4, 8)).astype("float32"), rng.standard_normal((8, 8)).astype("float32")

        def reference(x, w):
            return np.maximum(x @ w, 0)
    '''))
    code, summary = _check(path, "--pipeline", "zero", capsys=capsys)
    assert code == 0 and summary["allclose"] is True, summary["error"]


def test_a_file_with_two_modules_asks_which(tmp_path, capsys):
    path = _write(tmp_path, "two.py", MY_MODULE, MY_MODULE.replace("class MyModule", "class Other"), INPUTS,
                  REFERENCE)
    code, summary = _check(path, capsys=capsys)
    assert code == 1 and summary["failed_stage"] == "load"
    assert "MyModule, Other" in summary["error"] and "two.py:MyModule" in summary["error"]
    code, summary = _check(f"{path}:Other", capsys=capsys)
    assert code == 0 and summary["allclose"] is True


def test_an_exported_step_checks_like_an_ir_file(tmp_path, capsys):
    assert main(["export", "sample:mlp", "--pipeline", "zero", "--out", str(tmp_path / "t"), "--no-build"]) == 0
    capsys.readouterr()
    step = sorted((tmp_path / "t").glob("step_05_*.py"))[0]
    code, summary = _check(step, capsys=capsys)
    assert code == 0 and summary["reference"] == "none" and summary["tvm_ms"] > 0


def test_a_file_with_neither_model_nor_module_says_both(tmp_path):
    path = tmp_path / "nothing.py"
    path.write_text("x = 1\n")
    ws = Workspace()
    with pytest.raises(LoadError) as info:
        ws.open(str(path))
    assert "get_model" in info.value.user_message() and "@I.ir_module" in info.value.user_message()
