"""Every graph of a model's graph breaks, each checked in a Workspace of its own: what `irviz
check` and `irviz export` do when nothing captures the whole model (the app opens one graph at a
time instead: graph_breaks.py). Each graph is imported, run through the whole pipeline, built and
compared with eager torch on the inputs torch.compile first called it with."""
from __future__ import annotations

import math
from dataclasses import dataclass

from irviz.core.workspace.workspace import Workspace


@dataclass
class GraphCheck:
    graph: int                       # from 1, in the order torch ran them
    name: str
    ws: Workspace                    # its session (None until the import worked) for an export
    fx_nodes: int | None = None
    steps: int | None = None
    max_abs_error: float | None = None
    allclose: bool | None = None
    error: str | None = None         # the first line of what failed
    failed_stage: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.allclose is not False


def split_model(model: str) -> list:
    """The model cut at torch.compile's graph breaks: one LoadedModel per graph. Raises what
    load_model or the split raised (the caller adds it to the capture error as one more try)."""
    from irviz.core.frontend.break_capture import split_quietly
    from irviz.core.frontend.model_file import load_model

    return split_quietly(load_model(model))


def check_graph(k: int, piece, pipeline, importer: str | None = None, *, func: str = "main",
                build: bool = True) -> GraphCheck:
    """Graph k (a LoadedModel of split_model) opened with `pipeline`, every pass applied, and with
    `build` built, run and compared with torch; what failed, if anything, in the result."""
    ws = Workspace(log=lambda _text: None)
    out = GraphCheck(graph=k, name=piece.name, ws=ws)
    try:
        ws.open_loaded(piece, importer or "exported_program", planned=pipeline)
        out.fx_nodes = len(ws.captured.graph.nodes)
        ws.run_to_end()
        out.steps = len(ws.session.steps)
        if build:
            _, res = ws.build_run(repeats=1, func=func)
            out.max_abs_error = res.max_abs_error if math.isfinite(res.max_abs_error) else None
            out.allclose = res.allclose
            if res.allclose is False:
                out.failed_stage, out.error = "compare", f"max abs error {res.max_abs_error:.3g}"
    except Exception as exc:  # one graph's failure is its row; the others are still checked
        out.failed_stage = getattr(exc, "stage", None) or ws.stage or "import"
        out.error = (exc.user_message() if hasattr(exc, "user_message")
                     else f"{type(exc).__name__}: {exc}").splitlines()[0]
    return out
