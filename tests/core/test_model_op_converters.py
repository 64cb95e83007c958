"""Ops transformers models use that TVM 0.27 cannot import (or imports wrongly), on plain torch
modules that reproduce each model's pattern: capture -> import -> zero pipeline -> build -> run,
numbers checked against torch."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from irviz.core import passes
from irviz.core.backend.build import build
from irviz.core.backend.run import run_and_compare
from irviz.core.errors import IRImportError
from irviz.core.frontend.capture import capture
from irviz.core.frontend.importer import import_model
from irviz.core.frontend.model_file import LoadedModel
from irviz.core.session import Session


def _check(module, *inputs):
    loaded = LoadedModel(module=module.eval(), example_inputs=tuple(inputs), spec="m", name="m")
    cap = capture(loaded)
    s = Session(import_model(cap), cap)
    s.set_pipeline(passes.get_pipeline("zero"))
    assert s.run_to_end() is not None, s.error and s.error.user_message()
    return run_and_compare(build(s.current.mod), loaded, repeats=1)


def _bare_tvm_error(module, *inputs) -> str:
    from tvm.relax.frontend.torch import from_exported_program

    ep = torch.export.export(module.eval(), tuple(inputs)).run_decompositions()
    with pytest.raises(Exception) as ei:
        from_exported_program(ep, run_ep_decomposition=False)
    return str(ei.value)


# --------------------------------------------------------------------------------------------
# aten.index.Tensor


class SlidingWindows(torch.nn.Module):
    """ConvBERT's and MobileViT-v2's F.unfold: x[:, :, rows (k, L, 1, 1), cols (1, 1)]."""

    def forward(self, x):
        return F.unfold(x, kernel_size=(3, 1), padding=(1, 0)) + F.unfold(x, kernel_size=2, stride=2).sum()


class ScatteredIndices(torch.nn.Module):
    """Index tensors around a sliced axis, broadcasting, negative entries."""

    def forward(self, x, i, j):
        return x[i, :, j] + x[:, i, j].sum() + x[..., i.view(2, 1), j].sum()


class LanguageAdapters(torch.nn.Module):
    """X-MOD's adapters: hidden[lang_ids == k] through adapter k, written back with the same mask."""

    def __init__(self):
        super().__init__()
        self.adapters = torch.nn.ModuleList(torch.nn.Linear(5, 5) for _ in range(2))

    def forward(self, x, lang_ids):
        out = torch.zeros_like(x)
        for k, adapter in enumerate(self.adapters):
            mask = lang_ids == k
            out[mask] = adapter(x[mask])
        return out


def test_index_with_broadcast_index_shapes():
    x = torch.randn(1, 4, 6, 5)
    assert "cannot broadcast index shapes" in _bare_tvm_error(SlidingWindows(), x)
    r = _check(SlidingWindows(), x)
    assert r.allclose and r.max_abs_error < 1e-5
    r = _check(ScatteredIndices(), torch.randn(3, 4, 5), torch.tensor([0, -1]), torch.tensor([2, 4]))
    assert r.allclose and r.max_abs_error < 1e-5


def test_index_and_index_put_with_bool_masks():
    torch.manual_seed(0)
    ids = torch.tensor([0, 1, 0])
    assert "integer" in _bare_tvm_error(LanguageAdapters(), torch.randn(3, 4, 5), ids)
    r = _check(LanguageAdapters(), torch.randn(3, 4, 5), ids)
    assert r.allclose and r.max_abs_error < 1e-5


class MaskedFill2D(torch.nn.Module):
    """Longformer's writes through a mask over two axes: one value, one value per element, and a
    2-D mask over a 3-D tensor (the last axis written whole)."""

    def forward(self, x, h):
        mask = x > 0
        y = x.clone()
        y[mask] = -1.0
        z = x.clone()
        z[mask] = x[mask] * 3
        g = h.clone()
        g[mask] = h[mask] + 1
        return y + z, g


