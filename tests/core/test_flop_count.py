"""The work of a TensorIR kernel counts each distinct value of a store once, as the compiled code
computes it: an inlined fast_gelu behind a matmul with a short reduction read far above the FMA
peak when its repeated subexpressions were counted each time."""
from __future__ import annotations

import pytest

pytest.importorskip("tvm")

import tvm
from tvm import te
from tvm.s_tir.analysis import estimate_tir_flops

from irviz.core.backend import build as build_mod
from irviz.core.backend.flop_count import tir_flops
from irviz.core.backend.roofline import kernel_work
from irviz.core.backend.run import run_and_compare
from irviz.core.frontend.capture import capture
from irviz.core.frontend.importer import import_model
from irviz.core.frontend.model_file import load_model
from irviz.core.passes import get_pipeline
from irviz.core.session import Session

# fast_gelu(x + bias) as TOPI writes it, each distinct operation once: the bias add, x * 1/sqrt(2),
# the clamp to [-4, 4] (min, max), its square, the odd numerator polynomial (6 multiply-adds, then
# times the clamped value: 13), the denominator (4 multiply-adds: 8), the division, * 0.5, + 0.5
# and the final multiply by x
BIAS_AND_FAST_GELU = 1 + 1 + 2 + 1 + 13 + 8 + 1 + 1 + 1 + 1

MODEL = '''
import torch
from torch import nn


def get_model():
    torch.manual_seed(0)
    # a channels-last MLP's first layer with a short reduction, as in ConvNeXt's blocks
    return nn.Sequential(nn.Linear(24, 96), nn.GELU()).eval(), (torch.randn(1, 6, 6, 24),)
'''


def test_a_value_used_three_times_counts_once():
    a = te.placeholder((64,), name="a")
    b = te.placeholder((64,), name="b")
    e = lambda i: (a[i] + b[i]) * 0.5
    out = te.compute((64,), lambda i: e(i) * e(i) + e(i), name="out")
    func = te.create_prim_func([a, b, out])
    assert estimate_tir_flops(tvm.IRModule({"main": func})) == 64 * (3 * 2 + 2)  # the tree
    assert tir_flops(func) == 64 * (2 + 2)  # e once, then a multiply and an add


def test_distinct_values_that_look_alike_both_count():
    a = te.placeholder((16, 16), name="a")
    out = te.compute((16, 16), lambda i, j: (a[i, j] + 1.0) * (a[j, i] + 1.0), name="out")
    func = te.create_prim_func([a, out])
    assert tir_flops(func) == estimate_tir_flops(tvm.IRModule({"main": func})) == 256 * 3


def test_a_repeat_under_a_loop_of_unknown_count_gives_no_figure():
    n = tvm.tirx.Var("n", "int64")
    a = te.placeholder((n,), name="a")
    plain = te.create_prim_func([a, te.compute((n,), lambda i: a[i] * 2.0 + 1.0, name="out")])
    assert tir_flops(plain) == estimate_tir_flops(tvm.IRModule({"main": plain}))  # nothing to take off
    twice = te.create_prim_func([a, te.compute((n,), lambda i: (a[i] * 2.0) * (a[i] * 2.0), name="out")])
    assert tir_flops(twice) is None  # how much to take off depends on n


@pytest.fixture(scope="module")
def mlp_run(tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "mlp_gelu.py"
    path.write_text(MODEL)
    loaded = load_model(str(path))
    captured = capture(loaded)
    session = Session(import_model(captured), captured)
    session.set_pipeline(get_pipeline("tir-cpu"))
    assert session.run_to_end() is not None, session.error and session.error.user_message()
    built = build_mod.build(session.module())
    res = run_and_compare(built, loaded, repeats=1)
    assert res.allclose, res.max_abs_error
    return built, res


def test_matmul_with_fast_gelu_epilogue_counts_the_gelu_once_per_element(mlp_run):
    built, res = mlp_run
    fused = [k for k in res.kernels if "matmul" in k.name and "gelu" in k.name]
    assert len(fused) == 1, [k.name for k in res.kernels]
    k = fused[0]
    rows, n_in, n_out = 6 * 6, 24, 96
    flops, _ = kernel_work(built, res.kernels)[k.name]
    assert flops == k.calls * (2 * rows * n_in * n_out + rows * n_out * BIAS_AND_FAST_GELU)
