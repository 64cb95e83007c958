"""FoldConstant evaluates the small injective calls on constants with numpy, not one LLVM build
each, and gives the module TVM's FoldConstant gives, constant for constant."""
from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch
import tvm
import tvm_ffi
from torch import nn
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

from irviz.core import passes
from irviz.core.frontend.capture import capture
from irviz.core.frontend.importer import import_model
from irviz.core.frontend.model_file import LoadedModel
from irviz.core.passes.fold_constant import FoldStats
from irviz.core.passes.tir_numpy import Unsupported, run_prim_func


class WindowMasks(nn.Module):
    """Shaped like Longformer's sliding-window attention: band masks, flipped corners and index
    tensors built from constant shapes (arange, full, comparisons, where, flips, slices), then
    applied to the input."""

    def __init__(self, seq=16, window=4):
        super().__init__()
        self.seq, self.window = seq, window
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        pos = torch.arange(self.seq)
        rel = pos[None, :] - pos[:, None]
        band = (rel.abs() <= self.window) & (torch.ones(self.seq, self.seq) > 0)
        corner = torch.ones(self.window, self.window + 1).tril().flip(dims=[0]).bool()
        pad = (0, self.seq - self.window - 1, 0, self.seq - self.window)
        band = band & ~nn.functional.pad(corner, pad, value=False)
        bias = torch.where(band, torch.zeros(()), torch.full((), -1e4))
        idx = (pos * 3 + 1) % self.seq
        scores = self.proj(x) @ self.proj(x).transpose(-1, -2) + bias
        return scores[:, idx].softmax(-1) @ x


@contextlib.contextmanager
def _counting_builds():
    """Counts LLVM builds of PrimFuncs: TVM's FoldConstant asks for them through the global
    "tirx.build", irviz's through tvm.tirx.build."""
    orig_global, orig_attr = tvm.get_global_func("tirx.build"), tvm.tirx.build
    calls = []

    def counted(*args, **kwargs):
        calls.append(1)
        return orig_attr(*args, **kwargs)

    tvm.register_global_func("tirx.build", counted, override=True)
    tvm.tirx.build = counted
    try:
        yield calls
    finally:
        tvm.register_global_func("tirx.build", orig_global, override=True)
        tvm.tirx.build = orig_attr


def _before_fold():
    torch.manual_seed(0)
    loaded = LoadedModel(module=WindowMasks().eval(), example_inputs=(torch.randn(1, 16, 8),),
                         spec="test", name="window_masks")
    imported = import_model(capture(loaded))
    mod = getattr(imported, "mod", imported)
    for name in ("LegalizeOps", "AnnotateTIROpPattern"):
        mod = passes.apply_pass(name, mod)
    return mod


def test_fold_constant_builds_nothing_for_mask_chains_and_matches_tvm():
    mod = _before_fold()
    with _counting_builds() as tvm_builds:
        expected = relax.transform.FoldConstant()(mod)
    assert len(tvm_builds) >= 10  # the structural cause: one LLVM build per distinct function
    with _counting_builds() as builds:
        got = passes.apply_pass("FoldConstant", mod)
    assert len(builds) == 0
    assert FoldStats.numpy_folds >= len(tvm_builds)
    assert tvm_ffi.structural_equal(got, expected)  # constants compared by value, bit for bit


@I.ir_module
class _Mixed:
    @T.prim_func(private=True, s_tir=True)
    def exp_of(a: T.Buffer((T.int64(4),), "float32"), out: T.Buffer((T.int64(4),), "float32")):
        for i in range(T.int64(4)):
            with T.sblock("e"):
                vi = T.axis.spatial(T.int64(4), i)
                out[vi] = T.exp(a[vi])

    @T.prim_func(private=True, s_tir=True)
    def total(a: T.Buffer((T.int64(4),), "float32"), out: T.Buffer((T.int64(1),), "float32")):
        for i, k in T.grid(T.int64(1), T.int64(4)):
            with T.sblock("s"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    out[vi] = T.float32(0)
                out[vi] = out[vi] + a[vk]

    @T.prim_func(private=True, s_tir=True)
    def scale(a: T.Buffer((T.int64(4),), "float32"), out: T.Buffer((T.int64(4),), "float32")):
        for i in range(T.int64(4)):
            with T.sblock("m"):
                vi = T.axis.spatial(T.int64(4), i)
                out[vi] = T.max(a[3 - vi] * T.float32(0.3), T.float32(-0.5)) / T.float32(7)

    @R.function
    def main(x: R.Tensor((4,), "float32")):
        cls = _Mixed
        with R.dataflow():
            c = R.const(np.array([0.1, -2.0, 3.5, 1e-3], "float32"))
            s = R.call_tir(cls.scale, (c,), out_ty=R.Tensor((4,), "float32"))
            e = R.call_tir(cls.exp_of, (s,), out_ty=R.Tensor((4,), "float32"))
            t = R.call_tir(cls.total, (e,), out_ty=R.Tensor((1,), "float32"))
            y = R.add(x, t)
            R.output(y)
        return y


def test_what_numpy_cannot_reproduce_is_left_to_llvm_and_the_result_is_tvms():
    mod = _Mixed
    with pytest.raises(Unsupported):
        run_prim_func(mod["exp_of"], [np.zeros(4, "float32")])  # libm's exp, not numpy's
    with pytest.raises(Unsupported):
        run_prim_func(mod["total"], [np.zeros(4, "float32")])  # a reduction's order
    with _counting_builds() as builds:
        got = passes.apply_pass("FoldConstant", mod)
    assert FoldStats.numpy_folds == 1 and FoldStats.llvm_folds == 2 and len(builds) == 2
    assert tvm_ffi.structural_equal(got, relax.transform.FoldConstant()(mod))



def test_a_weight_sized_transpose_is_folded_exactly_and_a_double_write_is_refused():
    @T.prim_func(private=True, s_tir=True)
    def transpose(a: T.Buffer((768, 1536), "float32"), out: T.Buffer((1536, 768), "float32")):
        for i, j in T.grid(1536, 768):
            with T.sblock("t"):
                vi, vj = T.axis.remap("SS", [i, j])
                out[vi, vj] = a[vj, vi]

    @T.prim_func(private=True, s_tir=True)
    def twice(a: T.Buffer((8,), "float32"), out: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.sblock("w"):
                vi = T.axis.spatial(8, i)
                out[vi // 2] = a[vi]

    a = np.random.default_rng(0).standard_normal((768, 1536)).astype("float32")
    assert np.array_equal(run_prim_func(transpose, [a]), a.T)
    with pytest.raises(Unsupported, match="twice"):
        run_prim_func(twice, [np.arange(8, dtype="float32")])
