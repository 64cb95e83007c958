"""transformers ConvNextForImageClassification, 2 stages, random weights: image (1, 3, 32, 32) -> logits.

Built from a small config with random weights (fixed seed; no download). Needs the `hf` extra:
pip install 'irviz[hf]'.
"""
from irviz.core.frontend import hf


def get_model():
    transformers = hf.require_transformers()
    cfg = transformers.ConvNextConfig(num_channels=3, num_stages=2, hidden_sizes=[16, 32], depths=[1, 1],
                                      num_labels=10)
    model = hf.encoder(transformers.ConvNextForImageClassification, cfg, names=("pixel_values",), field="logits",
                       attn_implementation=None)
    return model, (hf.pixels(size=32),)
