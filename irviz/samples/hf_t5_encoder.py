"""transformers T5EncoderModel, 2 layers, width 64, random weights: tokens (1, 16) -> hidden states.

Built from a small config with random weights (fixed seed; no download). Needs the `hf` extra:
pip install 'irviz[hf]'.
"""
from irviz.core.frontend import hf


def get_model():
    transformers = hf.require_transformers()
    cfg = transformers.T5Config(vocab_size=256, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
                                decoder_start_token_id=0)
    model = hf.encoder(transformers.T5EncoderModel, cfg)
    return model, (hf.token_ids(cfg.vocab_size, seq=16),)
