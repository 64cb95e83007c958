"""irviz: see torch.fx, TVM Relax and TensorIR side by side, step passes, build and run."""

__version__ = "0.1.0"
