"""ConvNeXt-T at its published size (stages of 3/3/9/3 blocks, 96-768 channels; each block a
depthwise 7x7 convolution, a LayerNorm over the channels and a 4x MLP), 224² image, random weights."""
import torch


def get_model():
    import transformers

    torch.manual_seed(0)
    # the defaults are convnext-tiny-224's sizes, spelled out so a change of defaults shows here
    cfg = transformers.ConvNextConfig(hidden_sizes=[96, 192, 384, 768], depths=[3, 3, 9, 3], image_size=224)
    model = transformers.ConvNextModel(cfg).eval()
    return model, (torch.randn(1, 3, 224, 224),)
