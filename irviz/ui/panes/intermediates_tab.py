"""The Run pane's "Intermediates" tab: compare every FX node with its Relax binding at the cursor
step (the engine's ``intermediates``), list them in a sortable table, colour the FX and Relax
graphs by error on a log scale, and jump to the first divergence."""
from __future__ import annotations

import math
from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QHBoxLayout, QHeaderView, QLabel, QLineEdit, QPushButton,
                               QTableWidgetItem, QVBoxLayout, QWidget)

from irviz.protocol.commands import State
from irviz.ui import themes
from irviz.ui.panes.base import dim_label, row_table
from irviz.ui.result_stamp import ResultSlot, ResultStamp
from irviz.ui.widgets import palette as pal

# the overlay's fixed decades: colours mean the same error from one run to the next
LOG_LO, LOG_HI = -8.0, 0.0


def error_t(max_abs: float | None) -> float:
    """Position of an error on the overlay's log scale, 0 (≤ 1e-8) .. 1 (≥ 1)."""
    if max_abs is None:
        return 0.0
    if max_abs <= 0:
        return 0.0
    if not math.isfinite(max_abs):
        return 1.0
    return min(1.0, max(0.0, (math.log10(max_abs) - LOG_LO) / (LOG_HI - LOG_LO)))


def error_heat(nodes: list[dict]) -> tuple[dict[str, float], dict[str, float]]:
    """({fx node: t}, {relax var: t}) of the compared nodes."""
    fx: dict[str, float] = {}
    relax: dict[str, float] = {}
    for n in nodes:
        if n.get("status") == "unmatched":
            continue
        t = error_t(n.get("max_abs"))
        fx[n["fx_node"]] = t
        if n.get("relax_var"):
            relax[n["relax_var"]] = max(relax.get(n["relax_var"], 0.0), t)
    return fx, relax


def parse_tolerance(text: str) -> float | None:
    """The tolerance field: empty = per dtype (None); else a non-negative number."""
    text = text.strip()
    if not text:
        return None
    value = float(text)  # ValueError for the caller to report
    if value < 0 or not math.isfinite(value):
        raise ValueError(text)
    return value


def legend_html() -> str:
    stops = []
    for i in range(5):
        t = i / 4
        exp = int(LOG_LO + t * (LOG_HI - LOG_LO))
        stops.append(f'<span style="background:{pal.heat_color(t)}; color:#222">&nbsp;1e{exp}&nbsp;</span>')
    return "max |error|, log scale: " + "".join(stops)


class _Num(QTableWidgetItem):
    def __init__(self, value, text: str):
        super().__init__(text)
        self.value = -1.0 if value is None else float(value)
        self.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)

    def __lt__(self, other):
        return self.value < other.value if isinstance(other, _Num) else super().__lt__(other)


