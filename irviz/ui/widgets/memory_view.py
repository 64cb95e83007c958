"""Lifetime bars of planned tensors on a timeline of bindings, one row per tensor, grouped by
the storage token they share (the engine's `memory` reply)."""
from __future__ import annotations

from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QColor, QFont, QPainter, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

_ROW = 18
_HEAD = 56
_LEFT = 190
_COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f"]


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


class MemoryView(QWidget):
    tensorSelected = Signal(str)  # the binding a reader of the IR knows (lv, not alloc)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.plan: dict | None = None
        self.rows: list[tuple[str | None, dict]] = []  # (token name on its first row, tensor)
        self.selected: str | None = None
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setMinimumHeight(120)

    def set_plan(self, plan: dict | None) -> None:
        self.plan = plan
        self.rows = []
        if plan:
            tokens = plan.get("token_list", [])
            for tok in tokens:
                first = True
                for t in plan.get("tensors", []):
                    if t["token"] == tok["name"]:
                        self.rows.append((f"{tok['name']} {human_bytes(tok['bytes'])}" if first else None, t))
                        first = False
            for t in plan.get("tensors", []):
                if t["token"] is None:
                    self.rows.append(("not planned", t))
        self.setMinimumHeight(_HEAD + _ROW * max(1, len(self.rows)) + 8)
        self.update()

    @staticmethod
    def binding_of(t: dict) -> str:
        return (t.get("aliases") or [t["name"]])[0]

    def _x(self, i: float) -> float:
        n = max(1, (self.plan or {}).get("bindings", 1))
        return _LEFT + (self.width() - _LEFT - 10) * i / n

    def bar_rect(self, row: int) -> QRectF:
        t = self.rows[row][1]
        x0, x1 = self._x(t["start"]), self._x(t["end"] + 1)
        return QRectF(x0, _HEAD + row * _ROW + 2, max(2.0, x1 - x0), _ROW - 4)

    def paintEvent(self, _event) -> None:
        p = QPainter(self)
        p.fillRect(self.rect(), self.palette().base())
        text = self.palette().text().color()
        p.setPen(text)
        if not self.plan:
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "Plan the memory of a step to see it here")
            return
        pl = self.plan
        saved = pl["tensor_bytes"] - pl["planned_bytes"]
        # two short lines: the Run pane is often a narrow dock
        p.drawText(8, 16, f"Step {pl.get('step')} · {pl['tokens']} storage tokens · peak live "
                          f"{human_bytes(pl['peak_bytes'])}"
                          + ("" if pl.get("planned_by_step", True) else " · planned on a copy"))
        p.drawText(8, 32, f"planned {human_bytes(pl['planned_bytes'])} for {human_bytes(pl['tensor_bytes'])} "
                          f"of tensors (saves {human_bytes(saved)})")
        grid = QColor(text)
        grid.setAlpha(40)
        n = max(1, pl.get("bindings", 1))
        step = max(1, n // 10)
        small = QFont(self.font())
        small.setPointSizeF(max(6.0, small.pointSizeF() - 1))
        p.setFont(small)
        for i in range(0, n + 1, step):
            x = self._x(i)
            p.setPen(grid)
            p.drawLine(int(x), _HEAD - 4, int(x), self.height())
            p.setPen(text)
            p.drawText(int(x) + 2, _HEAD - 8, str(i))
        token_colors: dict = {}
        for row, (label, t) in enumerate(self.rows):
            y = _HEAD + row * _ROW
            color = QColor(_COLORS[len(token_colors) % len(_COLORS)] if t["token"] not in token_colors
                           else token_colors[t["token"]])
            token_colors.setdefault(t["token"], color.name())
            if t["token"] is None:
                color = QColor("#999999")
            if label:
                p.setPen(grid)
                p.drawLine(0, y, self.width(), y)
                p.setPen(text)
                p.drawText(4, y + _ROW - 5, label)
            p.setPen(text)
            p.drawText(110, y + _ROW - 5, self.binding_of(t))
            r = self.bar_rect(row)
            p.setPen(QPen(QColor("#000000"), 2) if self.binding_of(t) == self.selected else Qt.PenStyle.NoPen)
            p.setBrush(color)
            p.drawRect(r)
            p.setPen(QColor("#ffffff"))
            if r.width() > 60:
                p.drawText(r.adjusted(3, 0, 0, 0), Qt.AlignmentFlag.AlignVCenter,
                           f"{human_bytes(t['bytes'])} {'x'.join(map(str, t['shape']))}")
        p.end()

    def mousePressEvent(self, event) -> None:
        row = int((event.position().y() - _HEAD) // _ROW)
        if 0 <= row < len(self.rows):
            self.selected = self.binding_of(self.rows[row][1])
            self.update()
            self.tensorSelected.emit(self.selected)
