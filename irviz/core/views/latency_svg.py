"""The latency chart's pieces: a log axis, number and tick labels, torch eager's line, and the
whole chart as a self-contained SVG (report.html).  The Qt chart widget draws the same axis
with the same helpers.  Plain Python (no Qt, torch or TVM): the GUI process imports it.

    svg = latency_svg(trace)      # trace: irviz.core.backend.latency.latency_trace's entries
"""
from __future__ import annotations

import html
import math

__all__ = ["log_ticks", "fmt_ms", "tick_label", "torch_ms_of", "latency_svg"]


def log_ticks(lo: float, hi: float) -> tuple[float, float, list[float]]:
    """(axis low, axis high, tick values) for a log axis covering [lo, hi] (ms, > 0).

    The ends snap outwards to the 1-2-5 grid; ticks are the 1-2-5 values between them when the axis
    spans at most two decades, else the powers of ten (and both ends)."""
    lo = max(float(lo), 1e-6)
    hi = max(float(hi), lo)
    if hi / lo < 2.0:  # a flat line: give it some room
        mid = math.sqrt(lo * hi)
        lo, hi = min(lo, mid / 1.6), max(hi, mid * 1.6)
    lo, hi = lo / 1.12, hi * 1.12  # keep points off the frame
    grid = []
    e = math.floor(math.log10(lo)) - 1
    while not grid or grid[-1] < hi:
        for m in (1, 2, 5):
            grid.append(m * 10.0 ** e)
        e += 1
    low = max(g for g in grid if g <= lo * (1 + 1e-9))
    high = min(g for g in grid if g >= hi * (1 - 1e-9))
    inside = [g for g in grid if low * (1 - 1e-9) <= g <= high * (1 + 1e-9)]
    if math.log10(high / low) <= 2.0001:
        ticks = inside
    else:
        ticks = [g for g in inside if abs(math.log10(g) - round(math.log10(g))) < 1e-9]
        ticks = sorted({low, high, *ticks})
    return low, high, ticks


def fmt_ms(v: float) -> str:
    if v is None:
        return "–"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    if v >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def tick_label(v: float) -> str:
    if v >= 1000:
        return f"{v / 1000:g} s"
    if v >= 1:
        return f"{v:g} ms"
    return f"{v * 1000:g} µs"


def torch_ms_of(trace: list[dict]) -> float | None:
    """Torch eager's time for the chart's line: the smallest of the steps' torch medians.

    Not their median: on a busy machine torch's figure swings by 100x from step to step
    (small_cnn on 2 cores at load average 3-6: 0.07 ms at some steps, 16-73 ms at others; also
    right after some builds with no TVM run in between; a 2-thread parallel region waits for a
    core).  Noise only adds time, so the smallest median is the best estimate of torch eager."""
    vals = [e["torch_ms"] for e in trace if isinstance(e.get("torch_ms"), (int, float))
            and math.isfinite(e["torch_ms"]) and e["torch_ms"] > 0]
    return min(vals) if vals else None


# -------------------------------------------------------------------------------------------------
# SVG


def _x(s) -> str:
    return html.escape(str(s), quote=True)


