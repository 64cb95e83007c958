"""transformers FalconModel, 2 layers, width 32, 4 heads sharing one key/value head, random weights:
tokens (1, 16) -> hidden states.

Its multi-query attention takes the shared key and value with negative indices
(`qkv[..., [-2], :]`), which TVM's importer alone turns into reads before the tensor.

Built from a small config with random weights (fixed seed; no download). Needs the `hf` extra:
pip install 'irviz[hf]'.
"""
from irviz.core.frontend import hf


def get_model():
    transformers = hf.require_transformers()
    cfg = transformers.FalconConfig(vocab_size=256, hidden_size=32, num_hidden_layers=2,
                                    num_attention_heads=4, max_position_embeddings=64)
    model = hf.encoder(transformers.FalconModel, cfg)
    return model, (hf.token_ids(cfg.vocab_size, seq=16),)
