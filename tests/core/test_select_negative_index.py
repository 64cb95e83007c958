"""aten.select.int with a negative index (``x[:, -1]``) counts from the end, as in torch.

TVM 0.27 imports it as a "fast" take of index -1, which reads the element before the tensor (SigLIP's
text tower pools its last token that way: max abs error 0.2, inf or NaN, changing from run to run).
"""
from __future__ import annotations

import pytest
import torch

from irviz.core import passes
from irviz.core.backend.build import build
from irviz.core.backend.run import run_and_compare
from irviz.core.frontend import hf
from irviz.core.frontend.capture import capture
from irviz.core.frontend.importer import import_model
from irviz.core.frontend.model_file import LoadedModel
from irviz.core.session import Session


class LastToken(torch.nn.Module):
    """Last-token pooling and a second-to-last channel, as text towers and heads take them."""

    def forward(self, x):
        return x[:, -1] * 2, x[..., -2]


def _loaded(module, *inputs, dynamic_shapes=None):
    return LoadedModel(module=module.eval(), example_inputs=tuple(inputs), spec="m", name="m",
                       dynamic_shapes=dynamic_shapes)


def _zero(cap):
    s = Session(import_model(cap), cap)
    s.set_pipeline(passes.get_pipeline("zero"))
    assert s.run_to_end() is not None, s.error and s.error.user_message()
    return s.current.mod


def _takes(mod) -> list[str]:
    return [ln for ln in mod.script().splitlines() if "R.take(" in ln]


def test_negative_select_matches_torch_and_takes_in_bounds():
    loaded = _loaded(LastToken(), torch.randn(2, 5, 7))
    imp = import_model(capture(loaded))
    takes = _takes(imp.mod)
    assert len(takes) == 2 and not any("(-" in t for t in takes), takes
    assert any("R.const(4" in t for t in takes) and any("R.const(5" in t for t in takes), takes
    r = run_and_compare(build(_zero(capture(loaded))), loaded, repeats=1)
    assert r.allclose and r.max_abs_error == 0 and r.outputs == 2


def test_tvm_alone_takes_index_minus_one(monkeypatch):
    from irviz.core.frontend import select_converters

    cap = capture(_loaded(LastToken(), torch.randn(2, 5, 7)))
    monkeypatch.setattr(select_converters, "CONVERTERS", {})
    takes = _takes(import_model(cap).mod)
    assert any("R.const(-1" in t for t in takes), takes


def test_negative_select_on_a_dynamic_dimension_wraps():
    seq = torch.export.Dim("seq", min=2, max=32)
    loaded = _loaded(LastToken(), torch.randn(2, 5, 7), dynamic_shapes=({1: seq},))
    takes = _takes(import_model(capture(loaded)).mod)
    assert any('mode="wrap"' in t for t in takes), takes
    r = run_and_compare(build(_zero(capture(loaded))), loaded, repeats=1)
    assert r.allclose and r.max_abs_error == 0


@pytest.mark.skipif(not hf.available(), reason="transformers is not installed")
def test_siglip_text_tower_matches_torch():
    import transformers

    cfg = transformers.SiglipTextConfig(vocab_size=128, hidden_size=32, intermediate_size=64,
                                        num_hidden_layers=1, num_attention_heads=4,
                                        max_position_embeddings=16)
    model = hf.encoder(transformers.SiglipTextModel, cfg, field="pooler_output")
    loaded = _loaded(model, hf.token_ids(cfg.vocab_size, seq=16))
    r = run_and_compare(build(_zero(capture(loaded))), loaded, repeats=1)
    assert r.allclose and r.max_abs_error < 1e-5, r.max_abs_error
