"""GPT-2 small at its published size (hidden 768, 12 layers, 12 heads), a 128-token prefill without
the KV cache, random weights."""
import torch


def get_model():
    import transformers

    torch.manual_seed(0)
    cfg = transformers.GPT2Config(use_cache=False)  # the defaults are gpt2's sizes
    model = transformers.GPT2Model(cfg).eval()
    ids = torch.randint(0, cfg.vocab_size, (1, 128))
    return model, (ids,)
