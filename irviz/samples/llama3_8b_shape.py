"""Llama-3-8B's shape on the meta device: 8.0 B parameters (32 GB in float32), never allocated.

The published sizes (hidden 4096, 32 layers, 32 heads, 8 KV heads, MLP 14336, vocab 128256,
rope_theta 500000), no download. A module built under torch.device("meta") has no weights: irviz
opens it structure only, and every pass, diff, query, memory plan and build works on the full-size
graph; a run says it has no weights. Tokens (1, 128) -> logits. Needs the `hf` extra.
"""
import torch

from irviz.core.frontend import hf

LAYERS = 32


def config(layers=LAYERS):
    transformers = hf.require_transformers()
    return transformers.LlamaConfig(
        vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=layers,
        num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192,
        rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=False)


def get_model():
    transformers = hf.require_transformers()
    with torch.device("meta"):
        model = hf.causal_lm(transformers.LlamaForCausalLM, config())
    return model, (hf.token_ids(128256, seq=128),)
