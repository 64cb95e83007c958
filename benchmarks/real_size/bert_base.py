"""BERT-base at its published size (hidden 768, 12 layers, 12 heads, FFN 3072), 128 tokens, random
weights: what users compile, not the 2-layer sample."""
import torch


def get_model():
    import transformers

    torch.manual_seed(0)
    cfg = transformers.BertConfig()  # the defaults are bert-base-uncased's sizes
    model = transformers.BertModel(cfg, add_pooling_layer=False).eval()
    ids = torch.randint(0, cfg.vocab_size, (1, 128))
    return model, (ids,)
