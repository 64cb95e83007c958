"""The roofline in the Run pane: GFLOP/s, bytes moved, the memory level a kernel is held against and
its % of that roof as columns of the kernel table, and a tab with the roofline chart and where its
roofs come from. A % of roof over 100 is marked "!" in the error colour: the kernel was timed faster
than its roof, so its time or its byte count is off (the tooltip says which roof). The figures are the build_run
result's ``roofline`` block (``irviz.core.backend.roofline``), given to the table as context."""
from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from irviz.protocol.commands import Kernel
from irviz.ui import themes
from irviz.ui.panes.base import dim_label
from irviz.ui.panes.kernel_table import Column, KernelTable, Num, bindings_of, text_cell
from irviz.ui.widgets.roofline_chart import RooflineChart, fmt_bytes, fmt_num


def by_name(roofline: dict | None) -> dict[str, dict]:
    return {k["name"]: k for k in (roofline or {}).get("kernels") or []}


def _entry(k: dict, ctx: dict) -> dict | None:
    return ctx.get("roofline_by_name", {}).get(k.get("name"))


def _tooltip(e: dict) -> str:
    if e.get("flops") is None:
        return "no FLOP count: symbolic shapes, or a call irviz cannot count"
    text = (f"{fmt_num(e['flops'])} FLOP, {fmt_bytes(e['bytes'])} moved ({fmt_num(e.get('gbs') or 0)} GB/s)")
    if e.get("level"):
        text += (f"; working set {fmt_bytes(e.get('working_set_bytes') or 0)} per call: the {e['level']} roof, "
                 f"{fmt_num(e.get('level_gbs') or 0)} GB/s")
    if e.get("intensity") is not None:
        text += (f"; {e['intensity']:.3g} FLOP/byte: {e['bound']}-bound, roof "
                 f"{fmt_num(e['roof_gflops'])} GFLOP/s")
    if e.get("above_roof"):
        text += f". Above its roof: {e.get('above_roof_reason') or 'the time or the byte count is off'}"
    if e.get("reliable") is False:
        text += f". Time not reliable: {e.get('timing_reason') or 'no reason given'}"
    if e.get("level") is None and e.get("in_cache"):
        text += "; its buffers fit in the last-level cache, so it can pass memory's roof"
    return text


def _cell(key: str, fmt):
    def cell(k: dict, ctx: dict):
        e = _entry(k, ctx)
        if e is None:
            return text_cell("", "Build & Run to measure" if not ctx.get("roofline_by_name") else "")
        v = e.get(key)
        if v is None:
            return _blank(_tooltip(e))
        if not isinstance(v, (int, float)):
            return text_cell(str(v), _tooltip(e))
        above = key == "pct_of_roof" and e.get("above_roof")
        item = Num(float(v), fmt(v) + (" !" if above else ""))
        item.setToolTip(_tooltip(e))
        if above:
            item.setForeground(QColor(themes.colors().bad))
        elif key == "pct_of_roof" and e.get("level") is None and e.get("in_cache") and e.get("bound") == "memory":
            item.setForeground(QColor(themes.colors().dim_text))  # against memory's roof, not its cache's
        return item
    return cell


def _blank(tooltip: str):
    item = Num(-1.0, "—")  # sorts below every figure
    item.setToolTip(tooltip)
    return item


ROOFLINE_COLUMNS = [
    Column("GFLOP/s", _cell("gflops", fmt_num),
           tooltip="FLOPs of the kernel (TVM's estimate from its TIR) per second of its measured time"),
    Column("Moved", _cell("bytes", fmt_bytes),
           tooltip="bytes of the buffers the kernel reads and writes (its parameters), per run"),
    Column("Level", _cell("level", str),
           tooltip="the fastest memory level that holds the kernel's working set (its bytes per call): "
                   "the roof it is held against"),
    Column("% roof", _cell("pct_of_roof", lambda v: f"{v:.3g}"),
           tooltip="achieved GFLOP/s against the roof at the kernel's arithmetic intensity: min(FMA peak, "
                   "bandwidth of its level × intensity); over 100 (marked !) its time or byte count is off"),
]


def add_roofline_columns(table: KernelTable) -> None:
    """The roofline columns after "%"; `set_roofline` fills them."""
    after = "%"
    for col in ROOFLINE_COLUMNS:
        table.add_column(col, after=after)
        after = col.header


