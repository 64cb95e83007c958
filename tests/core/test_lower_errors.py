"""A kernel that does not lower for a target names itself and the line of its TensorIR the failure
points at, and the other kernels still show; a build that fails on one kernel says which."""
from __future__ import annotations

import pytest
import tvm

from irviz.cli.main import main as cli_main
from irviz.core.backend.build import build
from irviz.core.backend.kernel_code import kernel_code
from irviz.core.backend.lower_errors import failing_kernel, failing_line
from irviz.core.errors import BuildError
from irviz.core.tvm_compat import I, R, T
from irviz.core.views.module_diff import function_text


@I.ir_module
class Mixed:
    @T.prim_func(s_tir=True)
    def good(A: T.Buffer((256,), "float32"), B: T.Buffer((256,), "float32")):
        T.func_attr({"global_symbol": "good", "tirx.noalias": True})
        for i in range(256):
            with T.sblock("B"):
                vi = T.axis.spatial(256, i)
                B[vi] = A[vi] * T.float32(2)

    @T.prim_func(s_tir=True)
    def on_gpu(A: T.Buffer((256,), "float32"), B: T.Buffer((256,), "float32")):
        T.func_attr({"global_symbol": "on_gpu", "tirx.noalias": True, "tirx.is_scheduled": True})
        for bx in T.thread_binding(4, thread="blockIdx.x"):
            for tx in T.thread_binding(64, thread="threadIdx.x"):
                with T.sblock("B"):
                    vi = T.axis.spatial(256, bx * 64 + tx)
                    B[vi] = A[vi] + T.float32(1)

    @T.prim_func(s_tir=True)
    def no_blocks(A: T.Buffer((256,), "float32"), B: T.Buffer((256,), "float32")):
        T.func_attr({"global_symbol": "no_blocks", "tirx.noalias": True})
        for i in range(256):
            B[i] = A[i] - T.float32(1)

    @R.function
    def main(x: R.Tensor((256,), "float32")):
        cls = Mixed
        with R.dataflow():
            y = R.call_tir(cls.good, (x,), out_ty=R.Tensor((256,), "float32"))
            z = R.call_tir(cls.on_gpu, (y,), out_ty=R.Tensor((256,), "float32"))
            R.output(z)
        return z


def _line(name: str, n: int) -> str:
    return function_text(Mixed, name).splitlines()[n - 1]


def test_a_gpu_kernel_on_a_cpu_names_its_thread_binding_and_the_others_show():
    code = kernel_code(Mixed, "x86-avx2")
    bad = code.kernels["on_gpu"]
    assert bad.error.startswith("on_gpu does not compile for llvm")
    assert f"(line {bad.error_line} of its TensorIR: for bx in T.thread_binding(4" in bad.error
    assert "T.thread_binding(4" in _line("on_gpu", bad.error_line)
    for name in ("good", "no_blocks"):
        k = code.kernels[name]
        assert k.error is None and f"{name}_compute_" in k.code["asm"] and k.counts["vector"] > 0


def test_a_kernel_dlight_cannot_take_for_cuda_names_the_loop_and_the_others_show():
    code = kernel_code(Mixed, "cuda")
    bad = code.kernels["no_blocks"]
    assert bad.error.startswith("no_blocks does not compile for cuda") and bad.error_line is not None
    assert _line("no_blocks", bad.error_line).strip() == "for i in range(256):"
    assert code.kernels["good"].error is None and "__global__" in code.kernels["good"].code["cuda"]
    assert code.kernels["on_gpu"].error is None  # scheduled by hand already: compiled as it is


def test_a_build_that_fails_on_one_kernel_names_it_and_its_line():
    with pytest.raises(BuildError) as e:
        build(Mixed, tvm.target.Target({"kind": "llvm"}))
    assert "kernel on_gpu (line " in e.value.message and "T.thread_binding(4" in e.value.message
    assert failing_kernel(tvm.IRModule({"good": Mixed["good"]}), tvm.target.Target({"kind": "llvm"})) is None


def test_failing_line_reads_what_tvm_quotes_or_names():
    text = "def f(A, B, C):\n    for i in range(4):\n        C[i] = A[i]\n        B[i] = C[i]\n"
    assert failing_line(text, "cuda", "expected the root block, but got:\nfor i in range(4):\n") == (
        2, "for i in range(4):")
    assert failing_line(text, "cuda", "Variable `B` is directly accessed by host memory") == (4, "B[i] = C[i]")
    assert failing_line(text, "llvm", "not implemented") is None


def test_code_prints_the_failed_kernels_line_and_the_others_counts(tmp_path, capsys):
    path = tmp_path / "mixed.py"
    path.write_text(
        "from tvm.script import ir as I\nfrom tvm.script import tirx as T\n\n\n@I.ir_module\n"
        "class Mixed:\n" + "".join(
            "    " + ln + "\n" for name in ("good", "on_gpu")
            for ln in ["@T.prim_func(s_tir=True)", *_def_lines(name)]))
    assert cli_main(["code", str(path), "--target", "x86-avx2", "--pipeline", "zero"]) == 1
    out = capsys.readouterr().out
    rows = {ln.split()[0]: ln for ln in out.splitlines() if ln.split() and ln.split()[0] in ("good", "on_gpu")}
    assert "not compiled: on_gpu does not compile for llvm" in rows["on_gpu"] and "of its TensorIR: for bx" in rows["on_gpu"]
    assert "256:" in rows["good"]  # its vector instructions, counted


def _def_lines(name: str) -> list[str]:
    """The kernel's TVMScript as printed, without its decorator line, indented as in a class."""
    lines = function_text(Mixed, name).splitlines()
    return [ln for ln in lines if not ln.startswith("@")]
