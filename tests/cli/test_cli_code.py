"""`irviz targets`, `irviz code` and `irviz export --target`: the targets by name, a step's kernels
compiled for one (a table of counts, or one kernel's code), and the code written beside the steps."""
import json
import re

from irviz.cli.main import main


def test_targets_lists_names_as_tvm_dicts_and_what_builds_here(capsys):
    assert main(["targets", "--json", "-"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["targets"]}
    assert rows["aarch64"]["target"] == {"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mcpu": "cortex-a72"}
    assert rows["cuda"]["unavailable"] is None and rows["host"]["target"]["kind"] == "llvm"


def test_code_prints_one_kernels_neon_assembly_with_its_counts(capsys):
    assert main(["code", "sample:mlp", "--pipeline", "tir-cpu", "--target", "aarch64",
                 "--kernel", "fused_matmul_add_relu_prepacked"]) == 0
    out = capsys.readouterr().out
    head, counts, body = out.split("\n", 2)
    from irviz.core.passes.named_pipelines import PIPELINES

    last = [inv.name for inv in PIPELINES["tir-cpu"][1]].index("CPUPrepackWeights") + 1  # step 0 is the import
    assert "fused_matmul_add_relu_prepacked on aarch64" in head and f"step {last} (CPUPrepackWeights)" in head
    assert re.match(r"# \d+ instructions, \d+ vector \(128:\d+\), \d+ FMA \(\d+ vector\)", counts)
    assert re.search(r"\bfmla\s+v\d+\.4s", body) and "fused_matmul1_add1" not in body


def test_an_unknown_target_stops_before_loading_and_names_the_available_ones(capsys):
    assert main(["code", "sample:mlp", "--target", "x86-avx1024"]) == 1
    err = capsys.readouterr().err
    assert "unknown target 'x86-avx1024'" in err and "host, x86-avx2, x86-avx512, aarch64, cuda" in err


def test_export_writes_each_kernels_cuda_source_and_counts(tmp_path):
    assert main(["export", "sample:mlp", "--target", "cuda", "--no-build", "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "steps.json").read_text())
    code = summary["code"]
    assert code["kind"] == "cuda" and code["dir"] == "code/cuda" and code["step"] == len(summary["steps"]) - 1
    assert set(code["kernels"]) == {"fused_matmul_add_relu", "fused_matmul1_add1"}
    for name, k in code["kernels"].items():
        (path,) = k["files"]
        src = (tmp_path / path).read_text()
        assert path == f"code/cuda/{name}.cu" and "__global__ void __launch_bounds__" in src
        assert src.count("__global__") == len(k["symbols"]) == 1  # its own, no other's declaration
        assert "#include" in src and "threadIdx" in src and k["launch"][0]["block"][0] > 1
    assert summary["steps"][-1]["code_totals"]["shared_bytes"] == sum(
        k["counts"]["shared_bytes"] for k in code["kernels"].values()) > 0


def test_code_diffs_one_kernel_between_two_targets(capsys):
    assert main(["code", "sample:mlp", "--pipeline", "tir-cpu", "--kernel", "fused_matmul_add_relu_prepacked",
                 "--target", "x86-avx2", "--diff-target", "x86-avx512"]) == 0
    out = capsys.readouterr().out
    assert "# --- x86-avx2: " in out and "# +++ x86-avx512: " in out
    removed = [ln for ln in out.splitlines() if ln.startswith("-  ")]
    added = [ln for ln in out.splitlines() if ln.startswith("+  ")]
    assert any("%ymm" in ln for ln in removed) and any(re.search(r"vfmadd\w+ps.*%zmm", ln) for ln in added)
    assert not any("zmm" in ln for ln in removed)


LEARNER_MODULE = '''
from tvm.script import ir as I, relax as R, tirx as T


@I.ir_module
class Learner:
    @T.prim_func(s_tir=True)
    def linear0(X: T.Buffer((16, 48), "float32"), W: T.Buffer((32, 48), "float32"),
                Z: T.Buffer((16, 32), "float32")):
        T.func_attr({"global_symbol": "linear0", "tir.noalias": True})
        for i in T.parallel(16):
            for j, k in T.grid(32, 48):
                with T.sblock("Z"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    with T.init():
                        Z[vi, vj] = T.float32(0)
                    Z[vi, vj] = Z[vi, vj] + X[vi, vk] * W[vj, vk]

    @R.function
    def main(x: R.Tensor((16, 48), "float32"), w: R.Tensor((32, 48), "float32")):
        cls = Learner
        with R.dataflow():
            z = R.call_tir(cls.linear0, (x, w), out_ty=R.Tensor((16, 32), "float32"))
            R.output(z)
        return z
'''


def test_code_counts_a_parallel_kernel_over_its_entry_and_lambda(tmp_path, capsys):
    """The course's "tir.noalias" leaves the buffers aliasable: LLVM inlines the body into the FFI
    entry, which launches the parallel lambda; the counts take both and say so."""
    path = tmp_path / "learner.py"
    path.write_text(LEARNER_MODULE)
    assert main(["code", str(path), "--target", "aarch64"]) == 0
    out = capsys.readouterr().out
    row = next(ln for ln in out.splitlines() if ln.startswith("linear0 "))
    assert row.endswith("TVMBackendParallelLaunch×1")  # the calls out, from the inlined entry
    parts = out.splitlines()[out.splitlines().index(row) + 1]
    assert "__tvm_ffi_linear0" in parts and "parallel lambda .L__tvm_parallel_lambda" in parts
