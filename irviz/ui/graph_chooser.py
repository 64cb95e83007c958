"""The toolbar's capture bar: which capture fallback the open model needed, and, for a model that
nothing captured whole, the chooser of the graph (of those torch.compile cut it into at its graph
breaks) that the panes show.

Shown only when a fallback was used. Choosing a graph asks the engine to `choose_graph`; the panes
start afresh from the state it answers with, as after an open, so no result of the previous graph
is shown as this one's. Results are stamped with the model name, which names the graph ("m graph
1 of 3"), and the Run pane's verdict says which graph it compared ("match PyTorch on graph 2 of
3")."""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QWidget

from irviz.protocol.commands import GraphInfo, State
from irviz.ui import themes


def graph_item_text(g: GraphInfo, count: int) -> str:
    """'graph 2 of 3 · 4 ops · 8×6 float32'."""
    inputs = ", ".join(g.get("inputs") or []) or "no inputs"
    return f"graph {g['graph']} of {count} · {g.get('ops', '?')} ops · {inputs}"


class CaptureBar(QWidget):
    graphChosen = Signal(int)  # the user picked another graph (from 1)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.label = QLabel()
        self.label.setObjectName("captureFallback")
        self.combo = QComboBox()
        self.combo.setObjectName("graphChooser")
        self.combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.combo.setToolTip("The graph the panes show: each graph torch.compile cut the model into "
                              "is its own model here (passes, Build & Run against PyTorch on the "
                              "inputs that graph was given); the code between them runs in Python")
        lay = QHBoxLayout(self)
        lay.setContentsMargins(8, 0, 4, 0)
        lay.addWidget(self.label)
        lay.addWidget(self.combo)
        self._shown_graph: int | None = None
        self.combo.activated.connect(self._on_activated)
        self.set_state(None)

    def set_state(self, state: State | None) -> None:
        fallback = state.get("capture_fallback") if state else None
        notes = list((state.get("capture_notes") if state else None) or [])
        gb = state.get("graph_breaks") if state else None
        # a toolbar shows or hides its widgets through their actions: the bar stays, its parts go
        self.label.setVisible(bool(fallback))
        self.combo.setVisible(bool(gb))
        if not fallback:
            self._shown_graph = None
            return
        if gb:
            self.label.setText(f"Captured with graph breaks: {gb['count']} graphs, showing")
        else:
            self.label.setText(f"Captured with {fallback}")
        self.label.setToolTip("\n\n".join(notes))
        self.label.setStyleSheet(f"color: {themes.colors().bad}; font-weight: bold;")
        if not gb:
            self._shown_graph = None
            return
        self.combo.blockSignals(True)
        self.combo.clear()
        for g in gb.get("graphs") or []:
            self.combo.addItem(graph_item_text(g, gb["count"]), int(g["graph"]))
            self.combo.setItemData(self.combo.count() - 1, g.get("name", ""), Qt.ItemDataRole.ToolTipRole)
        self._shown_graph = int(gb["graph"])
        self.combo.setCurrentIndex(max(0, self.combo.findData(self._shown_graph)))
        self.combo.blockSignals(False)

    def choose(self, graph: int) -> None:
        """Select `graph` as the user would (tests and scripts)."""
        i = self.combo.findData(int(graph))
        if i >= 0:
            self.combo.setCurrentIndex(i)
            self._on_activated(i)

    def revert(self) -> None:
        """Back to the graph that is open (a choice the engine refused)."""
        if self._shown_graph is not None:
            self.combo.blockSignals(True)
            self.combo.setCurrentIndex(max(0, self.combo.findData(self._shown_graph)))
            self.combo.blockSignals(False)

    def _on_activated(self, index: int) -> None:
        graph = self.combo.itemData(index)
        if graph is not None and int(graph) != self._shown_graph:
            self.graphChosen.emit(int(graph))
