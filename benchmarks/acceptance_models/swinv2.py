"""A small Swin-v2 image classifier from transformers, as a user would write it."""
import torch
import transformers


def get_model():
    torch.manual_seed(0)
    cfg = transformers.Swinv2Config(image_size=32, patch_size=4, num_channels=3, embed_dim=16,
                                    depths=[1, 1], num_heads=[2, 2], window_size=4, num_labels=10)
    model = transformers.Swinv2ForImageClassification(cfg).eval()
    return model, (torch.randn(1, 3, 32, 32),)
