"""OLMo-7B's shape on the meta device: 6.9 B parameters (28 GB in float32).

Published sizes: hidden 4096, 32 layers, 32 heads, SwiGLU MLP 11008, non-parametric LayerNorm
(no weight or bias), vocab 50304, 2048 positions, rope_theta 10000. Tokens (1, 128) -> logits.
Needs transformers.
"""
import torch

from irviz.core.frontend import hf


def get_model():
    transformers = hf.require_transformers()
    cfg = transformers.OlmoConfig(
        vocab_size=50304, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
        num_attention_heads=32, num_key_value_heads=32, max_position_embeddings=2048,
        rope_theta=10000.0, clip_qkv=None, tie_word_embeddings=False, pad_token_id=1)
    with torch.device("meta"):
        model = hf.causal_lm(transformers.OlmoForCausalLM, cfg)
    return model, (hf.token_ids(cfg.vocab_size, seq=128),)
