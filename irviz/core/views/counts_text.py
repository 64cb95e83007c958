"""A kernel's machine-code counts as text, for every place that shows them: the CLI's `irviz
code`, report.html, the kernel table's count columns and the Pipeline pane's code totals. Plain
Python (no torch, TVM or Qt), so the GUI imports it too.

    widths_compact({"512": 236, "128": 4})        # '512:236 128:4'
    widths_text({"512": 236, "128": 4}, arm=False) # '236 zmm, 4 xmm'
    counts_line("llvm", counts)                    # '812 instructions · 240 vector (236×512-bit) · ...'
"""
from __future__ import annotations

import json

# x86 names its vector registers by width; AArch64's NEON registers are all 128-bit
_X86_NAMES = {"128": "xmm", "256": "ymm", "512": "zmm"}


def is_arm(target) -> bool:
    text = json.dumps(target) if isinstance(target, dict) else str(target or "")
    return "aarch64" in text or "arm" in text


def width_name(bits: str, arm: bool) -> str:
    if bits == "sve":
        return "SVE"
    if arm:
        return "NEON" if bits == "128" else f"{bits}-bit"
    return _X86_NAMES.get(bits, f"{bits}-bit")


def widest(vector_bits: dict) -> str | None:
    sized = [b for b in vector_bits if str(b).isdigit()]
    if sized:
        return max(sized, key=int)
    return next(iter(vector_bits), None)


def widths_text(vector_bits: dict, arm: bool) -> str:
    """'236 zmm, 4 xmm': every width, most used first."""
    items = sorted(vector_bits.items(), key=lambda kv: -kv[1])
    return ", ".join(f"{n} {width_name(str(b), arm)}" for b, n in items)


def widths_compact(vector_bits: dict) -> str:
    """'512:236 128:4' (widest first), '-' with no vector instruction: the CLI's column."""
    return " ".join(f"{b}:{n}" for b, n in sorted(vector_bits.items(), key=lambda kv: -int(kv[0])
                                                    if kv[0].isdigit() else 0)) or "-"


def callees_text(callees: dict, most: int | None = None) -> str:
    """'expf×2, TVMBackendParallelLaunch×1'."""
    return ", ".join(f"{f}×{n}" for f, n in list((callees or {}).items())[:most])


def parts_text(parts: dict) -> str:
    """'= entry __tvm_ffi_k 512 + body k_compute_ 120 + parallel lambda .L__tvm_parallel_lambda 40
    instructions': the functions a kernel's counts are summed over."""
    return "= " + " + ".join(f"{p['role']} {s} {p.get('instructions', 0)}" for s, p in parts.items()) \
        + " instructions"


def counts_line(kind: str, counts: dict, launch: list | None = None) -> str:
    """'812 instructions · 240 vector (236×512-bit, 4×128-bit) · 96 FMA · 2 calls out: expf×2'
    (report.html); a GPU kernel's launch shape, shared memory and barriers instead."""
    c = counts or {}
    if kind != "llvm":
        shapes = "; ".join(f"grid {'×'.join(map(str, x['grid']))}, block {'×'.join(map(str, x['block']))}"
                           for x in launch or [])
        return f"{shapes or 'no launch'} · {c.get('shared_bytes', 0)} B shared · {c.get('barriers', 0)} barriers"
    bits = ", ".join(f"{n}×{b}-bit" if str(b).isdigit() else f"{n}×{b}"
                     for b, n in sorted((c.get("vector_bits") or {}).items(), key=lambda kv: -kv[1]))
    calls = callees_text(c.get("callees") or {}, most=4)
    return (f"{c.get('instructions', 0)} instructions · {c.get('vector', 0)} vector"
            + (f" ({bits})" if bits else "") + f" · {c.get('fma', 0)} FMA ({c.get('vector_fma', 0)} vector)"
            + f" · {c.get('calls', 0)} calls out" + (f": {calls}" if calls else ""))


def counts_comment(gpu: bool, name: str, counts: dict, launch: list, parts: dict | None) -> str:
    """The header line `irviz code --kernel` prints above a kernel's code (and its diff's)."""
    c = counts
    if gpu:
        shapes = "; ".join(f"{x.get('function', name)} grid {x['grid']} block {x['block']}" for x in launch)
        return f"{shapes}; {c['shared_bytes']} B shared, {c['barriers']} barriers"
    return (f"{c['instructions']} instructions, {c['vector']} vector ({widths_compact(c['vector_bits'])}), "
            f"{c['fma']} FMA ({c['vector_fma']} vector), {c.get('loops', 0)} loops, {c['calls']} calls out"
            + (f": {callees_text(c['callees'])}" if c["callees"] else "")
            + (f"\n# {parts_text(parts)}" if parts else ""))
