"""transformers GPT2LMHeadModel, 2 layers, width 64, random weights: tokens (1, 16) -> logits.

Built from a small config with random weights (fixed seed; no download). Needs the `hf` extra:
pip install 'irviz[hf]'.
"""
from irviz.core.frontend import hf


def get_model():
    transformers = hf.require_transformers()
    cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=256, n_positions=64,
                                   bos_token_id=0, eos_token_id=0)
    model = hf.causal_lm(transformers.GPT2LMHeadModel, cfg)
    return model, (hf.token_ids(cfg.vocab_size, seq=16),)
