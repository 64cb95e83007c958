"""Qwen2-7B's shape on the meta device: 7.6 B parameters (30 GB in float32), never allocated.

The published sizes (hidden 3584, 28 layers, 28 heads, 4 KV heads, MLP 18944, vocab 152064,
rope_theta 1000000, biases on q/k/v), no download. Opens structure only (see llama3_8b_shape).
Tokens (1, 128) -> logits. Needs the `hf` extra.
"""
import torch

from irviz.core.frontend import hf


def get_model():
    transformers = hf.require_transformers()
    cfg = transformers.Qwen2Config(
        vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
        num_attention_heads=28, num_key_value_heads=4, max_position_embeddings=32768,
        rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=False)
    with torch.device("meta"):
        model = hf.causal_lm(transformers.Qwen2ForCausalLM, cfg)
    return model, (hf.token_ids(cfg.vocab_size, seq=128),)