class MixedMasks(torch.nn.Module):
    """ViLT's attention mask: a float text mask and an int64 image mask concatenated."""

    def forward(self, text_mask, image_mask):
        return torch.cat([text_mask, image_mask], dim=1) * 2


def test_cat_of_mixed_dtypes_promotes():
    text, image = torch.rand(1, 4), torch.ones(1, 3, dtype=torch.int64)
    assert "same dtype" in _bare_tvm_error(MixedMasks(), text, image)
    r = _check(MixedMasks(), text, image)
    assert r.allclose and r.max_abs_error == 0.0


def test_index_put_with_a_mask_over_two_axes():
    x, h = torch.randn(3, 4), torch.randn(3, 4, 2)
    r = _check(MaskedFill2D(), x, h)
    assert r.allclose and r.max_abs_error < 1e-5


# --------------------------------------------------------------------------------------------
# shapes: arange with a negative step, unfold, split with run-time sizes


class RelativePositions(torch.nn.Module):
    """Funnel's relative positions: arange(n, -n, -1) expanded to (2n, 2n)."""

    def forward(self, x):
        pos = torch.arange(8, -8, -1)
        return x + pos[:, None].expand(16, 16) + torch.arange(3.0, -2.0, -0.5).sum()


class Patches(torch.nn.Module):
    """PatchTST's / PatchTSMixer's patchify: x.unfold(-2, patch_length, stride)."""

    def forward(self, x):
        return x.unfold(-2, 4, 2) * 2 + x.unfold(0, 1, 1).sum()


class ExpertSplit(torch.nn.Module):
    """JetMoE's experts: tokens split by per-expert counts known only at run time, and put back
    in token order with index_add (an index_put with accumulate over the first axis).  The
    re-concatenated rows, (u0 + u1 + u2 + u3, d), are scaled by gates of a fixed size (n, 1)."""

    def forward(self, x, counts, order, gates):
        parts = x.split(counts.tolist(), dim=0)
        out = torch.cat([p * (i + 1) for i, p in enumerate(parts)], dim=0) * gates
        return torch.zeros_like(x).index_add(0, order, out - gates)


def test_arange_with_negative_step():
    r = _check(RelativePositions(), torch.randn(16, 16))
    assert r.allclose and r.max_abs_error == 0.0


def test_unfold():
    r = _check(Patches(), torch.randn(3, 12, 2))
    assert r.allclose and r.max_abs_error < 1e-5


def test_split_with_run_time_sizes():
    r = _check(ExpertSplit(), torch.randn(7, 3), torch.tensor([2, 0, 4, 1]), torch.tensor([3, 0, 6, 1, 1, 2, 5]),
               torch.rand(7, 1))
    assert r.allclose and r.max_abs_error < 1e-5


# --------------------------------------------------------------------------------------------
# reductions and selections: amax / amin, unsorted topk, scatter_reduce


class Extrema(torch.nn.Module):
    """Reformer's logsumexp (amax inside) and amin / amax over several dims."""

    def forward(self, x):
        return torch.logsumexp(x, -1, keepdim=True) + x.amax((0, 2)).sum() + x.amin(1, keepdim=True)


class Router(torch.nn.Module):
    """A mixture-of-experts router (GLM-4-MoE, Nemotron-H): unsorted topk, used order-free."""

    def forward(self, scores):
        values, idx = torch.topk(scores, 3, dim=-1, sorted=False)
        return torch.zeros_like(scores).scatter(-1, idx, values)


class SegmentReductions(torch.nn.Module):
    """TAPAS's segment min/max: scatter_reduce with every reduction, with and without self."""

    def forward(self, segments, values):
        outs = []
        for reduce in ("amin", "amax", "sum", "prod", "mean"):
            for include_self in (False, True):
                base = torch.full((6,), 0.5)
                outs.append(base.scatter_reduce(0, segments, values, reduce, include_self=include_self))
        return torch.stack(outs)


def test_amax_amin():
    r = _check(Extrema(), torch.randn(2, 3, 4))
    assert r.allclose and r.max_abs_error < 1e-6


