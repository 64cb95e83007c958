"""Qwen2-0.5B's width (hidden 896, 14 query and 2 key/value heads, FFN 4864, SiLU, RMSNorm,
rotary) with 4 of its 24 layers and its 151,936-word embedding, a 128-token prefill, random
weights: a Llama-family decoder at real width."""
import torch


def get_model():
    import transformers

    torch.manual_seed(0)
    cfg = transformers.Qwen2Config(hidden_size=896, intermediate_size=4864, num_attention_heads=14,
                                   num_key_value_heads=2, num_hidden_layers=4, vocab_size=151936)
    model = transformers.Qwen2Model(cfg).eval()
    return model, (torch.randint(0, cfg.vocab_size, (1, 128)),)
