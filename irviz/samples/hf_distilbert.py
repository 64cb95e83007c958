"""transformers DistilBertModel, 2 layers, width 64, random weights: tokens (1, 16) -> hidden states.

Built from a small config with random weights (fixed seed; no download). Needs the `hf` extra:
pip install 'irviz[hf]'.
"""
from irviz.core.frontend import hf


def get_model():
    transformers = hf.require_transformers()
    cfg = transformers.DistilBertConfig(vocab_size=256, dim=64, hidden_dim=128, n_layers=2, n_heads=4,
                                        max_position_embeddings=64)
    model = hf.encoder(transformers.DistilBertModel, cfg)
    return model, (hf.token_ids(cfg.vocab_size, seq=16),)
