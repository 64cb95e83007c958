"""Imports TVM 0.27 gets wrong and irviz's converters fix: -inf/inf/nan fills (causal masks), elu's
scales (selu, celu).

TVM 0.27's own legalization of R.full with a non-finite value fails ("argument of type 'PrimType'
is not iterable", topi.full tests `"float" in dtype` on a PrimType): a bug in TVM that irviz's
import layer works around by broadcasting a scalar constant instead.
"""
from __future__ import annotations

import pytest
import torch

from irviz.core import passes
from irviz.core.backend.build import build
from irviz.core.backend.run import run_and_compare
from irviz.core.frontend.capture import capture
from irviz.core.frontend.importer import import_model
from irviz.core.frontend.model_file import LoadedModel
from irviz.core.session import Session


class CausalMask(torch.nn.Module):
    """The usual decoder mask: -inf above the diagonal, added to attention scores."""

    def forward(self, scores):
        n = scores.shape[-1]
        mask = torch.full((n, n), float("-inf")).triu(1)
        return torch.softmax(scores + mask, dim=-1)


class FullLikeInf(torch.nn.Module):
    """full_like and fill with inf: a max-pooling style start value, and a masked_fill stand-in."""

    def forward(self, x):
        lo = torch.full_like(x, float("-inf"))
        hi = torch.zeros_like(x).fill_(float("inf"))
        return torch.maximum(lo, x), torch.minimum(hi, x * 2)


def _loaded(module, *inputs):
    return LoadedModel(module=module.eval(), example_inputs=tuple(inputs), spec="m", name="m")


def _zero(cap):
    s = Session(import_model(cap), cap)
    s.set_pipeline(passes.get_pipeline("zero"))
    assert s.run_to_end() is not None, s.error and s.error.user_message()
    return s.current.mod


def test_causal_mask_from_minus_inf_and_triu_matches_torch():
    loaded = _loaded(CausalMask(), torch.randn(2, 8, 8))
    r = run_and_compare(build(_zero(capture(loaded))), loaded, repeats=1)
    assert r.allclose and r.max_abs_error < 1e-6
    # the mask really is there: the first row attends to one position only
    assert loaded.module(loaded.example_inputs[0])[0, 0, 0].item() == pytest.approx(1.0)


def test_tvm_alone_fails_to_legalize_the_mask(monkeypatch):
    from tvm import relax

    from irviz.core.frontend import builtin_converters

    cap = capture(_loaded(CausalMask(), torch.randn(1, 4, 4)))
    monkeypatch.setattr(builtin_converters, "BUILTIN_CONVERTERS", {})
    with pytest.raises(Exception, match="PrimType"):
        relax.transform.LegalizeOps()(import_model(cap).mod)


def test_full_like_and_fill_with_inf_match_torch():
    loaded = _loaded(FullLikeInf(), torch.randn(3, 5))
    r = run_and_compare(build(_zero(capture(loaded))), loaded, repeats=1)
    assert r.allclose and r.max_abs_error < 1e-6 and r.outputs == 2


class EluFamily(torch.nn.Module):
    """selu and celu decompose to aten.elu with scale / input_scale, which TVM's converter drops."""

    def forward(self, x):
        return (torch.nn.functional.selu(x), torch.nn.functional.celu(x, alpha=0.7),
                torch.nn.functional.elu(x, alpha=1.3))


def test_elu_with_scales_matches_torch():
    loaded = _loaded(EluFamily(), torch.randn(2, 3, 8) * 3)
    r = run_and_compare(build(_zero(capture(loaded))), loaded, repeats=1)
    assert r.outputs == 3 and r.allclose and r.max_abs_error < 1e-5


class Cond(torch.nn.Module):
    """torch.cond whose branches use ops irviz converts itself (cos, sin: float functions)."""

    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda t: t.cos(), lambda t: t.sin(), (x,))


def test_cond_branches_use_irvizs_converters():
    # TVM converts cond branches calling custom converters without the importer argument
    for sign in (1.0, -1.0):
        loaded = _loaded(Cond(), torch.rand(3, 4) * sign)
        r = run_and_compare(build(_zero(capture(loaded))), loaded, repeats=1)
        assert r.allclose and r.max_abs_error < 1e-6
