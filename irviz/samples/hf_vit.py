"""transformers ViTForImageClassification, 2 layers, width 64, random weights: image (1, 3, 32, 32) -> logits.

Built from a small config with random weights (fixed seed; no download). Needs the `hf` extra:
pip install 'irviz[hf]'.
"""
from irviz.core.frontend import hf


def get_model():
    transformers = hf.require_transformers()
    cfg = transformers.ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, intermediate_size=128, num_labels=10)
    model = hf.encoder(transformers.ViTForImageClassification, cfg, names=("pixel_values",), field="logits")
    return model, (hf.pixels(size=32),)
