"""The Run pane's table of kernels: one row per kernel the run timed, its columns a list of
``Column``s.  A column is a header and a function from (kernel dict, context) to a cell, so a new
figure per kernel is one ``Column`` added with ``add_column``, nothing else to touch."""
from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem

from irviz.ui import themes

Resize = QHeaderView.ResizeMode


class Num(QTableWidgetItem):
    """Sorts numerically."""

    def __init__(self, value: float, text: str):
        super().__init__(text)
        self.value = value
        self.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)

    def __lt__(self, other):
        if isinstance(other, Num):
            return self.value < other.value
        return super().__lt__(other)


def text_cell(text: str, tooltip: str = "") -> QTableWidgetItem:
    item = QTableWidgetItem(text)
    if tooltip:
        item.setToolTip(tooltip)
    return item


def bindings_of(kernel: Mapping[str, Any]) -> list[str]:
    """A kernel's binding field names one var, or several joined by ', ' (one kernel called from
    several places)."""
    return [b.strip() for b in str(kernel.get("binding") or "").split(",") if b.strip()]


@dataclass(frozen=True)
class Column:
    """One column: ``cell(kernel, context)`` makes its item; the context holds what is shared by
    every row (``total_ms``, and whatever the table was given with ``set_context``)."""
    header: str
    cell: Callable[[dict, dict], QTableWidgetItem]
    resize: Resize = Resize.ResizeToContents
    tooltip: str = ""


def _ms(k: dict) -> float:
    return float(k.get("ms") or 0)


UNRELIABLE = "⚠"


def unreliable_text(k: dict) -> str:
    """Why a kernel's time is not to be trusted ('' when it is), for its tooltip."""
    if k.get("reliable") is not False:
        return ""
    alone = k.get("alone_ms")
    return (f"Unreliable: {k.get('reason') or 'its time in the run and alone disagree'}"
            + (f" (alone: {float(alone):.3g} ms per run)" if alone is not None else ""))


def _marked(item: QTableWidgetItem, k: dict) -> QTableWidgetItem:
    why = unreliable_text(k)
    if why:
        item.setText(f"{UNRELIABLE} {item.text()}")
        item.setToolTip(why)
        item.setForeground(QColor(themes.colors().bad))
    return item


def _ms_cell(k: dict, c: dict) -> QTableWidgetItem:
    return _marked(Num(_ms(k), f"{_ms(k):.3f}"), k)


TIME_COLUMNS = [
    Column("Kernel", lambda k, c: _marked(text_cell(str(k.get("name", ""))), k), Resize.Stretch),
    Column("Calls", lambda k, c: Num(int(k.get("calls") or 0), str(k.get("calls", "")))),
    Column("ms", _ms_cell, tooltip="Per run: the median over the instrumented runs. ⚠: the kernel's "
           "time in the run and timed alone disagree (hover for both)"),
    Column("%", lambda k, c: Num(_ms(k) / c["total_ms"], f"{100 * _ms(k) / c['total_ms']:.1f}")),
    Column("Binding", lambda k, c: text_cell(str(k.get("binding") or "")), Resize.Interactive),
    Column("Decision", lambda k, c: text_cell(str(k.get("decision") or ""), str(k.get("decision") or "")),
           Resize.Interactive),
]


class KernelTable(QTableWidget):
    """Sorted by time, slowest first; clicking a row emits the first Relax binding that calls it."""
    bindingClicked = Signal(str)

    def __init__(self, columns: list[Column] | None = None, parent=None):
        super().__init__(0, 0, parent)
        self.columns: list[Column] = []
        self.rows: list[dict] = []
        self.context: dict = {}
        self.reliable = True
        self.reason: str | None = None
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.verticalHeader().setVisible(False)
        self.verticalHeader().setDefaultSectionSize(20)
        self.setSortingEnabled(True)
        for col in (TIME_COLUMNS if columns is None else columns):
            self.add_column(col)
        self.itemSelectionChanged.connect(self._clicked)

    def add_column(self, column: Column, after: str | None = None) -> None:
        """Add a column at the end, or just after the one headed ``after``."""
        at = self.column_index(after) + 1 if after is not None else len(self.columns)
        self.columns.insert(at, column)
        self.setColumnCount(len(self.columns))
        for i, col in enumerate(self.columns):
            head = QTableWidgetItem(col.header)
            if col.tooltip:
                head.setToolTip(col.tooltip)
            self.setHorizontalHeaderItem(i, head)
            self.horizontalHeader().setSectionResizeMode(i, col.resize)
        self._mark_headers()
        if self.rows:
            self.refill()

    def column_index(self, header: str) -> int:
        for i, col in enumerate(self.columns):
            if col.header == header:
                return i
        raise KeyError(header)

    def set_kernels(self, kernels: Sequence[Mapping[str, Any]], reliable: bool | None = True, reason: str | None = None) -> None:
        """`reliable`/`reason`: whether the kernels together can be trusted (they add up to no
        more than the run); when not, the ms and % headers carry the mark and the reason."""
        self.rows = [dict(k) for k in kernels]
        self.reliable, self.reason = reliable is not False, reason
        self._mark_headers()
        self.refill(by_time=True)

    def _mark_headers(self) -> None:
        why = "" if self.reliable else f"Kernel times unreliable: {self.reason or 'they disagree with the run'}"
        self.setToolTip(why)
        for i, col in enumerate(self.columns):
            if col.header in ("ms", "%"):
                head = QTableWidgetItem(f"{col.header} {UNRELIABLE}" if why else col.header)
                head.setToolTip(why or col.tooltip)
                self.setHorizontalHeaderItem(i, head)

    def set_context(self, **values) -> None:
        """Values shared by the cells (counts per kernel, for what they are…); refills the rows."""
        self.context.update(values)
        self.refill()

    def refill(self, by_time: bool = False) -> None:
        """Make every cell again; keeps the user's sort unless ``by_time``."""
        ctx = {**self.context, "total_ms": sum(_ms(k) for k in self.rows) or 1.0}
        sort_col = self.horizontalHeader().sortIndicatorSection()
        order = self.horizontalHeader().sortIndicatorOrder()
        self.setSortingEnabled(False)
        self.setRowCount(len(self.rows))
        for i, k in enumerate(self.rows):
            for j, col in enumerate(self.columns):
                item = col.cell(k, ctx)
                item.setData(Qt.ItemDataRole.UserRole, i)
                self.setItem(i, j, item)
        self.setSortingEnabled(True)
        if by_time or not 0 <= sort_col < len(self.columns):
            self.sortItems(self.column_index("ms"), Qt.SortOrder.DescendingOrder)
        else:
            self.sortItems(sort_col, order)

    def clear_rows(self) -> None:
        self.rows = []
        self.reliable, self.reason = True, None
        self._mark_headers()
        self.setRowCount(0)

    def kernel_at(self, row: int) -> dict | None:
        item = self.item(row, 0)
        i = item.data(Qt.ItemDataRole.UserRole) if item is not None else None
        return self.rows[i] if isinstance(i, int) and 0 <= i < len(self.rows) else None

    def _clicked(self) -> None:
        items = self.selectedItems()
        if not items:
            return
        names = bindings_of(self.kernel_at(items[0].row()) or {})
        if names:
            self.bindingClicked.emit(names[0])
