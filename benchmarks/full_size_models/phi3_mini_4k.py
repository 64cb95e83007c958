"""Phi-3-mini-4k-instruct's shape on the meta device: 3.8 B parameters (15 GB in float32).

Published sizes: hidden 3072, 32 layers, 32 heads (no GQA), fused qkv and gate_up projections,
MLP 8192, vocab 32064, 4096 positions, sliding window 2047, rope_theta 10000. Tokens (1, 128)
-> logits. Needs transformers.
"""
import torch

from irviz.core.frontend import hf


def get_model():
    transformers = hf.require_transformers()
    cfg = transformers.Phi3Config(
        vocab_size=32064, hidden_size=3072, intermediate_size=8192, num_hidden_layers=32,
        num_attention_heads=32, num_key_value_heads=32, max_position_embeddings=4096,
        original_max_position_embeddings=4096, sliding_window=2047, rope_theta=10000.0,
        rms_norm_eps=1e-5, tie_word_embeddings=False, pad_token_id=32000)
    with torch.device("meta"):
        model = hf.causal_lm(transformers.Phi3ForCausalLM, cfg)
    return model, (hf.token_ids(cfg.vocab_size, seq=128),)
