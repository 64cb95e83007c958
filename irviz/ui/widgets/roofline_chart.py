"""A hierarchical roofline chart (QPainter, log-log): arithmetic intensity (FLOP per byte) on x,
achieved GFLOP/s on y; one bandwidth slope per memory level (L1, L2, L3, DRAM, each in its colour and
labelled with its measured GB/s) under the measured FMA peak; one dot per kernel, in the colour of the
level its working set fits in (the roof it is held against), its area in proportion to its share of
the run's kernel time; a diamond for all kernels together.

    chart = RooflineChart()
    chart.set_roofline(result["roofline"])   # the build_run result's block (core.backend.roofline)
    chart.kernelClicked.connect(select)      # a dot was clicked: the kernel's name

How far below its level's roof a dot sits is how much faster the kernel could be. A dot timed above
its roof (``above_roof``) is ringed in the error colour with a "!": its time or its byte count is
off, and the tooltip says which roof it passed. A dot whose time the run marks unreliable has a
dashed ring. A block without levels (one memory roof) draws memory's slope alone, and kernels whose
buffers fit in the last-level cache hollow, as they may sit above it. Kernels with no FLOPs (copies)
cannot sit on a log axis and are counted under the chart. Hovering a dot shows the kernel's figures.
Colours come from ``irviz.ui.themes.colors()`` at paint time.
"""
from __future__ import annotations

import math

from PySide6.QtCore import QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFontMetrics, QPainter, QPen, QPolygonF
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from irviz.ui import themes

__all__ = ["RooflineChart", "fmt_bytes", "fmt_num", "level_color"]

# per level, (dark theme, light theme): warm to cold from the fastest level to memory
LEVEL_COLORS = {"L1": ("#3fb950", "#1a7f37"), "L2": ("#39c5cf", "#0a7f8a"), "L3": ("#a371f7", "#8250df"),
                "L4": ("#db61a2", "#bf3989"), "DRAM": ("#58a6ff", "#2f6fde")}


