"""The engine side: torch + TVM + networkx + pygments. Never imports Qt
(tests/core/test_layering.py checks).

Folders follow the flow: frontend (load, capture, import) -> session (one snapshot per pass, with
passes/) -> views (graphs, layout, diffs) -> backend (build, run, compare, time) -> export.
workspace.py chains the stages for the engine process and the CLI.
"""


def __getattr__(name):
    # `from irviz.core import hf` is how model files wrap transformers models; keep it working.
    if name == "hf":
        import importlib

        return importlib.import_module("irviz.core.frontend.hf")
    raise AttributeError(f"module 'irviz.core' has no attribute {name!r}")
