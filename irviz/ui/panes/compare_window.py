"""Compare view: the open pipeline (A) against another (B) on the same model, in a window of its
own (Pipeline ▸ Compare with pipeline…). The engine runs B on the same import (`compare`); this
view shows the two step lists aligned by pass name, one row per pipeline (latency, error, kernels,
build time), and for the selected row either the IR at the two steps or what the pass did under A
against under B (`compare_diff`), as text; the Graph tab draws main at the two steps side by side
with the nodes only in A / only in B / changed coloured (`compare_graphs`, asked only while the
tab is shown)."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDialog, QHBoxLayout, QLabel, QLineEdit, QSizePolicy,
                               QPushButton, QSplitter, QTableWidgetItem, QTabWidget, QVBoxLayout,
                               QWidget)

from irviz.protocol.commands import State
from irviz.ui.panes.base import Pane, dim_label, row_table
from irviz.ui.result_stamp import ResultSlot, ResultStamp
from irviz.ui.widgets.diff_view import DiffView
from irviz.ui.widgets.graph_pair import GraphPair

ONLY_A = QColor(255, 200, 200, 110)
ONLY_B = QColor(160, 230, 170, 110)
MODES = (("pair", "IR at the two steps"), ("pass", "What the pass did: A's diff against B's"))


def _fmt(v, spec=".3g") -> str:
    return "–" if v is None else format(v, spec) if isinstance(v, float) else str(v)


PIPELINE_COL = 6  # the summary rows' last column

class ComparePane(Pane):
    def __init__(self, bridge, hub, parent=None, settings=None):
        super().__init__(bridge, hub, parent, settings=settings)
        self.result: dict | None = None
        self.diff_result: dict | None = None
        self.a_label = dim_label("A: the open pipeline")
        # a pipeline text has no spaces to wrap at: clip it rather than widen the window
        self.a_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.b_edit = QLineEdit()
        self.b_edit.setPlaceholderText("pipeline B: a name (zero, default_build, …) or a text "
                                       "(LegalizeOps,FuseOps,FuseTIR)")
        self.b_edit.returnPressed.connect(self.compare)
        self.measure = QCheckBox("Build and run the last steps")
        self.measure.setChecked(True)
        self.go = QPushButton("Compare")
        self.go.clicked.connect(self.compare)
        self.info = dim_label("")

        # the figures first and the pipeline text last: a long pipeline must not push them away
        self.rows = row_table(["", "TVM ms", "max abs error", "kernels", "build s", "passes", "pipeline"])
        self.rows.setMaximumHeight(76)
        self.steps = row_table(["A", "pass in A", "B", "pass in B"])
        self.steps.itemSelectionChanged.connect(self._row_selected)
        self.mode = QComboBox()
        for key, text in MODES:
            self.mode.addItem(text, key)
        self.mode.currentIndexChanged.connect(lambda _i: self._row_selected())
        self.diff_info = dim_label("")
        self.view = DiffView()
        self.graphs = GraphPair()
        self.graph_pair: tuple | None = None  # the (a, b) the Graph tab shows or is waiting for
        self.tabs = QTabWidget()
        self.tabs.addTab(self.view, "Text")
        self.tabs.addTab(self.graphs, "Graph")
        self.tabs.currentChanged.connect(lambda _i: self._ask_graphs())

        top = QHBoxLayout()
        top.addWidget(QLabel("B:"))
        top.addWidget(self.b_edit, 1)
        top.addWidget(self.measure)
        top.addWidget(self.go)
        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        bar = QHBoxLayout()
        bar.addWidget(self.mode)
        bar.addWidget(self.diff_info, 1)
        rl.addLayout(bar)
        rl.addWidget(self.tabs, 1)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.steps)
        split.addWidget(right)
        split.setSizes([330, 900])
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 6, 6, 6)
        lay.addWidget(self.a_label)
        lay.addLayout(top)
        lay.addWidget(self.info)
        self.note = dim_label("")
        lay.addWidget(self.note)
        lay.addWidget(self.rows)
        lay.addWidget(split, 1)
        # A is the open pipeline: a comparison made with another one no longer says anything of it
        self.slot = ResultSlot([self.rows, self.steps, right], self.note)

    # -- state and requests ----------------------------------------------------------------
    def on_state(self, state: State, prev: State | None) -> None:
        text = state.get("pipeline_text") or ""
        self.a_label.setText(f"A: {text}" if text else "A: no model open")
        self.a_label.setToolTip(text)
        self.go.setEnabled(bool(state.get("model")))
        self.slot.check(state)

    def compare(self, pipeline_b: str | None = None) -> int | None:
        text = (pipeline_b if isinstance(pipeline_b, str) else self.b_edit.text()).strip()
        if not text:
            self.info.setText("Type pipeline B first: a name or a pipeline text.")
            return None
        self.b_edit.setText(text)
        self.info.setText(f"Running pipeline B ({text}) on the same import…")
        self.slot.set(ResultStamp.of(self.state))
        return self.ask("compare", "compare", pipeline_b=text, measure=self.measure.isChecked())

    def on_reply(self, purpose: str, result) -> None:
        if purpose == "compare":
            self.show_comparison(result or {})
        elif purpose == "diff":
            self.diff_result = result or {}
            self.view.set_diff(self.diff_result)
            self.diff_info.setText(self._diff_summary(self.diff_result))
        elif purpose == "graphs":
            self.graphs.set_pair(result or {})

    def on_error(self, purpose: str, error: dict) -> None:
        text = error.get("message", "failed") + (f" — {error['hint']}" if error.get("hint") else "")
        if purpose == "compare":
            self.info.setText(f"Compare failed: {text}")
        elif purpose == "graphs":
            self.graphs.clear(f"graph diff failed: {text}")
        else:
            self.view.clear()
            self.diff_info.setText(f"diff failed: {text}")

    # -- showing ----------------------------------------------------------------------------
    def show_comparison(self, result: dict) -> None:
        self.result = result
        self.graphs.clear()  # its step numbers were another comparison's
        self.graph_pair = None
        pipes = result.get("pipelines") or []
        self.rows.setRowCount(len(pipes))
        for r, p in enumerate(pipes):
            cells = ["AB"[r], _fmt(p.get("tvm_ms"), ".3f"), _fmt(p.get("max_abs_error")),
                     _fmt(p.get("kernels")), _fmt(p.get("build_seconds"), ".2f"),
                     str(len(p.get("steps") or []) - 1), p.get("pipeline", "")]
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setToolTip(p["error"] if p.get("error") else p.get("pipeline", "") if c == PIPELINE_COL else "")
                self.rows.setItem(r, c, item)
        self.rows.resizeColumnsToContents()
        # the pipeline text takes what is left, elided; its tooltip has all of it
        self.rows.horizontalHeader().setStretchLastSection(True)
        self.rows.setColumnWidth(PIPELINE_COL, min(self.rows.columnWidth(PIPELINE_COL), 320))
        errors = [f"{'AB'[k]}: {p['error']}" for k, p in enumerate(pipes) if p.get("error")]
        aligned = result.get("aligned") or []
        names = [p.get("steps") or [] for p in pipes]
        self.steps.blockSignals(True)
        self.steps.setRowCount(len(aligned))
        for r, (i, j) in enumerate(aligned):
            colour = ONLY_A if j is None else ONLY_B if i is None else None
            cells = ["" if i is None else str(i), "" if i is None else names[0][i],
                     "" if j is None else str(j), "" if j is None else names[1][j]]
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if colour is not None:
                    item.setBackground(QBrush(colour))
                self.steps.setItem(r, c, item)
        self.steps.resizeColumnsToContents()
        self.steps.blockSignals(False)
        one_sided = sum(1 for i, j in aligned if i is None or j is None)
        self.info.setText("; ".join(errors) if errors else
                          f"{len(aligned) - one_sided} passes in both, {one_sided} in one only "
                          "(red: only A, green: only B). Select a row to diff.")
        if aligned:
            self.steps.selectRow(len(aligned) - 1)

    def pair_for_row(self, row: int) -> tuple[int | None, int | None]:
        """The steps a row stands for: a one-sided row is compared with the other pipeline's
        last step before it (what that pipeline had at this point)."""
        aligned = (self.result or {}).get("aligned") or []
        a = b = None
        for i, j in aligned[:row + 1]:
            a = i if i is not None else a
            b = j if j is not None else b
        return a, b

    def _row_selected(self) -> None:
        rows = self.steps.selectionModel().selectedRows() if self.steps.selectionModel() else []
        if not rows or not self.result:
            return
        row = rows[0].row()
        i, j = self.result["aligned"][row]
        mode = self.mode.currentData()
        self.graph_pair = None
        if mode == "pass":
            self.graphs.clear("The graph shows the IR at two steps: choose “IR at the two steps” above.")
        if mode == "pass" and (i is None or j is None or i == 0):
            self.view.clear()
            self.diff_info.setText("A pass both pipelines ran is needed for a diff of diffs: "
                                   "this row is the import or a pass only one of them ran.")
            return
        a, b = (i, j) if mode == "pass" else self.pair_for_row(row)
        if a is None or b is None:
            return
        self.diff_info.setText("computing…")
        self.ask("diff", "compare_diff", a=a, b=b, mode=mode)
        if mode == "pair":
            self.graph_pair = (a, b)
            self._ask_graphs()

    def _ask_graphs(self) -> None:
        """Lay out the pair's graphs when the Graph tab is shown (a layout costs the engine time)."""
        if self.graph_pair is None or self.tabs.currentWidget() is not self.graphs:
            return
        shown = self.graphs.result
        if shown and (shown.get("a"), shown.get("b")) == self.graph_pair:
            return
        a, b = self.graph_pair
        self.graphs.clear(f"Laying out main at A's step {a} and B's step {b}…")
        self.ask("graphs", "compare_graphs", a=a, b=b)

    @staticmethod
    def _diff_summary(d: dict) -> str:
        if "graph" in d:
            g = d["graph"]
            fn = g["functions"]
            text = (f"A step {d['a']} ({d['pass_a']}) vs B step {d['b']} ({d['pass_b']}): functions "
                    f"only in A {len(fn['only_a'])}, only in B {len(fn['only_b'])}, changed {len(fn['changed'])}")
            main = g["nodes"].get("main")
            if main:
                text += (f"; main's nodes only in A {len(main['only_a'])}, only in B "
                         f"{len(main['only_b'])}, changed {len(main['changed'])}, same {main['same']}")
            return text
        name = d["a"]["pass"]
        if d.get("same_effect"):
            return f"{name} changed the module the same way under A and B"
        return f"{name} did different things: lines “-” are only in A's diff, “+” only in B's"


class CompareDialog(QDialog):
    """A window of its own, so the main panes stay as they are while two pipelines are compared."""

    def __init__(self, bridge, hub, state: State | None = None, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Compare pipelines")
        self.pane = ComparePane(bridge, hub, self)
        if state:
            self.pane._on_state(state)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.pane)
        self.resize(1300, 760)
