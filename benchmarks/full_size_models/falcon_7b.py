"""Falcon-7B's shape on the meta device: 6.9 B parameters (28 GB in float32).

Published sizes: hidden 4544, 32 layers, 71 heads with multi-query attention (one KV head),
attention and MLP in parallel off one LayerNorm, MLP 4 x 4544 (GELU), no biases, rotary
positions, vocab 65024. Tokens (1, 128) -> logits. Needs transformers.
"""
import torch

from irviz.core.frontend import hf


def get_model():
    transformers = hf.require_transformers()
    cfg = transformers.FalconConfig(
        vocab_size=65024, hidden_size=4544, num_hidden_layers=32, num_attention_heads=71,
        multi_query=True, parallel_attn=True, new_decoder_architecture=False, bias=False,
        alibi=False, layer_norm_epsilon=1e-5, tie_word_embeddings=True)
    with torch.device("meta"):
        model = hf.causal_lm(transformers.FalconForCausalLM, cfg)
    return model, (hf.token_ids(cfg.vocab_size, seq=128),)
