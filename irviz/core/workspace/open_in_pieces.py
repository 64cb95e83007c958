"""The last capture fallback, in a Workspace: a model that nothing captures whole is opened one
graph at a time.

When torch.export and irviz's other fallbacks all fail, `open(..., graph=k)` cuts the model at
torch.compile's graph breaks (irviz.core.frontend.break_capture) and opens graph k as a model of
its own: its FX graph, its Relax module, its passes, and builds compared with eager torch on the
inputs that graph was first called with. `choose_graph(j)` opens another graph of the same cut
(no second torch.compile run) with the same passes planned. `graph_breaks` says which graph is
open and what the others are; the model's name says "graph k of N", so whatever is stamped with
it (a build, a latency trace) belongs to that graph and no other. The code between the graphs
runs in Python and is never compiled: no result here covers it.

With `graph=None` (the CLI's `irviz check` and `irviz export`, which check or write every graph
themselves) a capture failure stays a failure.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from irviz.core.errors import CaptureError, RequestError
from irviz.core.workspace.host import WorkspaceHost


@dataclass(frozen=True)
class GraphBreakSplit:
    spec: str
    name: str                # the whole model's name
    pieces: tuple            # one LoadedModel per graph, in the order torch ran them
    note: str                # how the model was captured, and what failed to capture it whole
    importer: str | None     # the importer asked for (None: by the capture)
    chosen: int = 1          # the graph open now, from 1

    def describe(self) -> dict:
        """What the state says: {graph, count, note, graphs: [{graph, name, ops, inputs}]}."""
        from irviz.core.frontend.break_capture import ops_of

        graphs = [{"graph": k, "name": p.name, "ops": ops_of(p),
                   "inputs": [f"{'×'.join(str(d) for d in t.shape) or 'scalar'} "
                              f"{str(t.dtype).removeprefix('torch.')}" for t in p.example_inputs]}
                  for k, p in enumerate(self.pieces, 1)]
        return {"graph": self.chosen, "count": len(self.pieces), "note": self.note, "graphs": graphs}


class GraphBreakOpening:
    """Opens the graphs of a model's graph breaks in the Workspace `ws` that owns it, and keeps the
    cut while one of its graphs is open."""

    def __init__(self, ws: WorkspaceHost):
        self.ws = ws
        self.split: GraphBreakSplit | None = None     # the cut the open model is a graph of
        self._pending: GraphBreakSplit | None = None  # the cut whose graph is being imported

    @property
    def capture_fallback(self) -> str | None:
        """The capture fallback the open model needed: "graph breaks", a fallback of
        irviz.core.frontend.capture_fallbacks, or None (torch.export captured it as asked)."""
        if self.split is not None:
            return "graph breaks"
        return getattr(self.ws.captured, "fallback", None) or None

    @property
    def capture_notes(self) -> list[str]:
        """What the fallback tried and assumed (the log's `note` lines)."""
        head = [self.split.note] if self.split is not None else []
        return head + list(getattr(self.ws.captured, "notes", ()) or ())

    @property
    def reference_name(self) -> str | None:
        """A graph's runs are compared with eager torch running that graph alone, on the inputs
        the whole model gave it: the verdict says which graph it is for (None: no graph open)."""
        split = self.split
        if split is not None and self.ws.loaded is not None:
            return (f"PyTorch on graph {split.chosen} of {len(split.pieces)} "
                    "(its own captured inputs)")
        return None

    def open_graph_breaks(self, spec, loaded, error: CaptureError, graph: int, asked_importer,
                           planned, keep_params, at) -> None:
        """After every whole-model capture failed with `error`: cut the model at its graph breaks
        and open graph `graph`; else one CaptureError listing everything tried."""
        from irviz.core.frontend.break_capture import nothing_captured, split_quietly, used_note

        self.ws.stage = "capture"
        self.ws.progress(f"Nothing captures {loaded.name} whole: cutting it at torch.compile's graph "
                      "breaks", at(0.35))
        try:
            pieces = split_quietly(loaded)
        except Exception as exc:  # torch raises many kinds
            raise nothing_captured(error, exc) from None
        split = GraphBreakSplit(spec, loaded.name, tuple(pieces), used_note(error, len(pieces)),
                                asked_importer)
        self.ws.log(f"note     {split.note}")
        self._open_piece(split, graph, planned, keep_params, at)

    def choose_graph(self, graph: int) -> None:
        """Open graph `graph` of the open model's graph breaks, its passes the same as now
        (applied and planned), at step 0. A graph that fails to capture changes nothing."""
        split = self.split
        if split is None:
            raise RequestError("The open model was captured whole: it has no graph breaks to choose from",
                               "graphs are offered when nothing captures the whole model")
        self._open_piece(split, graph, self.ws.applied() + self.ws.planned(), self.ws.keep_params, lambda x: x)

    def _open_piece(self, split: GraphBreakSplit, graph, planned, keep_params, at) -> None:
        from irviz.core.frontend import capture as capture_mod

        n = len(split.pieces)
        try:
            k = int(graph)
        except (TypeError, ValueError):
            k = 0
        if not 1 <= k <= n:
            raise RequestError(f"No graph {graph!r}: {split.name} was cut into graphs 1..{n}",
                               f"choose a graph from 1 to {n}")
        piece = split.pieces[k - 1]
        self.ws.stage = "capture"
        self.ws.progress(f"Capturing graph {k} of {n} with torch.export", at(0.45))
        try:
            captured = capture_mod.capture(piece)
        except CaptureError as exc:
            raise CaptureError(f"graph {k} of {n} (graph breaks): {exc.message}", exc.hint,
                               detail=exc.detail) from None
        self.ws.log(f"capture  {captured.seconds:7.2f} s  {len(captured.graph.nodes)} FX nodes "
                 f"(graph {k} of {n})")
        importer = self.ws.after_fallback(captured, split.importer or "exported_program", split.importer)
        self._pending = replace(split, chosen=k)
        try:
            self.ws.import_capture(split.spec, importer, piece, captured, planned, at(0.6), at(0.9), (),
                         keep_params)
        finally:
            self._pending = None
        self.ws.stage_seconds["capture"] = captured.seconds

    def split_of(self, loaded) -> GraphBreakSplit | None:
        """The graph-break cut `loaded` is a graph of (None: a whole model, or nothing)."""
        for split in (self._pending, self.split):
            if split is not None and loaded is not None and any(loaded is p for p in split.pieces):
                return split
        return None
