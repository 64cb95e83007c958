"""The Run pane's "Estimate" tab: the cursor step's latency estimated without running it (the
engine's ``estimate``): each distinct kernel timed alone on random inputs of its shapes, times its
calls. What a model opened without weights offers instead of a run; any model can ask for it."""
from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QHBoxLayout, QHeaderView, QPushButton, QTableWidgetItem, QVBoxLayout,
                               QWidget)

from irviz.protocol.commands import State
from irviz.ui.panes.base import dim_label, row_table
from irviz.ui.panes.kernel_table import Num
from irviz.ui.result_stamp import ResultSlot, ResultStamp

INTRO = ("Estimate the step's latency without running it: each distinct kernel is timed alone on "
         "random inputs of its shapes (kept per CPU), times its calls.")


def _ms_text(ms) -> str:
    """Four significant figures for a cell: 0.01234, 12.34, 98988 (not 98987.6796)."""
    ms = float(ms or 0)
    return f"{ms:.4g}" if ms < 1e4 else f"{ms:,.0f}"


def fmt_total(ms: float) -> str:
    """'0.725 ms', '3.21 s', '12,730 s': an unscheduled full-size model takes hours a step."""
    if ms >= 10_000:
        return f"{ms / 1e3:,.0f} s"
    if ms >= 1_000:
        return f"{ms / 1e3:.3g} s"
    return f"{ms:.4g} ms"


def estimate_summary(r: dict) -> str:
    """'Step 5 (FuseTIR): estimated 12.3 ms from 24 kernels (3 timed, 21 from the cache) at seq = 128 …'"""
    dims = ", ".join(f"{k} = {v} ({(r.get('dims_source') or {}).get(k, '')})"
                     for k, v in (r.get("dims") or {}).items())
    src = (f", kernels of step {r['from_step']} ({r.get('from_pass')})"
           if r.get("from_step") is not None and r.get("from_step") != r.get("step") else "")
    cpu = (r.get("cpu") or {}).get("model")
    parts = [f"Step {r.get('step')}: estimated {fmt_total(r.get('estimated_ms') or 0)} from "
             f"{len(r.get('kernels') or [])} distinct kernels ({r.get('measured', 0)} timed, "
             f"{r.get('cached', 0)} from the cache, {r.get('seconds', 0):.1f} s){src}"]
    if r.get("extrapolated"):
        parts.append(f"{r['extrapolated']} too slow or too big to time, extrapolated from their FLOPs or bytes (~)")
    if dims:
        parts.append(f"symbolic sizes at {dims}")
    if cpu:
        parts.append(cpu)
    missing = r.get("not_estimated") or []
    if missing:
        parts.append("not estimated: " + "; ".join(f"{m['name']} ×{m['calls']} ({m['why']})"
                                                   for m in missing[:3])
                     + (f"; {len(missing) - 3} more" if len(missing) > 3 else ""))
    parts.extend(r.get("notes") or [])
    parts.append("Kernel time only: the VM's calls and allocations between kernels are not in it.")
    return " · ".join(parts)


class EstimateTab(QWidget):
    """`ask(purpose, cmd, **args)` sends to the engine (the pane's ask); replies come back through
    `show` / `show_error`."""

    COLUMNS = ["Kernel", "Calls", "ms each", "total ms", "%", "shapes"]

    def __init__(self, ask, cursor, parent=None, state: Callable[[], State | None] = lambda: None):
        super().__init__(parent)
        self._ask, self._cursor, self._state = ask, cursor, state
        self.result: dict | None = None
        self.button = QPushButton("Estimate latency")
        self.button.setObjectName("EstimateButton")
        self.button.setToolTip(INTRO)
        self.button.clicked.connect(self.estimate)
        self.total = dim_label("")
        self.total.setObjectName("EstimateTotal")
        f = self.total.font()
        f.setBold(True)
        self.total.setFont(f)
        self.status = dim_label(INTRO)
        self.status.setWordWrap(True)
        self.status.setObjectName("EstimateStatus")
        self.note = dim_label("")
        self.table = row_table(self.COLUMNS)
        self.table.setSortingEnabled(True)
        hh = self.table.horizontalHeader()
        hh.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for c in (1, 2, 3, 4):
            hh.setSectionResizeMode(c, QHeaderView.ResizeMode.ResizeToContents)
        hh.setSectionResizeMode(5, QHeaderView.ResizeMode.Interactive)
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.button)
        top.addWidget(self.total, 1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 4, 0, 0)
        lay.setSpacing(4)
        lay.addLayout(top)
        lay.addWidget(self.status)
        lay.addWidget(self.note)
        lay.addWidget(self.table, 1)
        self.slot = ResultSlot([self.total, self.status, self.table], self.note)

    def estimate(self) -> None:
        cursor = self._cursor()
        if cursor is None:
            self.status.setText("Open a model first.")
            return
        self.slot.set(ResultStamp.of(self._state(), cursor))
        self.total.setText("")
        self.status.setText(f"Timing the kernels of step {cursor}…")
        self.button.setEnabled(False)
        self._ask("estimate", "estimate", step=cursor)

    def clear(self) -> None:
        self.slot.clear()
        self.result = None
        self.table.setRowCount(0)
        self.total.setText("")
        self.button.setEnabled(True)
        self.status.setText(INTRO)

    def show_result(self, r: dict) -> None:
        self.result = r
        self.button.setEnabled(True)
        self.total.setText(f"≈ {fmt_total(r.get('estimated_ms') or 0)} per run (estimated)")
        self.status.setText(estimate_summary(r))
        rows = list(r.get("kernels") or [])
        self.table.setSortingEnabled(False)
        self.table.setRowCount(len(rows))
        for i, k in enumerate(rows):
            self.table.setItem(i, 0, QTableWidgetItem(str(k.get("name", ""))))
            self.table.setItem(i, 1, Num(float(k.get("calls") or 0), str(k.get("calls", ""))))
            about = "~" if k.get("extrapolated") else ""  # not timed: its FLOPs or bytes at a timed kernel's rate
            self.table.setItem(i, 2, Num(float(k.get("ms") or 0), f"{about}{_ms_text(k.get('ms'))}"))
            self.table.setItem(i, 3, Num(float(k.get("total_ms") or 0), _ms_text(k.get('total_ms'))))
            self.table.setItem(i, 4, Num(float(k.get("share") or 0), f"{100 * float(k.get('share') or 0):.1f}"))
            shapes = QTableWidgetItem(str(k.get("shapes") or ""))
            shapes.setToolTip(str(k.get("shapes") or ""))
            self.table.setItem(i, 5, shapes)
        self.table.setSortingEnabled(True)
        self.table.sortItems(3, Qt.SortOrder.DescendingOrder)

    def show_error(self, error: dict) -> None:
        self.button.setEnabled(True)
        msg = error.get("message", "failed")
        if error.get("hint"):
            msg += f"\nhint: {error['hint']}"
        self.status.setText("Cancelled." if error.get("stage") == "cancelled" else f"Estimate failed: {msg}")
        self.status.setToolTip(error.get("detail") or "")
