"""irviz: see torch.fx, TVM Relax and TensorIR side by side, step passes, build and run.

From a notebook: ``irviz.show(obj)`` opens the app on an IRModule, a PrimFunc, an nn.Module with
example inputs or an ExportedProgram; ``irviz.report(obj)`` returns the HTML pass report (see
``irviz.api.notebook``). Both are imported on first use, so ``import irviz`` loads neither torch nor
TVM nor Qt."""

from irviz.version import __version__

__all__ = ["__version__", "show", "report"]


def __getattr__(name: str):
    if name in ("show", "report"):
        from irviz.api import notebook

        return getattr(notebook, name)
    raise AttributeError(f"module 'irviz' has no attribute {name!r}")