class IntermediatesTab(QWidget):
    """`ask(purpose, cmd, **args)` sends to the engine (the pane's ask); replies come back through
    `show` / `show_error`."""

    COLUMNS = ["#", "FX node", "Relax var", "kernel", "max abs", "max rel", "status", "why"]

    def __init__(self, ask, hub, cursor, parent=None, state: Callable[[], State | None] = lambda: None):
        super().__init__(parent)
        self._ask, self.hub, self._cursor, self._state = ask, hub, cursor, state
        self.result: dict | None = None
        self._heat_sent: tuple[dict, dict] = ({}, {})
        self.compare_button = QPushButton("Compare intermediates")
        self.compare_button.setToolTip("Run torch's FX graph and the built step; compare every FX "
                                       "node with the Relax binding it became")
        self.compare_button.clicked.connect(self.compare)
        self.tolerance = QLineEdit()
        self.tolerance.setObjectName("IntermediatesTolerance")
        self.tolerance.setPlaceholderText("per dtype")
        self.tolerance.setToolTip("One tolerance (atol and rtol) for every node; empty: per dtype "
                                  "(float32: 1e-4, atol scaled by the value's magnitude)")
        self.tolerance.setMaximumWidth(90)
        self.first_button = QPushButton("First divergence")
        self.first_button.setToolTip("Select and centre the earliest node whose error exceeds the tolerance")
        self.first_button.clicked.connect(self.go_to_first)
        self.first_button.setEnabled(False)
        self.status = dim_label("Compare every FX node's value with its Relax binding at the cursor step.")
        self.status.setWordWrap(True)
        self.note = dim_label("")
        self.legend = QLabel(legend_html())
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.table = row_table(self.COLUMNS)
        self.table.setSortingEnabled(True)
        hh = self.table.horizontalHeader()
        for c in range(len(self.COLUMNS) - 1):
            hh.setSectionResizeMode(c, QHeaderView.ResizeMode.ResizeToContents)
        hh.setSectionResizeMode(len(self.COLUMNS) - 1, QHeaderView.ResizeMode.Stretch)
        self.table.itemSelectionChanged.connect(self._row_clicked)

        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.compare_button)
        top.addWidget(dim_label("Tolerance", elastic=False))
        top.addWidget(self.tolerance)
        top.addWidget(self.first_button)
        top.addStretch(1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 4, 0, 0)
        lay.setSpacing(4)
        lay.addLayout(top)
        lay.addWidget(self.status)
        lay.addWidget(self.note)
        lay.addWidget(self.legend)
        lay.addWidget(self.table, 1)
        self.slot = ResultSlot([self.status, self.table], self.note)

    def compare(self) -> None:
        cursor = self._cursor()
        if cursor is None:
            self.status.setText("Open a model first.")
            return
        try:
            tol = parse_tolerance(self.tolerance.text())
        except ValueError:
            self.status.setText(f"Tolerance {self.tolerance.text()!r} is not a number ≥ 0: give one "
                                "(e.g. 1e-3), or leave it empty for the per-dtype default.")
            return
        args = {"step": cursor}
        if tol is not None:
            args.update(rtol=tol, atol=tol)
        self.slot.set(ResultStamp.of(self._state(), cursor))
        self.status.setText(f"Comparing intermediates at step {cursor}…")
        self.compare_button.setEnabled(False)
        self._ask("intermediates", "intermediates", **args)

    def check(self, state: State | None, bisect: dict | None = None, bisect_stamp=None) -> None:
        """Grey the comparison once it is not for what is open; an "every one within tolerance"
        at a step a later bisect found bad is contradicted, not left standing."""
        stamp = self.slot.stamp
        ok = None
        if self.result is not None and stamp is not None:
            ok = True if not self.result.get("first_divergence") else None
        was = self.slot.stale
        why = self.slot.check(state, stamp.contradiction(ok, bisect, bisect_stamp, state) if stamp else None)
        if why and not was:
            self.first_button.setEnabled(False)
        elif was and not why and self.result is not None:
            self.show_result(self.result)
        self._sync_heat()

    def _sync_heat(self) -> None:
        """The graphs are coloured by error only at the compared step, while it still holds."""
        r = self.result
        here = r is not None and not self.slot.stale and self._cursor() == r.get("step")
        heat = error_heat(list(r.get("nodes") or [])) if r is not None and here else ({}, {})
        if heat != self._heat_sent:
            self._heat_sent = heat
            self.hub.set_error_heat(*heat)

    def clear(self) -> None:
        self.slot.clear()
        self.result = None
        self.table.setRowCount(0)
        self.first_button.setEnabled(False)
        self.compare_button.setEnabled(True)
        self.status.setText("Compare every FX node's value with its Relax binding at the cursor step.")
        self._sync_heat()

    def show_result(self, r: dict) -> None:
        self.result = r
        self.compare_button.setEnabled(True)
        nodes = list(r.get("nodes") or [])
        c = themes.colors()
        self.table.setSortingEnabled(False)
        self.table.setRowCount(len(nodes))
        for i, n in enumerate(nodes):
            self.table.setItem(i, 0, _Num(n.get("order"), str(n.get("order", ""))))
            self.table.setItem(i, 1, QTableWidgetItem(n["fx_node"]))
            self.table.setItem(i, 2, QTableWidgetItem(n.get("relax_var") or ""))
            kernel = QTableWidgetItem(n.get("kernel") or "")
            if n.get("compared_as"):  # fused inside the kernel: judged at its output, as that node
                kernel.setToolTip(f"computed inside {n.get('kernel')}; compared at its output, as "
                                  f"{n['compared_as']}")
            self.table.setItem(i, 3, kernel)
            self.table.setItem(i, 4, _Num(n.get("max_abs"), _fmt(n.get("max_abs"))))
            self.table.setItem(i, 5, _Num(n.get("max_rel"), _fmt(n.get("max_rel"))))
            status = QTableWidgetItem(n.get("status", ""))
            if n.get("status") == "diverges":
                status.setForeground(QColor(c.bad))
            self.table.setItem(i, 6, status)
            why = QTableWidgetItem(n.get("reason") or "")
            why.setToolTip(n.get("reason") or "")
            self.table.setItem(i, 7, why)
        self.table.setSortingEnabled(True)
        self.table.sortItems(0, Qt.SortOrder.AscendingOrder)
        compared = [n for n in nodes if n.get("status") != "unmatched"]
        bad = [n for n in nodes if n.get("status") == "diverges"]
        first = r.get("first_divergence")
        secs = sum((r.get("seconds") or {}).values())
        tol = "per dtype" if r.get("atol") is None else f"atol = rtol = {r['atol']:g}"
        head = f"Step {r.get('step')} ({r.get('pass')}): {len(compared)} of {len(nodes)} nodes compared ({tol})"
        if first:
            self.status.setText(f"{head}; {len(bad)} exceed it, first: {first}. ({secs:.1f} s)")
        else:
            self.status.setText(f"{head}; every one is within tolerance. ({secs:.1f} s)")
        self.first_button.setEnabled(bool(first))
        self._sync_heat()

    def show_error(self, error: dict) -> None:
        self.compare_button.setEnabled(True)
        msg = error.get("message", "failed")
        if error.get("hint"):
            msg += f"\nhint: {error['hint']}"
        self.status.setText(f"Comparing intermediates failed: {msg}")
        self.status.setToolTip(error.get("detail") or "")

    def go_to_first(self) -> None:
        first = (self.result or {}).get("first_divergence")
        if not first:
            return
        for row in range(self.table.rowCount()):
            if (item := self.table.item(row, 1)) is not None and item.text() == first:
                self.table.selectRow(row)  # selecting the row selects the node in both graphs
                break
        self.hub.select_fx(first)

    def _row_clicked(self) -> None:
        items = self.table.selectedItems()
        if items:
            if (item := self.table.item(items[0].row(), 1)) is not None:
                self.hub.select_fx(item.text())


def _fmt(v) -> str:
    if v is None:
        return "—"
    return f"{float(v):.3g}"
