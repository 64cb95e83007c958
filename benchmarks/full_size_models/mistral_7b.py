"""Mistral-7B-v0.1's shape, built the ordinary way (no meta device): 7.2 B parameters, 29 GB in
float32, more than this machine has. Open it with --no-weights: irviz calls get_model() under
torch.device("meta"), so no weight is ever allocated (peak RSS shows it).

Published sizes: hidden 4096, 32 layers, 32 heads, 8 KV heads, MLP 14336, vocab 32000,
sliding window 4096, rope_theta 10000. Tokens (1, 128) -> logits. Needs transformers.
"""
from irviz.core.frontend import hf


def get_model():
    transformers = hf.require_transformers()
    cfg = transformers.MistralConfig(
        vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
        num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=32768,
        sliding_window=4096, rope_theta=10000.0, rms_norm_eps=1e-5, tie_word_embeddings=False)
    model = hf.causal_lm(transformers.MistralForCausalLM, cfg)
    return model, (hf.token_ids(cfg.vocab_size, seq=128),)