def test_unsorted_topk_gives_the_same_set():
    scores = torch.randn(4, 8)
    assert "sorted" in _bare_tvm_error(Router(), scores)
    r = _check(Router(), scores)  # the scatter makes the output independent of the order
    assert r.allclose and r.max_abs_error == 0.0


def test_scatter_reduce():
    # segment 1, 3 and 4 receive nothing: they keep the base value
    r = _check(SegmentReductions(), torch.tensor([0, 2, 2, 5, 0, 2]), torch.randn(6))
    assert r.allclose and r.max_abs_error < 1e-6


# --------------------------------------------------------------------------------------------
# complex tensors as float pairs: polar (rotary), FFT


class ComplexRotary(torch.nn.Module):
    """Llama-4's rotary embedding: polar(1, freqs) times view_as_complex(q), back with view_as_real."""

    def forward(self, q, pos):
        freqs = pos[:, :, None] * torch.arange(1, 5)[None, None, :] * 0.1
        cis = torch.polar(torch.ones_like(freqs), freqs) * 1.0
        qc = torch.view_as_complex(q.float().reshape(*q.shape[:-1], -1, 2))
        return torch.view_as_real(qc * cis.unsqueeze(2)).flatten(3)


class Fourier(torch.nn.Module):
    """FNet's mixing, fftn(x).real, and the other forward FFTs."""

    def forward(self, x):
        return (torch.fft.fftn(x, dim=(1, 2)).real + torch.fft.fft(x, dim=-1, norm="ortho").imag
                + torch.fft.rfft(x, norm="forward").real.sum())


class InverseFFT(torch.nn.Module):
    def forward(self, x):
        return torch.fft.irfft(torch.fft.rfft(x))


def test_polar_rotary():
    r = _check(ComplexRotary(), torch.randn(1, 6, 2, 8), torch.arange(6.0)[None])
    assert r.allclose and r.max_abs_error < 1e-5


def test_forward_fft():
    r = _check(Fourier(), torch.randn(2, 6, 5))
    assert r.allclose and r.max_abs_error < 1e-5


def test_fft_without_lowering_names_the_node():
    loaded = LoadedModel(module=InverseFFT(), example_inputs=(torch.randn(2, 8),), spec="m", name="m")
    with pytest.raises(IRImportError) as ei:
        import_model(capture(loaded))
    e = ei.value
    assert e.op == "aten._fft_c2r.default" and e.node == "_fft_c2r"
    assert "no TVM lowering for FFT" in e.message and '"_fft_c2r"' in e.message


# --------------------------------------------------------------------------------------------
# the transformers models themselves (tiny configs, random weights)


@pytest.mark.slow
def test_tiny_convbert_and_xmod_match_torch():
    """ConvBERT (F.unfold's broadcast index shapes) and X-MOD (bool-mask adapters) end to end."""
    transformers = pytest.importorskip("transformers")
    from irviz.core.frontend import hf

    small = dict(vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                 intermediate_size=37, max_position_embeddings=40)
    for model in (hf.encoder(transformers.ConvBertModel, transformers.ConvBertConfig(embedding_size=32, **small)),
                  hf.encoder(transformers.XmodModel, transformers.XmodConfig(
                      languages=["en_XX"], default_language="en_XX", **small))):
        r = _check(model, hf.token_ids(64, seq=16))
        assert r.allclose and r.max_abs_error < 1e-4, type(model.model).__name__


def test_user_converter_takes_over_a_complex_op():
    """The user's converter for an op irviz refuses on complex tensors is used."""
    loaded = LoadedModel(module=InverseFFT(), example_inputs=(torch.randn(2, 8),), spec="m", name="m")
    seen = []

    def mine(node, imp):
        from tvm import relax

        seen.append(node.name)
        z = imp.env[node.args[0]]
        return imp.block_builder.emit(relax.op.zeros((2, 8), str(z.ty.dtype)))

    import_model(capture(loaded), custom_convert_map={"aten._fft_c2r.default": mine})
    assert seen == ["_fft_c2r"]