def latency_svg(trace: list[dict], width: int = 900, height: int = 380, *, title: str | None = None,
                dark: bool = False) -> str:
    """A self-contained SVG line chart of a latency trace.

    y: TVM latency per step in ms on a log scale; x: steps, labelled "i pass" (rotated).  Built
    steps are points joined by a line (broken where a step could not be built: a red × on the axis,
    its error in the tooltip); torch eager is a horizontal dashed line; a legend in the corner.
    Points whose outputs differ from PyTorch are drawn hollow red.  Every point has a <title>."""
    fg, dim, grid_c, bg = ("#d4d7dd", "#8b919a", "#3a3d42", "#16171a") if dark else \
        ("#1f2328", "#6e7781", "#e5e8eb", "#ffffff")
    tvm_c, torch_c, bad_c = ("#58a6ff", "#f0883e", "#f85149") if dark else ("#2f6fde", "#d1580b", "#cf222e")
    n = len(trace)
    labels = [f"{e.get('step', k)} {e.get('pass', '')}" for k, e in enumerate(trace)]
    longest = max((len(s) for s in labels), default=4)
    left, right, top = 64, 20, 50 if title else 30  # the legend is one row above the plot
    bottom = min(170, 22 + int(5.2 * min(longest, 28)))
    pw, ph = max(50, width - left - right), max(50, height - top - bottom)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" font-family="Helvetica,Arial,sans-serif" '
             f'font-size="11" class="latency-chart">',
             f'<rect x="0" y="0" width="{width}" height="{height}" fill="{bg}"/>']
    if title:
        parts.append(f'<text x="{left}" y="20" font-size="14" font-weight="bold" fill="{fg}">{_x(title)}</text>')
    vals = [e["tvm_ms"] for e in trace if e.get("ok") and isinstance(e.get("tvm_ms"), (int, float))
            and e["tvm_ms"] > 0]
    torch_ms = torch_ms_of(trace)
    allv = vals + ([torch_ms] if torch_ms else [])
    if not n or not allv:
        parts.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" fill="{dim}">'
                     f'{"no step could be built" if n else "no latency trace"}</text></svg>')
        return "".join(parts)
    lo, hi, ticks = log_ticks(min(allv), max(allv))
    llo, lhi = math.log10(lo), math.log10(hi)

    def ymap(v):
        return top + ph - (math.log10(v) - llo) / (lhi - llo) * ph

    def xmap(k):
        return left + (k + 0.5) * pw / n

    # axes and grid
    parts.append(f'<g class="axes" stroke="{grid_c}" stroke-width="1">')
    for t in ticks:
        y = ymap(t)
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}"/>')
    parts.append("</g>")
    parts.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="{dim}"/>')
    for t in ticks:
        parts.append(f'<text x="{left - 6}" y="{ymap(t) + 4:.1f}" text-anchor="end" fill="{dim}">'
                     f"{_x(tick_label(t))}</text>")
    parts.append(f'<text transform="translate(14 {top + ph / 2:.0f}) rotate(-90)" text-anchor="middle" '
                 f'fill="{dim}">latency (log scale)</text>')
    step_every = max(1, math.ceil(n / max(1, pw / 13)))
    for k, lab in enumerate(labels):
        if k % step_every and k != n - 1:
            continue
        x, y = xmap(k), top + ph + 8
        short = lab if len(lab) <= 28 else lab[:27] + "…"
        parts.append(f'<text transform="translate({x + 3:.1f} {y:.1f}) rotate(-55)" text-anchor="end" '
                     f'fill="{fg}">{_x(short)}</text>')
        parts.append(f'<line x1="{x:.1f}" y1="{top + ph}" x2="{x:.1f}" y2="{top + ph + 4}" stroke="{dim}"/>')

    # torch eager
    if torch_ms:
        y = ymap(torch_ms)
        parts.append(f'<line class="torch" x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" '
                     f'stroke="{torch_c}" stroke-width="1.5" stroke-dasharray="6 4">'
                     f"<title>torch eager {fmt_ms(torch_ms)} ms</title></line>")

    # TVM line, broken at unbuilt steps
    seg: list[str] = []
    segments: list[list[str]] = []
    for k, e in enumerate(trace):
        if e.get("ok") and isinstance(e.get("tvm_ms"), (int, float)) and e["tvm_ms"] > 0:
            seg.append(f"{xmap(k):.1f},{ymap(e['tvm_ms']):.1f}")
        else:
            if seg:
                segments.append(seg)
            seg = []
    if seg:
        segments.append(seg)
    for s in segments:
        if len(s) > 1:
            parts.append(f'<polyline class="tvm-line" points="{" ".join(s)}" fill="none" '
                         f'stroke="{tvm_c}" stroke-width="2"/>')
    for k, e in enumerate(trace):
        x = xmap(k)
        if e.get("ok") and isinstance(e.get("tvm_ms"), (int, float)) and e["tvm_ms"] > 0:
            y = ymap(e["tvm_ms"])
            wrong = e.get("allclose") is False
            tip = f"step {e.get('step')} {e.get('pass')}: TVM {fmt_ms(e['tvm_ms'])} ms"
            if isinstance(e.get("torch_ms"), (int, float)) and e["torch_ms"]:
                tip += f", torch {fmt_ms(e['torch_ms'])} ms ({e['tvm_ms'] / e['torch_ms']:.2f}×)"
            if wrong:
                tip += f"; outputs DIFFER from PyTorch (max abs error {e.get('max_abs_error')})"
            fill = bg if wrong else tvm_c
            stroke = bad_c if wrong else tvm_c
            parts.append(f'<circle class="point" cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{fill}" '
                         f'stroke="{stroke}" stroke-width="1.5"><title>{_x(tip)}</title></circle>')
        else:
            y = top + ph - 8
            tip = f"step {e.get('step')} {e.get('pass')}: not built: {e.get('error') or 'unknown error'}"
            parts.append(f'<g class="unbuilt" stroke="{bad_c}" stroke-width="2"><title>{_x(tip)}</title>'
                         f'<line x1="{x - 4:.1f}" y1="{y - 4:.1f}" x2="{x + 4:.1f}" y2="{y + 4:.1f}"/>'
                         f'<line x1="{x - 4:.1f}" y1="{y + 4:.1f}" x2="{x + 4:.1f}" y2="{y - 4:.1f}"/></g>')

    # legend: one row above the plot, right-aligned (text width estimated at 6.2 px a character)
    items = [("tvm", "TVM (built step)")]
    if torch_ms:
        items.append(("torch", f"torch eager {fmt_ms(torch_ms)} ms"))
    if any(not e.get("ok") for e in trace):
        items.append(("unbuilt", "could not be built"))
    if any(e.get("allclose") is False for e in trace):
        items.append(("wrong", "outputs differ"))
    parts.append('<g class="legend">')
    x = left + pw
    y = top - 10
    for kind, text in reversed(items):
        x -= int(6.2 * len(text))
        parts.append(f'<text x="{x}" y="{y + 4}" fill="{fg}">{_x(text)}</text>')
        x -= 28
        lx = x
        if kind == "tvm":
            parts.append(f'<line x1="{lx}" y1="{y}" x2="{lx + 22}" y2="{y}" stroke="{tvm_c}" stroke-width="2"/>'
                         f'<circle cx="{lx + 11}" cy="{y}" r="3.5" fill="{tvm_c}"/>')
        elif kind == "torch":
            parts.append(f'<line x1="{lx}" y1="{y}" x2="{lx + 22}" y2="{y}" stroke="{torch_c}" '
                         f'stroke-width="1.5" stroke-dasharray="6 4"/>')
        elif kind == "unbuilt":
            parts.append(f'<g stroke="{bad_c}" stroke-width="2"><line x1="{lx + 7}" y1="{y - 4}" x2="{lx + 15}" '
                         f'y2="{y + 4}"/><line x1="{lx + 7}" y1="{y + 4}" x2="{lx + 15}" y2="{y - 4}"/></g>')
        else:
            parts.append(f'<circle cx="{lx + 11}" cy="{y}" r="3.5" fill="{bg}" stroke="{bad_c}" stroke-width="1.5"/>')
        x -= 16
    parts.append("</g></svg>")
    return "".join(parts)
