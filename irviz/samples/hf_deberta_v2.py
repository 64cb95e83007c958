"""transformers DebertaV2Model, 2 layers, width 32, relative attention with position buckets,
random weights: tokens (1, 16) -> hidden states.

Its relative position buckets take the log of int64 tensors, which torch computes in float.

Built from a small config with random weights (fixed seed; no download). Needs the `hf` extra:
pip install 'irviz[hf]'.
"""
from irviz.core.frontend import hf


def get_model():
    transformers = hf.require_transformers()
    cfg = transformers.DebertaV2Config(vocab_size=256, hidden_size=32, num_hidden_layers=2,
                                       num_attention_heads=4, intermediate_size=64,
                                       max_position_embeddings=64, relative_attention=True,
                                       position_buckets=8, max_relative_positions=16,
                                       pos_att_type=["p2c", "c2p"])
    model = hf.encoder(transformers.DebertaV2Model, cfg)
    return model, (hf.token_ids(cfg.vocab_size, seq=16),)
