"""transformers LlamaForCausalLM, 2 layers, width 64, 2 KV heads, random weights: tokens (1, 16) -> logits.

Built from a small config with random weights (fixed seed; no download). Needs the `hf` extra:
pip install 'irviz[hf]'.
"""
from irviz.core.frontend import hf


def get_model():
    transformers = hf.require_transformers()
    cfg = transformers.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                   bos_token_id=1, eos_token_id=2)
    model = hf.causal_lm(transformers.LlamaForCausalLM, cfg)
    return model, (hf.token_ids(cfg.vocab_size, seq=16),)
