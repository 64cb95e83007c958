"""GraphPair: one Relax function at two steps of two pipelines, side by side (Model Explorer's
diff view): A's graph with the nodes only in A in red, B's with the nodes only in B in green, and
the nodes on both sides whose callee's body differs in amber on each. Selecting a changed node
selects its partner on the other side; the lists under the graphs name what is one-sided."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QListWidget, QSplitter, QVBoxLayout, QWidget

from irviz.ui.widgets.graph_view import GraphView

__all__ = ["GraphPair"]

LEGEND = "red: only in A · green: only in B · amber: in both, the function it calls differs"


def _describe(graph: dict, nid: str) -> str:
    nd: dict = next((n for n in graph.get("nodes", []) if str(n["id"]) == nid), {})
    what = nd.get("callee") or nd.get("label") or ""
    shape = nd.get("sublabel") or ""
    return " · ".join(x for x in (nid, what, shape) if x)


class _Side(QWidget):
    def __init__(self, name: str):
        super().__init__()
        self.title = QLabel(name)
        self.title.setTextFormat(Qt.TextFormat.PlainText)
        self.graph = GraphView()
        self.listing = QListWidget()
        self.listing.setMaximumHeight(90)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        lay.addWidget(self.title)
        lay.addWidget(self.graph, 1)
        lay.addWidget(self.listing)


class GraphPair(QWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.result: dict | None = None
        self.a, self.b = _Side("A"), _Side("B")
        self.partner: dict[tuple[int, str], str] = {}  # (side, id) -> the changed node's id on the other side
        self.legend = QLabel(LEGEND)
        self.legend.setStyleSheet("color: palette(mid)")
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.a)
        split.addWidget(self.b)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.legend)
        lay.addWidget(split, 1)
        for k, side in enumerate((self.a, self.b)):
            side.graph.nodeSelected.connect(lambda nid, k=k: self._selected(k, nid))
            side.listing.currentRowChanged.connect(lambda row, k=k: self._listed(k, row))

    def sides(self) -> tuple[GraphView, GraphView]:
        return self.a.graph, self.b.graph

    def clear(self, message: str = "") -> None:
        self.result = None
        self.partner = {}
        for side, name in ((self.a, "A"), (self.b, "B")):
            side.graph.clear()
            side.listing.clear()
            side.title.setText(name)
        self.legend.setText(message or LEGEND)

    def set_pair(self, result: dict) -> None:
        """Show a ``compare_graphs`` reply."""
        self.result = result
        only = (result.get("only_a") or [], result.get("only_b") or [])
        changed = result.get("changed") or []
        self.partner = {(0, x): y for x, y in changed} | {(1, y): x for x, y in changed}
        func = result.get("func", "main")
        self.legend.setText(f"{func}: {LEGEND}")
        for k, side in enumerate((self.a, self.b)):
            graph = result.get(("graph_a", "graph_b")[k]) or {"nodes": [], "edges": []}
            side.graph.set_graph(graph)
            side.graph.highlight(only[k], "removed" if k == 0 else "added")
            side.graph.highlight([pair[k] for pair in changed], "changed")
            step, name = result.get("ab"[k]), result.get(("pass_a", "pass_b")[k], "")
            side.title.setText(f"{'AB'[k]} · step {step} ({name}) · {len(only[k])} only here, "
                               f"{len(changed)} changed, {result.get('same', 0)} the same")
            side.listing.blockSignals(True)
            side.listing.clear()
            tag = "only in " + "AB"[k]
            for nid in only[k]:
                side.listing.addItem(f"{tag}: {_describe(graph, nid)}")
            for pair in changed:
                side.listing.addItem(f"changed: {_describe(graph, pair[k])}")
            side.listing.blockSignals(False)

    def _ids(self, k: int) -> list[str]:
        r = self.result or {}
        return list(r.get(("only_a", "only_b")[k]) or []) + [p[k] for p in r.get("changed") or []]

    def _listed(self, k: int, row: int) -> None:
        ids = self._ids(k)
        if 0 <= row < len(ids):
            (self.a, self.b)[k].graph.select(ids[row], center=True)

    def _selected(self, k: int, nid: str) -> None:
        other = self.partner.get((k, nid))
        if other is not None:
            (self.b, self.a)[k].graph.select(other, center=True, emit=False)