def level_color(level: str | None, dark: bool) -> QColor:
    pair = LEVEL_COLORS.get(level or "DRAM", LEVEL_COLORS["DRAM"])
    return QColor(pair[0] if dark else pair[1])


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
        return float(v) if v is not None and _pos(v) else None

    def bandwidth(self) -> float | None:
        v = (self.roofline or {}).get("bandwidth_gbs")
        return float(v) if v is not None and _pos(v) else None

    def levels(self) -> list[dict]:
        """The memory levels with a bandwidth, fastest first; memory's alone for a block without them."""
        found = [lv for lv in (self.roofline or {}).get("levels") or () if _pos(lv.get("gbs"))]
        if found:
            return found
        return [{"level": "DRAM", "gbs": self.bandwidth()}] if self.bandwidth() is not None else []

    def roofs(self) -> list[tuple[str, float]]:
        """(label, GB/s) per slope drawn: levels with the same figure (one merged into another, or
        raised to a slower one's) share one slope and its label ("L2/L3")."""
        out: list[tuple[list[str], float]] = []
        for lv in self.levels():
            if out and out[-1][1] == float(lv["gbs"]):
                out[-1][0].append(lv["level"])
            else:
                out.append(([lv["level"]], float(lv["gbs"])))
        return [("/".join(names), gbs) for names, gbs in out]

    def kernels(self) -> list[dict]:
        return list((self.roofline or {}).get("kernels") or [])

    def points(self) -> list[dict]:
        """The kernels drawn: those with FLOPs, bytes and a time."""
        return [k for k in self.kernels() if _pos(k.get("intensity")) and _pos(k.get("gflops"))]

    def not_drawn(self) -> list[dict]:
        return [k for k in self.kernels() if k not in self.points()]

    def total_point(self) -> tuple[float, float] | None:
        """(intensity, GFLOP/s) of all kernels together, where both are known."""
        t = (self.roofline or {}).get("total") or {}
        return (t["intensity"], t["gflops"]) if _pos(t.get("intensity")) and _pos(t.get("gflops")) else None

    def total_ms(self) -> float:
        return sum(float(k.get("ms") or 0) for k in self.kernels()) or 1.0

    def radius(self, k: dict) -> float:
        """Area in proportion to the kernel's share of the time: the whole run would be MAX_RADIUS."""
        share = float(k.get("ms") or 0) / self.total_ms()
        return max(self.MIN_RADIUS, self.MAX_RADIUS * math.sqrt(max(0.0, share)))

    # -- geometry --------------------------------------------------------------------------------
    def axes(self) -> tuple[float, float, float, float] | None:
        """(x lo, x hi, y lo, y hi): a margin around the dots, the ridges and the peak."""
        peak, pts, levels = self.peak(), self.points(), self.levels()
        if peak is None or not levels:
            return None
        slowest = min(float(lv["gbs"]) for lv in levels)
        total = self.total_point()
        xs = [k["intensity"] for k in pts] + [peak / float(lv["gbs"]) for lv in levels] + ([total[0]] if total else [])
        ys = [k["gflops"] for k in pts] + [peak] + ([total[1]] if total else [])
        x_lo, x_hi = min(xs) / 2.5, max(xs) * 2.5
        y_lo, y_hi = min(min(ys), slowest * x_lo) / 2.5, peak * 2.2
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
        ax = self.axes()
        assert ax is not None  # a point is placed only on a chart that has its axes
        x_lo, x_hi, _, _ = ax
        r = self.plot_rect()
        return r.left() + (math.log10(v) - math.log10(x_lo)) / (math.log10(x_hi) - math.log10(x_lo)) * r.width()

    def y_of(self, v: float) -> float:
        ax = self.axes()
        assert ax is not None  # as in x_of
        _, _, y_lo, y_hi = ax
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
        r = self.plot_rect()
        self._paint_grid(p, r, fm, c, ax)
        self._paint_roofs(p, r, fm, c, ax, dark)

        # the kernels, biggest first so small ones stay visible on top
        pts = self.points()
        bad = QColor(c.bad)
        p.setClipRect(r.adjusted(-self.MAX_RADIUS, -self.MAX_RADIUS, self.MAX_RADIUS, 0))
        for i in sorted(range(len(pts)), key=lambda i: -self.radius(pts[i])):
            k = pts[i]
            col = level_color(k.get("level"), dark)
            center = QPointF(self.x_of(k["intensity"]), self.y_of(k["gflops"]))
            rad = self.radius(k)
            fill = QColor(col)
            fill.setAlpha(150)
            pen = QPen(bad if k.get("above_roof") else col, 2.5 if k.get("above_roof") else 1.5)
            if k.get("reliable") is False:
                pen.setStyle(Qt.PenStyle.DashLine)
            if i == self._hover:
                pen.setColor(QColor(c.highlight))
                pen.setWidthF(pen.widthF() + 1)
            p.setPen(pen)
            hollow = k.get("level") is None and k.get("in_cache") and k.get("bound") == "memory"
            p.setBrush(QColor(c.base) if hollow else fill)
            p.drawEllipse(center, rad, rad)
            if k.get("above_roof"):
                p.setPen(bad)
                p.drawText(QPointF(center.x() + rad + 2, center.y() - rad / 2), "!")
        total = self.total_point()
        if total:  # all kernels together: a diamond in the text colour
            at = QPointF(self.x_of(total[0]), self.y_of(total[1]))
            p.setPen(QPen(QColor(c.bad) if ((self.roofline or {}).get("total") or {}).get("above_roof")
                          else QColor(c.text), 1.5))
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawPolygon(QPolygonF([at + QPointF(0, -6), at + QPointF(6, 0), at + QPointF(0, 6), at + QPointF(-6, 0)]))
            p.drawText(at + QPointF(-fm.horizontalAdvance("all kernels") / 2, -9), "all kernels")
        p.setClipping(False)
        p.setBrush(Qt.BrushStyle.NoBrush)
        self._paint_legend(p, r, fm, c, dark)
        p.end()

    def _paint_roofs(self, p, r, fm, c, ax, dark) -> None:
        """One slope per level up to its ridge, in the level's colour and labelled with its GB/s,
        then the FMA peak, flat, from the fastest level's ridge on; memory's ridge dotted."""
        x_lo, _, y_lo, _ = ax
        peak = self.peak()
        assert peak is not None  # axes() are known only with the peak
        roofs = self.roofs()
        for n, (label, bw) in enumerate(roofs):
            col = level_color(label.split("/")[-1], dark)
            ridge = peak / bw
            x0 = max(x_lo, y_lo / bw)
            a = QPointF(self.x_of(x0), self.y_of(bw * x0))
            b = QPointF(self.x_of(ridge), self.y_of(peak))
            p.setPen(QPen(col, 2))
            p.drawLine(a, b)
            # the label along its slope, from the left edge, over the line
            angle = math.degrees(math.atan2(b.y() - a.y(), b.x() - a.x()))
            xm = 10 ** (math.log10(x0) + (math.log10(ridge) - math.log10(x0)) * 0.04)
            p.save()
            p.translate(self.x_of(xm), self.y_of(bw * xm) - 5)
            p.rotate(angle)
            p.drawText(QPointF(0, 0), f"{label} {fmt_num(bw)} GB/s")
            p.restore()
            if n == len(roofs) - 1:
                p.setPen(QPen(QColor(c.dim_text), 1, Qt.PenStyle.DotLine))
                p.drawLine(b, QPointF(b.x(), r.bottom()))
                p.setPen(QColor(c.dim_text))
                p.drawText(QPointF(b.x() + 4, r.bottom() - 5), f"{label} ridge {ridge:.3g} FLOP/B")
        fastest = peak / roofs[0][1]
        p.setPen(QPen(QColor(c.text), 2))
        p.drawLine(QPointF(self.x_of(fastest), self.y_of(peak)), QPointF(r.right(), self.y_of(peak)))
        peak_text = f"FMA peak {fmt_num(peak)} GFLOP/s"
        p.drawText(QPointF(r.right() - fm.horizontalAdvance(peak_text) - 4, self.y_of(peak) - 5), peak_text)

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

    def _paint_legend(self, p, r, fm, c, dark) -> None:
        """One line above the plot: a swatch per level, then what the marks mean (elided to fit)."""
        x, y = r.left(), fm.ascent() + 3
        for label, _ in self.roofs():
            col = level_color(label.split("/")[-1], dark)
            fill = QColor(col)
            fill.setAlpha(150)
            p.setPen(QPen(col, 1.5))
            p.setBrush(fill)
            p.drawEllipse(QPointF(x + 4, y - fm.ascent() / 2 + 1), 4, 4)
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.setPen(QColor(c.text))
            p.drawText(QPointF(x + 12, y), label)
            x += 12 + fm.horizontalAdvance(label) + 10
        pts = self.points()
        notes = ["colour: the level its working set fits in", "area: share of kernel time"]
        above = sum(1 for k in pts if k.get("above_roof"))
        if above:
            notes.append(f"! {above} above its roof: its time, FLOPs or bytes are off")
        if any(k.get("reliable") is False for k in pts):
            notes.append("dashed: time not reliable")
        if any(k.get("level") is None and k.get("in_cache") and k.get("bound") == "memory" for k in pts):
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
                 f"{k['intensity']:.3g} FLOP/byte"]
        if k.get("level"):
            lines.append(f"working set {fmt_bytes(k.get('working_set_bytes') or 0)} per call: held against the "
                         f"{k['level']} roof ({fmt_num(k.get('level_gbs') or 0)} GB/s)")
        lines.append(f"{k.get('bound')}-bound: roof {fmt_num(k.get('roof_gflops') or 0)} GFLOP/s, "
                     f"<b>{k.get('pct_of_roof', 0):.3g}% of roof</b>")
        if k.get("above_roof"):
            lines.append(f"<b>above its roof</b>: {k.get('above_roof_reason') or 'the time or the byte count is off'}")
        if k.get("reliable") is False:
            lines.append(f"time not reliable: {k.get('timing_reason') or 'no reason given'}")
        if k.get("level") is None and k.get("in_cache"):
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
