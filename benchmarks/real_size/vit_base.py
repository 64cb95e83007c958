"""ViT-base/16 at its published size (hidden 768, 12 layers, 224² image: 197 tokens, a prime),
random weights."""
import torch


def get_model():
    import transformers

    torch.manual_seed(0)
    cfg = transformers.ViTConfig()  # the defaults are vit-base-patch16-224's sizes
    model = transformers.ViTModel(cfg, add_pooling_layer=False).eval()
    return model, (torch.randn(1, 3, 224, 224),)
