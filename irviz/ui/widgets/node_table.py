"""A read-only table of graph nodes backed by a model: filling it costs nothing per cell (a
``QTableWidget`` made 5,500 items for GPT-2's FX table and froze the window ~180 ms)."""
from __future__ import annotations

from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView

# an invalid index: the root, which a flat table is asked about
_NO_PARENT = QModelIndex()


class _Cell:
    """What ``QTableWidget.item()`` gave the callers that read one cell."""

    def __init__(self, text: str, node_id: str):
        self._text, self._id = text, node_id

    def text(self) -> str:
        return self._text

    def data(self, role) -> str | None:
        return self._id if role == Qt.ItemDataRole.UserRole else None


class NodeTableModel(QAbstractTableModel):
    def __init__(self, headers: list[str], parent=None):
        super().__init__(parent)
        self.headers = headers
        self.rows: list[list[str]] = []
        self.ids: list[str] = []
        self.tips: list[str | None] = []
        self.failed: list[bool] = []
        self.dim = QBrush(QColor("#888888"))
        self.bad = QBrush(QColor("#c62828"))

    def set_rows(self, rows: list[list[str]], ids: list[str], tips: list[str | None],
                 failed: list[bool]) -> None:
        self.beginResetModel()
        self.rows, self.ids, self.tips, self.failed = rows, ids, tips, failed
        self.endResetModel()

    def rowCount(self, parent=_NO_PARENT) -> int:
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent=_NO_PARENT) -> int:
        return 0 if parent.isValid() else len(self.headers)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return self.headers[section]
        return None

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        r, c = index.row(), index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return self.rows[r][c]
        if role == Qt.ItemDataRole.UserRole:
            return self.ids[r]
        if role == Qt.ItemDataRole.ForegroundRole:
            if self.failed[r]:
                return self.bad
            if c == 1 and self.rows[r][1] != "call_function":
                return self.dim
            return None
        if role == Qt.ItemDataRole.ToolTipRole and (c == 0 or self.failed[r]):
            return self.tips[r] or self.rows[r][0]
        return None


class NodeTable(QTableView):
    """``set_rows(rows, ids, tips, failed)``; ``rowCount()``, ``item(r, c)``, ``row_of(id)``,
    ``selected_id()``; emits ``itemSelectionChanged`` like a ``QTableWidget``."""

    itemSelectionChanged = Signal()

    def __init__(self, headers: list[str], parent=None):
        super().__init__(parent)
        self.table_model = NodeTableModel(headers, self)
        self.setModel(self.table_model)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.verticalHeader().setVisible(False)
        self.verticalHeader().setDefaultSectionSize(20)
        self.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        self.setAlternatingRowColors(True)
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.horizontalHeader().setStretchLastSection(True)
        self.setWordWrap(False)
        self.selectionModel().selectionChanged.connect(lambda *_: self.itemSelectionChanged.emit())

    def set_colors(self, dim: str, bad: str) -> None:
        self.table_model.dim = QBrush(QColor(dim))
        self.table_model.bad = QBrush(QColor(bad))

    def set_rows(self, rows, ids, tips, failed, widest: tuple[int, ...] = ()) -> None:
        self.table_model.set_rows(rows, ids, tips, failed)
        fm = self.fontMetrics()
        for col in range(self.table_model.columnCount()):
            # the longest text of the column measured once, not every cell (resizeColumnsToContents)
            longest = max((row[col] for row in rows), key=len, default="")
            head = self.table_model.headers[col]
            width = max(fm.horizontalAdvance(longest), fm.horizontalAdvance(head)) + 18
            self.setColumnWidth(col, min(width, widest[col]) if col < len(widest) else width)

    def rowCount(self) -> int:  # the QTableWidget name its callers use
        return self.table_model.rowCount()

    def setRowCount(self, n: int) -> None:
        if n == 0:
            self.set_rows([], [], [], [])

    def item(self, r: int, c: int) -> _Cell | None:
        m = self.table_model
        if 0 <= r < len(m.rows) and 0 <= c < len(m.headers):
            return _Cell(m.rows[r][c], m.ids[r])
        return None

    def row_of(self, node_id: str) -> int | None:
        try:
            return self.table_model.ids.index(node_id)
        except ValueError:
            return None

    def selected_id(self) -> str | None:
        rows = self.selectionModel().selectedRows()
        return self.table_model.ids[rows[0].row()] if rows else None

    def scroll_to_row(self, r: int) -> None:
        self.scrollTo(self.table_model.index(r, 0))
