"""transformers MixtralForCausalLM, 2 layers, width 32, 4 experts (2 per token), random weights:
tokens (1, 16) -> logits.

Its experts count tokens with `histc`, sort them, divide int64 positions and run transformers'
own `grouped_mm_fallback` op: irviz's built-in converters import all of them.

Built from a small config with random weights (fixed seed; no download). Needs the `hf` extra:
pip install 'irviz[hf]'.
"""
from irviz.core.frontend import hf


def get_model():
    transformers = hf.require_transformers()
    cfg = transformers.MixtralConfig(vocab_size=256, hidden_size=32, intermediate_size=64,
                                     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                     num_local_experts=4, num_experts_per_tok=2,
                                     max_position_embeddings=64)
    model = hf.causal_lm(transformers.MixtralForCausalLM, cfg)
    return model, (hf.token_ids(cfg.vocab_size, seq=16),)
