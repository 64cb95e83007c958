"""A roofline chart (QPainter, log-log): arithmetic intensity (FLOP per byte) on x, achieved GFLOP/s
on y, the memory-bandwidth slope and the compute peak drawn and labelled with their measured
values, one dot per kernel, its area in proportion to its share of the run's kernel time.

    chart = RooflineChart()
    chart.set_roofline(result["roofline"])   # the build_run result's block (core.backend.roofline)
    chart.kernelClicked.connect(select)      # a dot was clicked: the kernel's name

A dot under the slope is memory-bound, under the flat roof compute-bound (its colour says which);
how far below the roof it sits is how much faster the kernel could be. Kernels whose buffers fit in
the last-level cache are hollow: memory's roof is not theirs, and they may sit above it. Kernels
with no FLOPs (copies) cannot sit on a log axis and are counted under the chart. Hovering a dot
shows the kernel's figures. Colours come from ``irviz.ui.themes.colors()`` at paint time.
"""
from __future__ import annotations

import math

from PySide6.QtCore import QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFontMetrics, QPainter, QPen
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from irviz.ui import themes

__all__ = ["RooflineChart", "fmt_bytes", "fmt_num"]


def _pos(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def fmt_num(v: float) -> str:
    """3 significant figures, no exponent for everyday sizes: 0.0123, 4.56, 789, 12300."""
    if v >= 1000:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def fmt_bytes(n: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


def _tick_text(v: float) -> str:
    return f"{v:g}" if 1e-3 <= v < 1e6 else f"{v:.0e}"


class RooflineChart(QWidget):
    kernelClicked = Signal(str)

    MAX_RADIUS = 18.0
    MIN_RADIUS = 3.0

    def __init__(self, parent=None):
        super().__init__(parent)
        self.roofline: dict | None = None
        self._hover: int | None = None
        self.setMouseTracking(True)
        self.setMinimumSize(300, 220)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)

    # -- data ------------------------------------------------------------------------------------
    def set_roofline(self, roofline: dict | None) -> None:
        self.roofline = dict(roofline) if roofline else None
        self._hover = None
        self.update()

    def clear(self) -> None:
        self.set_roofline(None)

    def sizeHint(self) -> QSize:
        return QSize(560, 340)

    def peak(self) -> float | None:
        v = (self.roofline or {}).get("peak_gflops")
        return float(v) if _pos(v) else None

    def bandwidth(self) -> float | None:
        v = (self.roofline or {}).get("bandwidth_gbs")
        return float(v) if _pos(v) else None

    def kernels(self) -> list[dict]:
        return list((self.roofline or {}).get("kernels") or [])

    def points(self) -> list[dict]:
        """The kernels drawn: those with FLOPs, bytes and a time."""
        return [k for k in self.kernels() if _pos(k.get("intensity")) and _pos(k.get("gflops"))]

    def not_drawn(self) -> list[dict]:
        return [k for k in self.kernels() if k not in self.points()]

    def total_ms(self) -> float:
        return sum(float(k.get("ms") or 0) for k in self.kernels()) or 1.0

    def radius(self, k: dict) -> float:
        """Area in proportion to the kernel's share of the time: the whole run would be MAX_RADIUS."""
        share = float(k.get("ms") or 0) / self.total_ms()
        return max(self.MIN_RADIUS, self.MAX_RADIUS * math.sqrt(max(0.0, share)))

    # -- geometry --------------------------------------------------------------------------------
    def axes(self) -> tuple[float, float, float, float] | None:
        """(x lo, x hi, y lo, y hi): a margin around the dots, the ridge and the peak."""
        peak, bw, pts = self.peak(), self.bandwidth(), self.points()
        if peak is None or bw is None:
            return None
        xs = [k["intensity"] for k in pts] + [peak / bw]
        ys = [k["gflops"] for k in pts] + [peak]
        x_lo, x_hi = min(xs) / 2.5, max(xs) * 2.5
        y_lo, y_hi = min(min(ys), bw * x_lo) / 2.5, peak * 2.2
        return x_lo, x_hi, max(y_lo, y_hi / 1e9), y_hi

    @staticmethod
    def ticks(lo: float, hi: float) -> list[float]:
        """Decades inside [lo, hi]; 2 and 5 between them when fewer than three decades show."""
        decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
        steps = (1,) if len([e for e in decades if lo <= 10.0 ** e <= hi]) >= 3 else (1, 2, 5)
        return [m * 10.0 ** e for e in decades for m in steps if lo <= m * 10.0 ** e <= hi]

    def plot_rect(self) -> QRectF:
        fm = QFontMetrics(self.font())
        left = fm.horizontalAdvance("100,000") + 12
        top = fm.height() + 8  # the legend's line
        return QRectF(left, top, max(10.0, self.width() - left - 14),
                      max(10.0, self.height() - top - 2.6 * fm.height() - 8))

    def x_of(self, v: float) -> float:
        x_lo, x_hi, _, _ = self.axes()
        r = self.plot_rect()
        return r.left() + (math.log10(v) - math.log10(x_lo)) / (math.log10(x_hi) - math.log10(x_lo)) * r.width()

    def y_of(self, v: float) -> float:
        _, _, y_lo, y_hi = self.axes()
        r = self.plot_rect()
        return r.bottom() - (math.log10(v) - math.log10(y_lo)) / (math.log10(y_hi) - math.log10(y_lo)) * r.height()

    def point_at(self, pos: QPointF) -> int | None:
        """Index (in points()) of the smallest dot under `pos`: small dots drawn over big ones win."""
        if self.axes() is None:
            return None
        hits = []
        for i, k in enumerate(self.points()):
            c = QPointF(self.x_of(k["intensity"]), self.y_of(k["gflops"]))
            rad = max(self.radius(k), 5.0)
            if (c.x() - pos.x()) ** 2 + (c.y() - pos.y()) ** 2 <= rad * rad:
                hits.append((rad, i))
        return min(hits)[1] if hits else None

    # -- painting --------------------------------------------------------------------------------
    def paintEvent(self, event) -> None:
        c = themes.colors()
        dark = c.name == "dark"
        roof_c = QColor(c.text)
        mem_c = QColor("#58a6ff" if dark else "#2f6fde")
        cpu_c = QColor("#f0883e" if dark else "#d1580b")
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.fillRect(self.rect(), QColor(c.base))
        fm = QFontMetrics(self.font())
        ax = self.axes()
        if ax is None:
            p.setPen(QColor(c.dim_text))
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter,
                       "Build & Run to see each kernel against this CPU's roofline."
                       if self.roofline is None else "This CPU's peak and bandwidth could not be measured.")
            p.end()
            return
        x_lo, x_hi, y_lo, y_hi = ax
        r = self.plot_rect()
        peak, bw = self.peak(), self.bandwidth()
        self._paint_grid(p, r, fm, c, ax)

        # the roofs: the slope up to the ridge, then flat at the peak
        ridge = peak / bw
        x0 = max(x_lo, y_lo / bw)
        p.setPen(QPen(roof_c, 2))
        p.drawLine(QPointF(self.x_of(x0), self.y_of(bw * x0)), QPointF(self.x_of(ridge), self.y_of(peak)))
        p.drawLine(QPointF(self.x_of(ridge), self.y_of(peak)), QPointF(r.right(), self.y_of(peak)))
        p.setPen(QPen(QColor(c.dim_text), 1, Qt.PenStyle.DotLine))
        p.drawLine(QPointF(self.x_of(ridge), self.y_of(peak)), QPointF(self.x_of(ridge), r.bottom()))
        p.setPen(roof_c)
        peak_text = f"peak {fmt_num(peak)} GFLOP/s"
        p.drawText(QPointF(r.right() - fm.horizontalAdvance(peak_text) - 4, self.y_of(peak) - 5), peak_text)
        p.setPen(QColor(c.dim_text))
        ridge_text = f"ridge {ridge:.3g} FLOP/B"
        p.drawText(QPointF(self.x_of(ridge) + 4, r.bottom() - 5), ridge_text)
        # the bandwidth label along the slope, a third of the way up to the ridge
        xm = 10 ** (math.log10(x0) + (math.log10(ridge) - math.log10(x0)) * 0.06)
        a = QPointF(self.x_of(x0), self.y_of(bw * x0))
        b = QPointF(self.x_of(ridge), self.y_of(peak))
        angle = math.degrees(math.atan2(b.y() - a.y(), b.x() - a.x()))
        p.save()
        p.translate(self.x_of(xm), self.y_of(bw * xm) - 6)
        p.rotate(angle)
        p.setPen(roof_c)
        p.drawText(QPointF(0, 0), f"memory {fmt_num(bw)} GB/s")
        p.restore()

        # the kernels, biggest first so small ones stay visible on top
        pts = self.points()
        p.setClipRect(r.adjusted(-self.MAX_RADIUS, -self.MAX_RADIUS, self.MAX_RADIUS, 0))
        for i in sorted(range(len(pts)), key=lambda i: -self.radius(pts[i])):
            k = pts[i]
            col = QColor(cpu_c if k.get("bound") == "compute" else mem_c)
            center = QPointF(self.x_of(k["intensity"]), self.y_of(k["gflops"]))
            rad = self.radius(k)
            fill = QColor(col)
            fill.setAlpha(150)
            p.setPen(QPen(QColor(c.highlight) if i == self._hover else col, 2.5 if i == self._hover else 1.5))
            p.setBrush(QColor(c.base) if k.get("in_cache") and k.get("bound") == "memory" else fill)
            p.drawEllipse(center, rad, rad)
        p.setClipping(False)
        p.setBrush(Qt.BrushStyle.NoBrush)
        self._paint_legend(p, r, fm, c, mem_c, cpu_c)
        p.end()

    def _paint_grid(self, p, r, fm, c, ax) -> None:
        x_lo, x_hi, y_lo, y_hi = ax
        p.setPen(QPen(QColor(c.border), 1))
        xs, ys = self.ticks(x_lo, x_hi), self.ticks(y_lo, y_hi)
        for v in xs:
            p.drawLine(QPointF(self.x_of(v), r.top()), QPointF(self.x_of(v), r.bottom()))
        for v in ys:
            p.drawLine(QPointF(r.left(), self.y_of(v)), QPointF(r.right(), self.y_of(v)))
        p.setPen(QColor(c.dim_text))
        for v in xs:
            t = _tick_text(v)
            p.drawText(QPointF(self.x_of(v) - fm.horizontalAdvance(t) / 2, r.bottom() + fm.ascent() + 3), t)
        for v in ys:
            t = _tick_text(v)
            p.drawText(QPointF(r.left() - 6 - fm.horizontalAdvance(t), self.y_of(v) + fm.ascent() / 2 - 1), t)
        p.drawRect(r)
        xlab = "arithmetic intensity (FLOP per byte moved)"
        p.drawText(QPointF(r.center().x() - fm.horizontalAdvance(xlab) / 2, r.bottom() + 2 * fm.height() + 4), xlab)
        p.save()
        p.translate(fm.ascent(), r.center().y() + fm.horizontalAdvance("GFLOP/s") / 2)
        p.rotate(-90)
        p.drawText(QPointF(0, 0), "GFLOP/s")
        p.restore()

    def _paint_legend(self, p, r, fm, c, mem_c, cpu_c) -> None:
        """One line above the plot: the two colours, then what the dots mean (elided to fit)."""
        x, y = r.left(), fm.ascent() + 3
        for col, text in ((mem_c, "memory-bound"), (cpu_c, "compute-bound")):
            fill = QColor(col)
            fill.setAlpha(150)
            p.setPen(QPen(col, 1.5))
            p.setBrush(fill)
            p.drawEllipse(QPointF(x + 4, y - fm.ascent() / 2 + 1), 4, 4)
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.setPen(QColor(c.text))
            p.drawText(QPointF(x + 12, y), text)
            x += 12 + fm.horizontalAdvance(text) + 14
        notes = ["dot area: share of kernel time"]
        if any(k.get("in_cache") and k.get("bound") == "memory" for k in self.points()):
            notes.append("hollow: buffers fit in cache")
        missing = self.not_drawn()
        if missing:
            notes.append(f"{len(missing)} kernel{'s' * (len(missing) > 1)} without FLOPs not drawn")
        p.setPen(QColor(c.dim_text))
        text = fm.elidedText(" · ".join(notes), Qt.TextElideMode.ElideRight, int(r.right() - x))
        p.drawText(QPointF(x, y), text)

    # -- interaction -----------------------------------------------------------------------------
    def tooltip_text(self, i: int) -> str:
        k = self.points()[i]
        share = 100 * float(k.get("ms") or 0) / self.total_ms()
        lines = [f"<b>{k['name']}</b>",
                 f"{k['ms']:.4g} ms ({share:.1f}% of kernel time), {k.get('calls', 1)} call(s)",
                 f"{fmt_num(k['gflops'])} GFLOP/s, {fmt_num(k.get('gbs') or 0)} GB/s",
                 f"{fmt_num(k['flops'])} FLOP, {fmt_bytes(k.get('bytes') or 0)} moved: "
                 f"{k['intensity']:.3g} FLOP/byte",
                 f"{k.get('bound')}-bound: roof {fmt_num(k.get('roof_gflops') or 0)} GFLOP/s, "
                 f"<b>{k.get('pct_of_roof', 0):.3g}% of roof</b>"]
        if k.get("in_cache"):
            lines.append("its buffers fit in the last-level cache: it can beat memory's roof")
        return "<br>".join(lines)

    def mouseMoveEvent(self, event) -> None:
        i = self.point_at(event.position())
        if i != self._hover:
            self._hover = i
            self.update()
        if i is None:
            QToolTip.hideText()
        else:
            QToolTip.showText(event.globalPosition().toPoint(), self.tooltip_text(i), self)

    def leaveEvent(self, event) -> None:
        self._hover = None
        self.update()

    def mousePressEvent(self, event) -> None:
        i = self.point_at(event.position())
        if i is not None:
            self.kernelClicked.emit(self.points()[i]["name"])
