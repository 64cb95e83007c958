"""`irviz targets`, `irviz code` and `irviz export --target`: the targets by name, a step's kernels
compiled for one (a table of counts, or one kernel's code), and the code written beside the steps."""
import json
import re

from irviz.cli import main


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
    from irviz.core.passes.pipelines import PIPELINES

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
