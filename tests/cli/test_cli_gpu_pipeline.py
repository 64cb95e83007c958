"""The gpu pipeline from the command line: `irviz export --pipeline gpu --target cuda` writes one
CUDA source per kernel with its __global__ function and thread bindings, on a model irviz has no
sample of; `check --pipeline gpu` builds for cuda (its default) and stops there without a GPU; a
CPU target for it stops before the model loads."""
import json
import re
import textwrap

from irviz.cli.main import main
from irviz.cli.check import EXIT_NOT_RUN
from irviz.core.target import not_runnable_here, resolve_target

MODEL = textwrap.dedent('''
    import torch
    from torch import nn


    class Mixer(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.norm = nn.LayerNorm(8)
            self.token = nn.Linear(64, 64)
            self.head = nn.Linear(8, 5)

        def forward(self, x):
            h = torch.relu(self.conv(x)).flatten(2)      # (1, 8, 64)
            h = h + self.token(h)                         # mix across positions
            h = self.norm(h.transpose(1, 2))              # (1, 64, 8)
            return torch.softmax(self.head(h).mean(1), dim=-1)


    def get_model():
        torch.manual_seed(3)
        return Mixer().eval(), (torch.randn(1, 3, 8, 8),)
''')


def test_export_writes_one_cuda_source_per_kernel_with_thread_bindings(tmp_path, capsys):
    model = tmp_path / "mixer.py"
    model.write_text(MODEL)
    out = tmp_path / "out"
    assert main(["export", str(model), "--pipeline", "gpu", "--target", "cuda", "--no-build",
                 "--out", str(out)]) == 0
    summary = json.loads((out / "steps.json").read_text())
    assert [s["pass"] for s in summary["steps"]][-5:] == [
        "DlightGPUMatmul", "DlightGPUGEMV", "DlightGPUReduction", "DlightGPUGeneralReduction",
        "DlightGPUFallback"]
    kernels = summary["code"]["kernels"]
    assert len(kernels) >= 5 and not [n for n, k in kernels.items() if k["error"]]
    files = sorted((out / "code" / "cuda").glob("*.cu"))
    assert [f.stem for f in files] == sorted(kernels)
    for f in files:
        src = f.read_text()
        assert re.search(r"extern \"C\" __global__ void __launch_bounds__\(\d+\) \w+_kernel\(", src), f.name
        assert "threadIdx.x" in src and src.count("__global__") == len(kernels[f.stem]["symbols"])
    assert any("__shared__" in f.read_text() for f in files)  # the matmul/reduction rules' tiles
    assert f"wrote {len(kernels)} kernels' code for cuda" in capsys.readouterr().out


def test_check_of_the_gpu_pipeline_builds_for_cuda_by_default(capsys):
    code = main(["check", "sample:mlp", "--pipeline", "gpu", "--json", "-"])
    summary = json.loads(capsys.readouterr().out)
    assert summary["target"] == "cuda" and summary["target_dict"] == {"kind": "cuda", "arch": "sm_80"}
    if not_runnable_here(resolve_target("cuda")) is None:
        assert code == 0 and summary["ran"]
    else:
        assert code == EXIT_NOT_RUN and summary["ok"] and not summary["ran"] and summary["build_seconds"] > 0


def test_the_gpu_pipeline_with_a_cpu_target_stops_before_loading(capsys):
    assert main(["check", "sample:mlp", "--pipeline", "gpu", "--target", "x86-avx512"]) == 1
    err = capsys.readouterr().err
    assert "pipeline failed: DlightGPUMatmul schedules kernels for a GPU, but the target is a CPU" in err
    assert "load" not in err.split("pipeline failed", 1)[0]


def test_code_of_the_gpu_pipeline_shows_cuda_launch_shapes_by_default(capsys):
    assert main(["code", "sample:mlp", "--pipeline", "gpu"]) == 0
    out = capsys.readouterr().out
    assert "step     10 (DlightGPUFallback)" in out and out.splitlines()[1].startswith("target   cuda ")
    rows = [ln.split() for ln in out.splitlines() if ln.startswith("fused_")]
    assert len(rows) == 2 and all(re.fullmatch(r"\d+x\d+x1", r[2]) for r in rows)  # block shapes
