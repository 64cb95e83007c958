"""Latency per pipeline step as a line chart (QPainter): log-scale ms on y, one x slot per step
labelled with its pass, torch eager as a dashed horizontal line.

    chart = LatencyChart()
    chart.set_trace(trace)                 # entries of the engine's latency_trace
    chart.stepClicked.connect(jump)        # a point was clicked: its step index

Steps that could not be built are a red × at the bottom (their error in the tooltip) and break
the line; a step whose outputs differ from PyTorch is a hollow red point.  Hovering a slot shows
its numbers.  Colours come from ``irviz.ui.themes.colors()`` at paint time (light/dark).
"""
from __future__ import annotations

import math

from PySide6.QtCore import QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFontMetrics, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from irviz.core.views.latency_svg import fmt_ms, log_ticks, tick_label, torch_ms_of
from irviz.ui import themes

__all__ = ["LatencyChart"]


def _num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


class LatencyChart(QWidget):
    stepClicked = Signal(int)

    MAX_LABEL_CHARS = 26

    def __init__(self, parent=None):
        super().__init__(parent)
        self.trace: list[dict] = []
        self.torch_ms: float | None = None
        # not "metric": that name is QPaintDevice.metric, which Qt calls while painting
        # "latency": TVM ms per step; "error": max abs error against PyTorch per step
        self.quantity = "latency"
        self.current_step: int | None = None
        self._hover: int | None = None
        self.setMouseTracking(True)
        self.setMinimumSize(260, 200)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)

    # -- data ------------------------------------------------------------------------------------
    def set_trace(self, trace: list[dict] | None, torch_ms: float | None = None) -> None:
        self.trace = [dict(e) for e in (trace or [])]
        if torch_ms is None:
            torch_ms = torch_ms_of(self.trace)
        self.torch_ms = torch_ms if _num(torch_ms) else None
        self._hover = None
        self.update()

    def set_quantity(self, quantity: str) -> None:
        if quantity not in ("latency", "error"):
            raise ValueError(f"the chart shows 'latency' or 'error', not {quantity!r}")
        self.quantity = quantity
        self._hover = None
        self.update()

    def error_floor(self) -> float:
        """Where an exact match (error 0) sits on the log axis: a decade below the smallest
        non-zero error."""
        errs = [e["max_abs_error"] for e in self.trace if self.built(e) and _num(e.get("max_abs_error"))]
        return min(errs) / 10 if errs else 1e-9

    def plotted(self, e: dict) -> float | None:
        """The value drawn for a step in the current quantity; None: no point."""
        if not self.built(e):
            return None
        if self.quantity == "latency":
            return e["tvm_ms"]
        err = e.get("max_abs_error")
        if not isinstance(err, (int, float)) or isinstance(err, bool) or not math.isfinite(err):
            return None
        return err if err > 0 else self.error_floor()

    def line_value(self) -> float | None:
        """The horizontal line: torch eager in latency mode, none for errors."""
        return self.torch_ms if self.quantity == "latency" else None

    def tick_text(self, t: float) -> str:
        return tick_label(t) if self.quantity == "latency" else f"{t:.0e}"

    def set_current_step(self, step: int | None) -> None:
        self.current_step = step
        self.update()

    def clear(self) -> None:
        self.set_trace([])

    def sizeHint(self) -> QSize:
        return QSize(520, 300)

    @staticmethod
    def built(e: dict) -> bool:
        return bool(e.get("ok")) and _num(e.get("tvm_ms"))

    # -- geometry --------------------------------------------------------------------------------
    def _labels(self) -> list[str]:
        out = []
        for k, e in enumerate(self.trace):
            lab = f"{e.get('step', k)} {e.get('pass', '')}"
            out.append(lab if len(lab) <= self.MAX_LABEL_CHARS else lab[:self.MAX_LABEL_CHARS - 1] + "…")
        return out

    def axis(self) -> tuple[float, float, list[float]] | None:
        vals = [v for v in (self.plotted(e) for e in self.trace) if v is not None]
        if line := self.line_value():
            vals.append(line)
        if not vals:
            return None
        if self.quantity == "latency":
            return log_ticks(min(vals), max(vals))
        # log_ticks is made for milliseconds (it floors at 1e-6); the 1-2-5 grid scales by decades
        scale = 1e12
        lo, hi, ticks = log_ticks(min(vals) * scale, max(vals) * scale)
        return lo / scale, hi / scale, [t / scale for t in ticks]

    def plot_rect(self) -> QRectF:
        fm = QFontMetrics(self.font())
        labels = self._labels()
        longest = max((fm.horizontalAdvance(s) for s in labels), default=0)
        ax = self.axis()
        ticks = ax[2] if ax else []
        left = max((fm.horizontalAdvance(self.tick_text(t)) for t in ticks), default=30) + 12
        # x labels are rotated 50°: their height is ~ sin(50°) of their length (elided to fit)
        bottom = min(self.height() * 0.4, longest * 0.77 + fm.height() + 8)
        top = fm.height() + 10
        return QRectF(left, top, max(10.0, self.width() - left - 14), max(10.0, self.height() - top - bottom))

    def y_of(self, ms: float) -> float:
        """Widget y of a latency (log scale); larger ms -> higher on screen (smaller y)."""
        ax = self.axis()
        r = self.plot_rect()
        if ax is None:
            return r.bottom()
        lo, hi, _ = ax
        f = (math.log10(ms) - math.log10(lo)) / max(1e-12, math.log10(hi) - math.log10(lo))
        return r.bottom() - f * r.height()

    def x_of(self, k: int) -> float:
        r = self.plot_rect()
        return r.left() + (k + 0.5) * r.width() / max(1, len(self.trace))

    def slot_at(self, x: float) -> int | None:
        r = self.plot_rect()
        if not self.trace or x < r.left() or x > r.right():
            return None
        k = int((x - r.left()) / (r.width() / len(self.trace)))
        return max(0, min(len(self.trace) - 1, k))

    # -- painting --------------------------------------------------------------------------------
    def paintEvent(self, event) -> None:
        c = themes.colors()
        dark = c.name == "dark"
        tvm_c = QColor("#58a6ff" if dark else "#2f6fde")
        torch_c = QColor("#f0883e" if dark else "#d1580b")
        bad_c = QColor(c.bad)
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.fillRect(self.rect(), QColor(c.base))
        fm = QFontMetrics(self.font())
        ax = self.axis()
        if not self.trace or ax is None:
            p.setPen(QColor(c.dim_text))
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter,
                       ("No step has an error against PyTorch (no reference, or none built)."
                        if self.quantity == "error" else "No step could be built.") if self.trace else
                       "Press “Time every step” to build and time every step.")
            p.end()
            return
        lo, hi, ticks = ax
        r = self.plot_rect()
        n = len(self.trace)
        slot = r.width() / n

        # hover / current step bands
        for k, e in enumerate(self.trace):
            if k == self._hover or e.get("step") == self.current_step:
                col = QColor(c.highlight if k == self._hover else c.current_line)
                if k == self._hover:
                    col.setAlpha(40)
                p.fillRect(QRectF(r.left() + k * slot, r.top(), slot, r.height()), col)

        # grid + y ticks
        p.setPen(QPen(QColor(c.border), 1))
        for t in ticks:
            y = self.y_of(t)
            p.drawLine(QPointF(r.left(), y), QPointF(r.right(), y))
        p.setPen(QColor(c.dim_text))
        for t in ticks:
            y = self.y_of(t)
            text = self.tick_text(t)
            p.drawText(QPointF(r.left() - 6 - fm.horizontalAdvance(text), y + fm.ascent() / 2 - 1), text)
        p.setPen(QPen(QColor(c.dim_text), 1))
        p.drawRect(r)

        # x labels, rotated
        labels = self._labels()
        room = max(20, int((self.height() - r.bottom() - fm.height() - 6) / 0.77))
        labels = [fm.elidedText(lab, Qt.TextElideMode.ElideRight, room) for lab in labels]
        every = max(1, math.ceil(n / max(1.0, r.width() / (fm.height() + 1))))
        for k, lab in enumerate(labels):
            x = self.x_of(k)
            p.setPen(QColor(c.dim_text))
            p.drawLine(QPointF(x, r.bottom()), QPointF(x, r.bottom() + 3))
            if k % every and k != n - 1:
                continue
            p.save()
            p.translate(x + fm.ascent() / 3, r.bottom() + 6)
            p.rotate(-50)
            e = self.trace[k]
            p.setPen(QColor(c.text if e.get("step") != self.current_step else c.highlight))
            p.drawText(QPointF(-fm.horizontalAdvance(lab), 0), lab)
            p.restore()

        # torch eager line
        if line := self.line_value():
            y = self.y_of(line)
            pen = QPen(torch_c, 1.6, Qt.PenStyle.DashLine)
            p.setPen(pen)
            p.drawLine(QPointF(r.left(), y), QPointF(r.right(), y))

        # TVM line (broken at unbuilt steps) and points
        p.setPen(QPen(tvm_c, 2))
        path = QPainterPath()
        pen_down = False
        for k, e in enumerate(self.trace):
            if (v := self.plotted(e)) is not None:
                pt = QPointF(self.x_of(k), self.y_of(v))
                if pen_down:
                    path.lineTo(pt)
                else:
                    path.moveTo(pt)
                    pen_down = True
            else:
                pen_down = False
        p.drawPath(path)
        for k, e in enumerate(self.trace):
            x = self.x_of(k)
            if (v := self.plotted(e)) is not None:
                pt = QPointF(x, self.y_of(v))
                wrong = e.get("allclose") is False
                rad = 5.0 if k == self._hover else 3.8
                p.setPen(QPen(bad_c if wrong else tvm_c, 1.6))
                p.setBrush(QColor(c.base) if wrong else tvm_c)
                p.drawEllipse(pt, rad, rad)
            elif not self.built(e):
                y = r.bottom() - 9
                p.setPen(QPen(bad_c, 2))
                p.drawLine(QPointF(x - 4, y - 4), QPointF(x + 4, y + 4))
                p.drawLine(QPointF(x - 4, y + 4), QPointF(x + 4, y - 4))
        p.setBrush(Qt.BrushStyle.NoBrush)

        self._paint_legend(p, r, fm, c, tvm_c, torch_c, bad_c)
        p.end()

    def _paint_legend(self, p, r, fm, c, tvm_c, torch_c, bad_c) -> None:
        items = [("tvm", "TVM" if self.quantity == "latency" else
                  "max |error| vs PyTorch (0 drawn at the bottom)")]
        if line := self.line_value():
            items.append(("torch", f"torch eager {fmt_ms(line)} ms"))
        if any(not self.built(e) for e in self.trace):
            items.append(("unbuilt", "not built"))
        if any(e.get("allclose") is False for e in self.trace):
            items.append(("wrong", "outputs differ"))
        # one row above the plot, right-aligned
        x = r.right()
        y = r.top() - 6 - fm.descent()
        for kind, text in reversed(items):
            w = fm.horizontalAdvance(text)
            x -= w
            p.setPen(QColor(c.text))
            p.drawText(QPointF(x, y), text)
            x -= 24
            my = y - fm.ascent() / 2 + 2
            if kind == "tvm":
                p.setPen(QPen(tvm_c, 2))
                p.drawLine(QPointF(x, my), QPointF(x + 18, my))
                p.setBrush(tvm_c)
                p.drawEllipse(QPointF(x + 9, my), 3, 3)
                p.setBrush(Qt.BrushStyle.NoBrush)
            elif kind == "torch":
                p.setPen(QPen(torch_c, 1.6, Qt.PenStyle.DashLine))
                p.drawLine(QPointF(x, my), QPointF(x + 18, my))
            elif kind == "unbuilt":
                p.setPen(QPen(bad_c, 2))
                p.drawLine(QPointF(x + 5, my - 4), QPointF(x + 13, my + 4))
                p.drawLine(QPointF(x + 5, my + 4), QPointF(x + 13, my - 4))
            else:
                p.setPen(QPen(bad_c, 1.6))
                p.setBrush(QColor(c.base))
                p.drawEllipse(QPointF(x + 9, my), 3.5, 3.5)
                p.setBrush(Qt.BrushStyle.NoBrush)
            x -= 14

    # -- interaction -----------------------------------------------------------------------------
    def tooltip_text(self, k: int) -> str:
        e = self.trace[k]
        head = f"step {e.get('step')}: {e.get('pass')}"
        if not self.built(e):
            err = e.get("error") or "could not be built"
            return f"{head}\nnot built: {err}"
        lines = [head, f"TVM {fmt_ms(e['tvm_ms'])} ms"]
        if _num(e.get("torch_ms")):
            lines.append(f"torch eager {fmt_ms(e['torch_ms'])} ms "
                         f"({e['tvm_ms'] / e['torch_ms']:.2f}× torch)")
        if e.get("allclose") is not None:
            lines.append("outputs match PyTorch" if e["allclose"] else
                         f"outputs DIFFER (max |error| {e.get('max_abs_error')})")
        if _num(e.get("build_seconds")):
            lines.append(f"built in {e['build_seconds']:.2f} s" + (" (same module as an earlier step)"
                                                                  if e.get("cached") else ""))
        lines.append("click: jump to this step")
        return "\n".join(lines)

    def mouseMoveEvent(self, event) -> None:
        k = self.slot_at(event.position().x())
        if k != self._hover:
            self._hover = k
            self.update()
        if k is None:
            QToolTip.hideText()
        else:
            QToolTip.showText(event.globalPosition().toPoint(), self.tooltip_text(k), self)

    def leaveEvent(self, event) -> None:
        self._hover = None
        self.update()
        super().leaveEvent(event)

    def mousePressEvent(self, event) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            k = self.slot_at(event.position().x())
            if k is not None:
                self.stepClicked.emit(int(self.trace[k].get("step", k)))
                return
        super().mousePressEvent(event)
