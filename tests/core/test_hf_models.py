"""transformers models (tiny configs, random weights) import, build and match PyTorch (zero pipeline).

One test per family, through the core API: load_model(sample:hf_*) -> capture -> import_model ->
Session(zero).run_to_end() -> build -> run_and_compare.  Skipped only when transformers is missing.
"""
from __future__ import annotations

import pytest
import torch

from irviz.core.frontend import hf
from irviz.core import passes
from irviz.core.backend.build import build
from irviz.core.backend.run import run_and_compare
from irviz.core.frontend.capture import capture
from irviz.core.errors import LoadError
from irviz.core.frontend.importer import import_model
from irviz.core.frontend.model_file import load_model
from irviz.core.session import Session

needs_hf = pytest.mark.skipif(not hf.available(), reason="transformers is not installed (pip install 'irviz[hf]')")

# sample -> expected output shape
MODELS = {
    "hf_gpt2": (1, 16, 256),
    "hf_llama": (1, 16, 256),
    "hf_qwen2": (1, 16, 256),
    "hf_falcon": (1, 16, 32),
    "hf_mixtral": (1, 16, 256),
    "hf_deberta_v2": (1, 16, 32),
    "hf_bert": (1, 16, 64),
    "hf_distilbert": (1, 16, 64),
    "hf_t5_encoder": (1, 16, 64),
    "hf_vit": (1, 10),
    "hf_resnet": (1, 10),
    "hf_convnext": (1, 10),
}


def _check(name):
    loaded = load_model(f"sample:{name}") if isinstance(name, str) else name
    cap = capture(loaded)
    imp = import_model(cap)
    s = Session(imp, cap)
    s.set_pipeline(passes.get_pipeline("zero"))
    assert s.run_to_end() is not None, s.error and s.error.user_message()
    br = build(s.current.mod)
    r = run_and_compare(br, loaded, repeats=1)
    return loaded, r


@needs_hf
@pytest.mark.slow
@pytest.mark.parametrize("name", list(MODELS))
def test_hf_model_zero_pipeline_matches_torch(name):
    loaded, r = _check(name)
    with torch.no_grad():
        assert tuple(loaded.module(*loaded.example_inputs).shape) == MODELS[name]
    assert r.outputs == 1
    assert r.allclose, f"{name}: max_abs_error {r.max_abs_error}"
    assert r.max_abs_error < 1e-4


@needs_hf
def test_decoders_run_without_cache_and_with_fixed_seed():
    a = load_model("sample:hf_gpt2")
    b = load_model("sample:hf_gpt2")
    with torch.no_grad():
        assert torch.equal(a.module(*a.example_inputs), b.module(*b.example_inputs))
    assert a.module.model.config.use_cache is False


@needs_hf
def test_gpt2_with_kv_cache_imports():
    """A decoder that keeps the cache on (as a user's own model may): irviz's cat converter drops
    the empty 1-D tensor the cache starts from; bare TVM rejects that concat."""
    import transformers
    from tvm.relax.frontend.torch import from_exported_program

    cfg = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=128, n_positions=32,
                                  bos_token_id=0, eos_token_id=0)
    inner = hf.build(transformers.GPT2LMHeadModel, cfg)

    class WithCache(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = inner

        def forward(self, ids):
            return self.m(input_ids=ids, use_cache=True).logits

    from irviz.core.frontend.model_file import LoadedModel

    ids = hf.token_ids(128, seq=8)
    loaded = LoadedModel(module=WithCache().eval(), example_inputs=(ids,), spec="gpt2_cache", name="gpt2_cache")
    cap = capture(loaded)
    cats = [n for n in cap.graph.nodes if n.target == "aten.cat.default" and (0,) in
            [cap.graph.node(a).shapes[0] for a in n.args if cap.graph.node(a).shapes]]
    assert cats, "the cache no longer concatenates an empty 1-D tensor; this test needs a new trigger"
    with pytest.raises(Exception, match="ndim"):
        from_exported_program(cap.exported, run_ep_decomposition=False)
    imp = import_model(cap)
    s = Session(imp, cap)
    s.set_pipeline(passes.get_pipeline("zero"))
    assert s.run_to_end() is not None
    r = run_and_compare(build(s.current.mod), loaded, repeats=1)
    assert r.allclose, r.max_abs_error


def test_missing_transformers_is_a_load_error(monkeypatch):
    import builtins

    real = builtins.__import__

    def fake(name, *a, **k):
        if name == "transformers" or name.startswith("transformers."):
            raise ImportError("No module named 'transformers'")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake)
    with pytest.raises(LoadError) as ei:
        load_model("sample:hf_gpt2")
    assert "pip install 'irviz[hf]'" in ei.value.message
    assert not hf.available()


LM_AS_USERS_WRITE_IT = '''
import torch
import transformers


def get_model():
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64, n_positions=32)
    return transformers.GPT2LMHeadModel(cfg).eval(), (torch.randint(0, 64, (1, 8)),)
'''


@needs_hf
def test_a_causal_lm_written_without_irviz_helpers_captures_with_its_cache_off(tmp_path):
    """transformers returns a DynamicCache beside the logits, which torch.export cannot output."""
    f = tmp_path / "user_lm.py"
    f.write_text(LM_AS_USERS_WRITE_IT)
    loaded = load_model(str(f))
    assert loaded.module.config.use_cache is False
    assert len(loaded.notes) == 1 and "use_cache" in loaded.notes[0]
    _, r = _check(loaded)
    assert r.allclose, r.max_abs_error
