"""The Run pane's words for a run: its figures, the ratio to PyTorch, the outputs that differ,
the target in short, and the kernel times that colour the Relax graph."""
from __future__ import annotations

import json

from irviz.protocol.commands import BuildRunResult, Kernel
from irviz.ui.panes.kernel_table import bindings_of


def timing_note(r: BuildRunResult) -> str:
    """How the figures were taken, and on what CPU."""
    parts = [str(r["timing_text"])] if r.get("timing_text") else []
    if r.get("kernels_reliable") is False:  # the Kernels tab's figures are not what the run spent
        parts.append(f"kernel times unreliable: {r.get('kernels_reason') or 'they disagree with the run'}")
    cpu = r.get("cpu") or {}
    if cpu:
        parts.append(f"{cpu.get('model', '?')}, {cpu.get('mcpu', '?')}, {cpu.get('isa', '?')} "
                     f"({cpu.get('vector_lanes', '?')} float32 lanes)")
    return " · ".join(parts)


def ratio_text(r: BuildRunResult) -> str:
    """TVM / PyTorch as shown, or why no ratio is: one made up by contention misleads more than none."""
    if r.get("reliable") is False:  # the reason is in the timing note below and the tooltip
        return "unreliable"
    tvm_ms, torch_ms = r.get("tvm_ms"), r.get("torch_ms")
    return fmt_figure((tvm_ms / torch_ms) if tvm_ms and torch_ms else None, 3, "×")


def short_target(target) -> str:
    """'{"kind":"llvm",...,"mcpu":"znver3"}' or 'llvm -mcpu=znver3' -> 'llvm znver3'."""
    text = str(target or "")
    try:
        d = json.loads(text)
    except ValueError:
        return text.split(" -keys")[0]
    if isinstance(d, dict):
        return " ".join(str(d[k]) for k in ("kind", "mcpu") if d.get(k)) or text
    return text


def kernel_heat(kernels: list[Kernel]) -> dict[str, float]:
    """binding var -> ms spent in the kernel it calls (a kernel's time shared by its call sites)."""
    heat: dict[str, float] = {}
    for k in kernels:
        names = bindings_of(k)
        for b in names:
            heat[b] = heat.get(b, 0.0) + float(k.get("ms") or 0) / len(names)
    return heat


def fmt_figure(v, digits=3, unit="") -> str:
    if v is None:
        return "—"
    try:
        return f"{float(v):.{digits}g}{unit}"
    except (TypeError, ValueError):
        return str(v)


def error_text(value, mismatch: bool) -> str:
    """An error figure; the engine sends NaN and ∞ as null, which on a mismatch means the outputs
    hold NaN or ∞ where PyTorch's do not (or integer outputs differ), never "no figure"."""
    if value is None:
        return "∞ / NaN" if mismatch else "—"
    return fmt_figure(value)


def outputs_that_differ(per_output: list[dict], most: int = 3) -> str:
    """'output 0 (1×8×32 float32): max abs 1.26, max rel 68.5; …' for the outputs that differ."""
    parts = []
    bad = [(i, o) for i, o in enumerate(per_output or []) if o.get("allclose") is False]
    for i, o in bad[:most]:
        shape = "×".join(str(d) for d in o.get("shape") or ()) or "scalar"
        parts.append(f"output {i} ({shape} {o.get('dtype', '')}): max abs "
                     f"{error_text(o.get('max_abs'), True)}, max rel {error_text(o.get('max_rel'), True)}")
    if len(bad) > most:
        parts.append(f"{len(bad) - most} more")
    return "; ".join(parts)
