"""Gemma-7B's shape on the meta device: 8.5 B parameters (34 GB in float32), never allocated.

Published sizes: hidden 3072, 28 layers, 16 heads of head_dim 256 (so attention is 4096 wide,
wider than the hidden size), 16 KV heads, GeGLU MLP 24576 (gelu tanh), vocab 256000 with tied
embeddings, rope_theta 10000. Tokens (1, 128) -> logits. Needs transformers.
"""
import torch

from irviz.core.frontend import hf


def get_model():
    transformers = hf.require_transformers()
    cfg = transformers.GemmaConfig(
        vocab_size=256000, hidden_size=3072, intermediate_size=24576, num_hidden_layers=28,
        num_attention_heads=16, num_key_value_heads=16, head_dim=256,
        hidden_activation="gelu_pytorch_tanh", max_position_embeddings=8192, rms_norm_eps=1e-6,
        rope_theta=10000.0, tie_word_embeddings=True)
    with torch.device("meta"):
        model = hf.causal_lm(transformers.GemmaForCausalLM, cfg)
    return model, (hf.token_ids(cfg.vocab_size, seq=128),)
