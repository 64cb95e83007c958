"""Mixtral-8x7B's shape on the meta device: 46.7 B parameters (187 GB in float32), never allocated.

The published sizes (hidden 4096, 32 layers, 32 heads, 8 KV heads, 8 experts of MLP 14336, 2 per
token, vocab 32000, rope_theta 1000000), no download. Opens structure only (see
llama3_8b_shape). Tokens (1, 128) -> logits. Needs the `hf` extra.
"""
import torch

from irviz.core.frontend import hf


def get_model():
    transformers = hf.require_transformers()
    cfg = transformers.MixtralConfig(
        vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
        num_attention_heads=32, num_key_value_heads=8, num_local_experts=8, num_experts_per_tok=2,
        max_position_embeddings=32768, rope_theta=1000000.0, rms_norm_eps=1e-5,
        tie_word_embeddings=False)
    with torch.device("meta"):
        model = hf.causal_lm(transformers.MixtralForCausalLM, cfg)
    return model, (hf.token_ids(cfg.vocab_size, seq=128),)
