"""Shared by the course samples: the course's FashionMNIST MLP weights (784 -> 128 -> 10) and one
input image, as deterministic random stand-ins for fasionmnist_mlp_params.pkl, and the numpy
reference the course checks against."""
import numpy as np

_rng = np.random.default_rng(42)
mlp_params = {
    "w0": (_rng.standard_normal((128, 784)) * 0.05).astype("float32"),
    "b0": (_rng.standard_normal((128,)) * 0.05).astype("float32"),
    "w1": (_rng.standard_normal((10, 128)) * 0.05).astype("float32"),
    "b1": (_rng.standard_normal((10,)) * 0.05).astype("float32"),
}
img = _rng.random((1, 784)).astype("float32")


def numpy_mlp(data, w0, b0, w1, b1):
    lv0 = data @ w0.T + b0
    lv1 = np.maximum(lv0, 0)
    return lv1 @ w1.T + b1


def mlp_inputs():
    """(data, w0, b0, w1, b1): main's parameters in order."""
    return (img, mlp_params["w0"], mlp_params["b0"], mlp_params["w1"], mlp_params["b1"])
