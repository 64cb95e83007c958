"""transformers BertModel, 2 layers, width 64, random weights: tokens + padding mask (1, 16) -> hidden states.

Built from a small config with random weights (fixed seed; no download). Needs the `hf` extra:
pip install 'irviz[hf]'.
"""
import torch

from irviz.core.frontend import hf


def get_model():
    transformers = hf.require_transformers()
    cfg = transformers.BertConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=128, max_position_embeddings=64)
    model = hf.encoder(transformers.BertModel, cfg, names=("input_ids", "attention_mask"))
    ids = hf.token_ids(cfg.vocab_size, seq=16)
    mask = torch.ones_like(ids)
    mask[:, 12:] = 0  # padding at the end
    return model, (ids, mask)
