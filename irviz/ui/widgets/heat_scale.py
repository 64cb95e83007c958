"""The two colourings a graph can carry, on ramps that cannot be confused: kernel time (blues,
after Build & Run) and error against PyTorch (yellow to red, from the intermediates). Whichever is
on, the graph shows its legend and each node's tooltip says what its colour stands for."""
from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QLinearGradient, QPainter
from PySide6.QtWidgets import QWidget

from irviz.ui.widgets.palette import HEAT

# the intermediates' overlay maps max |error| onto these fixed decades (intermediates_tab.error_t)
ERROR_LOG_LO, ERROR_LOG_HI = -8.0, 0.0


def _lerp(ramp: tuple[str, ...], t: float) -> QColor:
    t = min(1.0, max(0.0, float(t)))
    f = t * (len(ramp) - 1)
    i = min(int(f), len(ramp) - 2)
    a, b = QColor(ramp[i]), QColor(ramp[i + 1])
    u = f - i
    return QColor(round(a.red() + (b.red() - a.red()) * u), round(a.green() + (b.green() - a.green()) * u),
                  round(a.blue() + (b.blue() - a.blue()) * u))


@dataclass(frozen=True)
class HeatScale:
    key: str
    title: str                                   # the legend's title
    ramp: tuple[str, ...]
    ends: Callable[[float], tuple[str, str]]     # vmax -> the legend's two end labels
    value: Callable[[float, float], str]         # (value, vmax) -> what a node's colour means

    def color(self, t: float) -> QColor:
        return _lerp(self.ramp, t)


def _error_text(t: float, _vmax: float) -> str:
    if t <= 0.0:
        return "max |error| vs PyTorch ≤ 1e-8"
    if t >= 1.0:
        return "max |error| vs PyTorch ≥ 1 (or not finite)"
    return f"max |error| vs PyTorch ≈ {10 ** (ERROR_LOG_LO + t * (ERROR_LOG_HI - ERROR_LOG_LO)):.1e}"


TIME = HeatScale("time", "Kernel time (Build & Run)",
                 ("#eef4fb", "#b9d3ee", "#79a6dc", "#4469b8", "#2b2a86"),
                 lambda vmax: ("0 ms", f"{vmax:.3g} ms"),
                 lambda v, vmax: f"kernel time {v:.3g} ms ({v / vmax:.0%} of the slowest)" if vmax else
                 f"kernel time {v:.3g} ms")
ERROR = HeatScale("error", "Error vs PyTorch (log)", tuple(HEAT),
                  lambda _vmax: ("≤ 1e-8", "≥ 1"), _error_text)


class HeatLegend(QWidget):
    """The colour bar in a graph's corner while a colouring is on."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.scale: HeatScale | None = None
        self.labels = ("", "")
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.setFixedSize(190, 44)
        self.hide()

    def show_scale(self, scale: HeatScale | None, vmax: float = 1.0) -> None:
        self.scale = scale
        if scale is None:
            self.hide()
            return
        self.labels = scale.ends(vmax)
        self.setToolTip(scale.title)
        self.show()
        self.raise_()
        self.update()

    def text(self) -> str:
        """What the legend says, for tests and screen readers."""
        return f"{self.scale.title}: {self.labels[0]} … {self.labels[1]}" if self.scale else ""

    def paintEvent(self, _event) -> None:
        if self.scale is None:
            return
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(QColor(255, 255, 255, 215))
        p.drawRoundedRect(QRectF(0, 0, self.width(), self.height()), 4, 4)
        p.setPen(QColor("#333333"))
        p.drawText(QRectF(6, 2, self.width() - 12, 14), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, self.scale.title)
        bar = QRectF(6, 18, self.width() - 12, 9)
        grad = QLinearGradient(bar.topLeft(), bar.topRight())
        n = len(self.scale.ramp) - 1
        for i, c in enumerate(self.scale.ramp):
            grad.setColorAt(i / n, QColor(c))
        p.setBrush(grad)
        p.setPen(QColor("#888888"))
        p.drawRect(bar)
        p.setPen(QColor("#333333"))
        p.drawText(QRectF(6, 28, 90, 14), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, self.labels[0])
        p.drawText(QRectF(self.width() - 96, 28, 90, 14), Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, self.labels[1])
        p.end()


class HeatOverlay:
    """One graph's colouring: its scale, each node's value (for the tooltip) and the legend."""

    def __init__(self, owner: QWidget):
        self.legend = HeatLegend(owner)
        self.scale: HeatScale | None = None
        self.values: dict[str, float] = {}
        self.vmax = 1.0

    def set(self, values: dict | None, vmax: float | None, scale: HeatScale, known) -> dict[str, QColor]:
        """{node id: colour} of the `values` whose node is in `known`; {} (and no legend) clears."""
        self.values = {}
        if not values:
            self.scale = None
            self.legend.show_scale(None)
            return {}
        self.scale, self.vmax = scale, vmax or max(values.values()) or 1.0
        self.values = {str(k): float(v) for k, v in values.items() if str(k) in known}
        self.legend.show_scale(scale, self.vmax)
        return {k: scale.color(v / self.vmax) for k, v in self.values.items()}

    def tooltip(self, nid) -> str:
        """What a node's colour stands for ('' when it is not coloured)."""
        v = self.values.get(str(nid)) if nid is not None else None
        if v is None or self.scale is None:
            return ""
        return f"<br><i>colour: {html.escape(self.scale.value(v, self.vmax))}</i>"

    def place(self, viewport: QWidget) -> None:
        """Bottom left of the graph's viewport (the minimap holds the right)."""
        owner = self.legend.parentWidget()
        assert owner is not None  # the legend is made inside the graph view
        bl = viewport.mapTo(owner, viewport.rect().bottomLeft())
        self.legend.move(bl.x() + 8, bl.y() - self.legend.height() - 8)
        self.legend.raise_()
