"""Models whose Relax module is right but which TVM 0.27 fails to build or legalize, on plain torch
modules with each model's pattern: capture -> import -> zero pipeline -> build -> run, numbers
checked against torch, and the bare TVM failure the workaround is for."""
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


def _check(module, *inputs):
    loaded = LoadedModel(module=module.eval(), example_inputs=tuple(inputs), spec="m", name="m")
    cap = capture(loaded)
    s = Session(import_model(cap), cap)
    s.set_pipeline(passes.get_pipeline("zero"))
    assert s.run_to_end() is not None, s.error and s.error.user_message()
    return run_and_compare(build(s.current.mod), loaded, repeats=1)


def _bare_tvm_build_error(module, *inputs) -> str:
    import tvm
    from tvm.relax.frontend.torch import from_exported_program

    mod = from_exported_program(torch.export.export(module.eval(), tuple(inputs)))
    with pytest.raises(Exception) as ei:
        tvm.compile(mod, "llvm")
    return str(ei.value)


class BoolMaskCompare(torch.nn.Module):
    """XLM's and FlauBERT's attention: ``(mask == 0)`` on a bool mask, plus the other comparisons."""

    def forward(self, x):
        mask = x > 0
        other = x.flip(-1) > 0
        hit = (mask == 0) | (mask != other) | (mask < other) | (mask >= True)
        hit = hit ^ (mask == 0.5)  # all False in torch, which compares in float
        both = torch.maximum(mask, other) & ~torch.minimum(mask, other)
        return torch.where(hit, x, -x) + both.float()


def test_comparisons_of_bool_tensors_build():
    x = torch.randn(3, 8)
    err = _bare_tvm_build_error(BoolMaskCompare(), x)
    assert "Invalid operand types for FCmp" in err or "MatchesCode(DLDataTypeCode::kDLFloat)" in err
    r = _check(BoolMaskCompare(), x)
    assert r.allclose and r.max_abs_error == 0.0


class ResizedRelativePositions(torch.nn.Module):
    """SAM's relative positions resized with F.interpolate: the bilinear decomposition clamps its
    int64 source indices with an upper bound only; and clamps of integers written directly."""

    def __init__(self):
        super().__init__()
        self.rel_pos = torch.nn.Parameter(torch.randn(1, 8, 7))

    def forward(self, x):
        resized = torch.nn.functional.interpolate(self.rel_pos, size=13, mode="linear")
        i = torch.arange(13) - 4
        j = i.clamp(max=6) + i.clamp(min=-2) + torch.clamp(i, -3, 3) + i.clamp_max(5) + i.clamp_min(0)
        return x @ resized[0] + j


def test_one_sided_clamp_of_integers_legalizes():
    x = torch.randn(2, 8)
    err = _bare_tvm_build_error(ResizedRelativePositions(), x)
    assert "Cannot convert infinity to BigInt" in err
    r = _check(ResizedRelativePositions(), x)
    assert r.allclose and r.max_abs_error < 1e-5


class OverlappingChunks(torch.nn.Module):
    """Longformer's _chunk: overlapping windows by as_strided over a transposed (non-contiguous)
    tensor, the window stride half the chunk's."""

    def forward(self, q):
        x = q.transpose(0, 1)  # (heads, seq, d) view of (seq, heads, d)
        x = x.reshape(x.size(0), x.size(1) // 4, 4, x.size(2))
        size = list(x.size())
        size[1] = size[1] * 2 - 1
        stride = list(x.stride())
        stride[1] //= 2
        return x.as_strided(size=size, stride=stride) * 2 + x.as_strided((3, 2), (1, 3), 5).sum()


def test_as_strided_with_overlapping_windows():
    q = torch.randn(16, 3, 5)
    from tvm.relax.frontend.torch import from_exported_program

    with pytest.raises(Exception, match="as_strided with non-contiguous stride"):
        from_exported_program(torch.export.export(OverlappingChunks(), (q,)))
    r = _check(OverlappingChunks(), q)
    assert r.allclose and r.max_abs_error < 1e-5


class AxialColumns(torch.nn.Module):
    """Reformer's axial positions: ``weight[:, :cols]`` with ``cols`` computed from
    ``position_ids.max().item()`` and bounded by checks, so torch knows 1 <= cols <= 4."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(1, 4, 4, 8))

    def forward(self, pos):
        top = pos.max().item()
        torch._check(top >= 0)
        torch._check(top < 16)
        cols = (top + 4) // 4
        return torch.cat([self.w[:, :cols], self.w[:, -4:cols] * 2], -1).sum() + pos


def test_slice_to_a_run_time_end_fuses():
    pos = torch.arange(16)
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program

    mod = from_exported_program(torch.export.export(AxialColumns(), (pos,), strict=False))
    with pytest.raises(Exception, match="prim.if_then_else"):
        relax.get_pipeline("zero")(mod)
    r = _check(AxialColumns(), pos)
    assert r.allclose and r.max_abs_error < 1e-4
