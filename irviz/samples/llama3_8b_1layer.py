"""One layer of Llama-3-8B at full width, with real (random) weights: it can run.

Llama-3-8B's sizes (hidden 4096, 32 heads, 8 KV heads, MLP 14336, vocab 128256) with 1 decoder
layer: 1.27 B parameters, 4.7 GiB in float32 (the 128256 x 4096 embedding and LM head are most
of it). Open it with --no-weights to see its structure in little memory, or without to build and
run it against PyTorch (several times the weights in memory: benchmarks/full_size.py measures it).
Tokens (1, 128) -> logits. Needs the `hf` extra.
"""
from irviz.core.frontend import hf


def get_model():
    transformers = hf.require_transformers()
    cfg = transformers.LlamaConfig(
        vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=1,
        num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192,
        rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=False)
    model = hf.causal_lm(transformers.LlamaForCausalLM, cfg)
    return model, (hf.token_ids(cfg.vocab_size, seq=128),)