def set_roofline(table: KernelTable, roofline: dict | None) -> None:
    table.set_context(roofline_by_name=by_name(roofline))


def roofs_text(r: dict | None) -> str:
    """One paragraph: the roofs, their sources, the whole run against the peak."""
    if not r:
        return ""
    t = r.get("total") or {}
    peak = r.get("peak") or {}
    f = peak.get("formula") or {}
    lines = [f"FMA peak {fmt_num(r['peak_gflops'])} GFLOP/s ({r['peak_source']})."]
    levels = r.get("levels") or []
    if len(levels) > 1:
        lines.append("Bandwidth per level: " + ", ".join(_level_text(lv) for lv in levels) + ".")
        lines += [f"{lv['level']}: {lv['adjusted']}." for lv in levels if lv.get("adjusted")]
    lines.append(f"Memory {fmt_num(r['bandwidth_gbs'])} GB/s ({r['bandwidth_source']}).")
    if r.get("levels_note"):
        lines.append(r["levels_note"][:1].upper() + r["levels_note"][1:] + ".")
    if f.get("gflops"):
        lines.append(f"On paper: {f['vector_lanes']} lanes × {f['fma_units']} FMA units ({f['fma_units_source']}) "
                     f"× 2 × {f['threads']} threads × {f['clock_mhz']:.0f} MHz ({f['clock_source']}) = "
                     f"{fmt_num(f['gflops'])} GFLOP/s; the measurement implies {f['implied_clock_ghz']} GHz.")
    busy = [f"{what} {d['load']:.1f}" for what, d in (("peak", peak), ("bandwidth", r.get("bandwidth") or {}))
            if isinstance(d.get("load"), (int, float)) and d["load"] > (r.get("threads") or 1)]
    if busy:
        lines.append(f"The machine was busy while they were measured (load average: {', '.join(busy)}): "
                     "the bandwidth reads low when other processes use memory too.")
    if t.get("gflops") is not None:
        text = f"All kernels together: {fmt_num(t['gflops'])} GFLOP/s, {t['pct_of_peak']:.3g}% of peak"
        if t.get("pct_of_roof") is not None:
            text += (f", {t['pct_of_roof']:.3g}% of their roofs (each kernel's shortest time at its own "
                     "level's roof, summed)")
        lines.append(text + ".")
    elif t.get("unknown_reason"):
        lines.append(f"All kernels together: no figure, as {t['unknown_reason']}.")
    if r.get("kernels_reliable") is False:
        lines.append(f"The kernels' times are not reliable: {r.get('kernels_reason') or 'no reason given'}.")
    above = [e["name"] for e in r.get("kernels") or () if e.get("above_roof")]
    if above:
        lines.append(f"{len(above)} kernel{'s' * (len(above) > 1)} timed above {'their' if len(above) > 1 else 'its'} "
                     f"roof ({', '.join(above[:3])}{', …' * (len(above) > 3)}): its time, FLOP count or byte count is off "
                     "(hover for the roof it passed).")
    return " ".join(lines)


def _level_text(lv: dict) -> str:
    cap = f" (up to {fmt_bytes(lv['capacity_bytes'])})" if lv.get("capacity_bytes") else ""
    return f"{lv['level']} {fmt_num(lv['gbs'])} GB/s{cap}"


class RooflineTab(QWidget):
    """The chart, and under it where the roofs come from; clicking a dot emits the first Relax
    binding that calls the kernel (as a click in the kernel table does)."""
    bindingClicked = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.chart = RooflineChart()
        self.chart.kernelClicked.connect(self._clicked)
        self.bindings: dict[str, list[str]] = {}
        self.note: QLabel = dim_label("")
        self.note.setWordWrap(True)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 4, 0, 0)
        lay.setSpacing(4)
        lay.addWidget(self.chart, 1)
        lay.addWidget(self.note)

    def set_roofline(self, roofline: dict | None, kernels: Sequence[Kernel] = ()) -> None:
        self.bindings = {k.get("name"): bindings_of(k) for k in kernels}
        self.chart.set_roofline(roofline)
        self.note.setText(roofs_text(roofline))

    def clear(self) -> None:
        self.set_roofline(None)

    def _clicked(self, name: str) -> None:
        if self.bindings.get(name):
            self.bindingClicked.emit(self.bindings[name][0])
