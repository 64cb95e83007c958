"""Samples: listed with descriptions, each loads, forward gives the right shape, imports into Relax."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import irviz.samples
from irviz.core.errors import LoadError
from irviz.core.frontend.model_file import load_model
from irviz.core.frontend.sample_files import list_samples, sample_path

NAMES = ["mlp", "matmul_relu", "mul_add", "small_cnn", "resnet18", "gpt"]
OUT_SHAPES = {
    "mlp": (1, 10),
    "matmul_relu": (1, 128),
    "mul_add": (3, 4),
    "small_cnn": (1, 10),
    "resnet18": (1, 1000),
    "gpt": (1, 16, 256),
}


def test_list_samples():
    listed = list_samples()
    assert [n for n, _ in listed][: len(NAMES)] == NAMES
    for name, desc in listed:
        assert desc and "\n" not in desc and len(desc) < 120, (name, desc)


def test_sample_path_uses_installed_package():
    pkg_dir = Path(irviz.samples.__file__).resolve().parent
    for name in NAMES:
        p = sample_path(name)
        assert p.parent == pkg_dir and p.is_file() and p.name == f"{name}.py"


def test_samples_are_found_as_files_not_imported():
    """The core reads the samples folder as package data; importing irviz.samples would run the
    package above the core."""
    import subprocess
    import sys

    code = ("import sys; from irviz.core.frontend.sample_files import list_samples, sample_path; "
            "from irviz.core.frontend.model_file import load_model; "
            "assert list_samples() and sample_path('mlp').is_file(); load_model('sample:mul_add'); "
            "print(sorted(m for m in sys.modules if m.startswith('irviz.samples')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_unknown_sample():
    with pytest.raises(LoadError) as info:
        sample_path("alexnet")
    assert "alexnet" in info.value.message and "resnet18" in info.value.hint


@pytest.mark.parametrize("name", NAMES)
def test_sample_loads_and_runs(name):
    m = load_model(f"sample:{name}")
    assert m.name == name and not m.module.training
    assert isinstance(m.example_inputs, tuple) and all(isinstance(t, torch.Tensor) for t in m.example_inputs)
    with torch.no_grad():
        out = m.module(*m.example_inputs)
    assert tuple(out.shape) == OUT_SHAPES[name]
    assert torch.isfinite(out).all()
    if name == "resnet18":  # 11.7M parameters: skip the second load
        assert sum(p.numel() for p in m.module.parameters()) == 11_689_512  # torchvision's count
        return
    # fixed seed: loading again gives the same weights and inputs
    m2 = load_model(f"sample:{name}")
    with torch.no_grad():
        assert torch.equal(m2.module(*m2.example_inputs), out)
    if name == "gpt":
        assert m.example_inputs[0].dtype == torch.int64 and m.example_inputs[0].shape == (1, 16)
    if name == "small_cnn":
        assert not torch.allclose(m.module.bn.running_var, torch.ones(8))  # non-trivial running stats
    if name == "matmul_relu":
        w = m.module.weight
        assert isinstance(w, torch.nn.Parameter) and w.shape == (128, 128)


@pytest.mark.slow
def test_gpt_imports_into_relax():
    """The attention formulation (plain matmul + softmax + causal mask) must import into Relax.
    (All six samples were checked once against torch after tvm.compile; see the capture report.)"""
    from tvm.relax.frontend.torch import from_exported_program

    m = load_model("sample:gpt")
    ep = torch.export.export(m.module, m.example_inputs).run_decompositions()
    mod = from_exported_program(ep)
    assert "main" in [gv.name_hint for gv in mod.get_global_vars()]
