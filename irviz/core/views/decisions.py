"""The measured CPU decisions a module carries, read for display: LibraryDispatch's library-or-
TensorIR choice per call (a module attribute) and the tile searches' choice per kernel (a function
attribute). ``tuning`` writes these attributes; the names are defined here, where they are read.
"""
from __future__ import annotations

import json

import tvm
from tvm import relax, tirx

from irviz.core.library_names import PREFIX, conv2d_name
from irviz.core.tvm_compat import GenericConst, static_shape, var_name

DECISIONS_ATTR = "irviz.decisions"  # module attr: JSON records of LibraryDispatch's measured choices
TUNE_NOTE_ATTR = "irviz.tile_search"  # function attr, JSON: candidates with their times, the choice


# ------------------------------------------------------------------------------------ workloads
def workload_key(call) -> str:
    """A readable key of a conv2d / matmul call, or of the call_dps_packed LibraryDispatch made of
    one: op, operand shapes (c: a constant), dtype and, for conv2d, stride/padding/dilation/groups
    as the library function's name spells them."""
    if call.op.same_as(tvm.ir.Op.get("relax.call_dps_packed")):
        name = str(call.args[0].global_symbol)
        op, _, attrs = name[len(PREFIX):].partition(".")
        args = list(call.args[1].fields)
    else:
        op = call.op.name.split(".")[-1]
        attrs = conv2d_name(call)[len(PREFIX + "conv2d."):] if op == "conv2d" else ""
        args = list(call.args)
    shapes = "*".join("x".join(map(str, static_shape(a.ty) or ["?"])) + ("c" if isinstance(a, GenericConst) else "")
                      for a in args)
    return f"{op} {shapes} {call.ty.dtype}" + (f" {attrs}" if attrs else "")


def decision_texts(mod, func: str = "main") -> dict[str, str]:
    """{binding var name: what LibraryDispatch measured for it} for the calls of `func`."""
    by_key = {d["workload"]: d for d in decisions_of(mod) if d["kind"] == "library_or_tir"}
    if not by_key or func not in [g.name_hint for g in mod.get_global_vars()]:
        return {}
    out = {}
    fn = mod[func]
    for block in getattr(fn.body, "blocks", []):
        for b in block.bindings:
            v = getattr(b, "value", None)
            if not isinstance(v, relax.Call) or not isinstance(v.op, tvm.ir.Op):
                continue
            if v.op.name not in ("relax.nn.conv2d", "relax.matmul", "relax.call_dps_packed"):
                continue
            try:
                rec = by_key.get(workload_key(v))
            except Exception:  # a call_dps_packed to something else
                rec = None
            if rec is not None:
                out[var_name(b.var)] = describe_decision(rec)
    return out


def describe_decision(rec: dict) -> str:
    """"torch 1.21 ms · TIR 0.88 ms → TIR" (what the tooltip and the kernel table show)."""
    fmt = lambda ms: "failed" if ms is None else f"{ms:.3g} ms"
    text = f"torch {fmt(rec.get('torch_ms'))} · TIR {fmt(rec.get('tir_ms'))} → {'TIR' if rec.get('choice') == 'tir' else 'torch'}"
    if rec.get("cached"):
        text += " (cached)"
    if rec.get("notes"):
        text += "; " + "; ".join(rec["notes"])
    return text + provisional_text(rec)


def provisional_text(rec: dict) -> str:
    """"; provisional: measured while the machine was busy: load average 8.2 on 2 cores (...);
    measured again when the machine is quiet", or "" for a final decision."""
    if not rec.get("provisional"):
        return ""
    text = f"; provisional: {rec['provisional']}; measured again when the machine is quiet"
    if rec.get("reused"):
        text += f" (reused now: {rec['reused']})"
    return text


def _tile_words(c: dict) -> str:
    if "nb" in c:  # a matrix-vector kernel's panel
        return (f"panels of {c['nb']}" + (f", K unrolled by {c['unroll']}" if c.get("unroll", 1) > 1 else "")
                + ("" if c.get("par", 1) else ", one thread"))
    return f"tile {c['vec']}×{c['reg']}"


def describe_tile(rec: dict) -> str:
    """"tile 8×7, fastest of 8 measured: 1.76 ms (the rule's 8×14: 2.42 ms)"; a matrix-vector
    kernel's "panels of 64, fastest of 6 measured: ..."."""
    ok = [c for c in rec.get("candidates", []) if "ms" in c]
    if not rec.get("choice") or not ok:
        return "tile search: no candidate built" + (f" ({rec['candidates'][0].get('error')})"
                                                    if rec.get("candidates") else "")
    chosen = rec["choice"]
    best = next((c for c in ok if all(c.get(k) == v for k, v in chosen.items())), None) \
        if isinstance(chosen, dict) and "nb" in chosen else None
    best = best or min(ok, key=lambda c: c["ms"])
    first = rec["candidates"][0]
    text = f"{_tile_words(best)}, fastest of {len(rec['candidates'])} measured: {best['ms']:.3g} ms"
    if best is not min(ok, key=lambda c: c["ms"]):
        text = f"{_tile_words(best)} (the rule's, within the noise of the fastest), of {len(rec['candidates'])} measured: {best['ms']:.3g} ms"
    elif first is not best and "ms" in first:
        text += f" (the rule's {_tile_words(first).removeprefix('tile ')}: {first['ms']:.3g} ms)"
    if rec.get("shared_width"):  # a decode kernel packing a weight as the prefill does, or why not
        text += f"; {rec['shared_width']}"
    return text + provisional_text(rec)


def decisions_of(mod) -> list[dict]:
    """The measured decisions a module carries: LibraryDispatch's per call, the tile searches' per
    kernel (kind "conv2d_tile" or "matmul_tile")."""
    out = []
    if mod.attrs is not None and DECISIONS_ATTR in mod.attrs:
        for s in mod.attrs[DECISIONS_ATTR]:
            try:
                out.append({"kind": "library_or_tir", **json.loads(str(s))})  # a record's own kind wins
            except ValueError:
                continue
    for gv, func in mod.functions.items():
        if isinstance(func, tirx.PrimFunc) and func.attrs is not None and TUNE_NOTE_ATTR in func.attrs:
            try:
                out.append({"kind": "conv2d_tile", **json.loads(str(func.attrs[TUNE_NOTE_ATTR])), "kernel": gv.name_hint})
            except ValueError:
                continue
    return out


# the passes whose steps carry measured decisions
MEASURING_PASSES = ("LibraryDispatch", "CPUTuneConv2d", "CPUTuneReductions", "CPUTuneMatVec")


def pipeline_decisions(steps) -> list[dict]:
    """The measured decisions of a session's steps (objects with pass_name and mod), each once."""
    seen, out = set(), []
    for st in steps:
        if st.pass_name not in MEASURING_PASSES:
            continue
        for d in decisions_of(st.mod):
            key = (d["kind"], d.get("kernel"), d["workload"])
            if key not in seen:
                seen.add(key)
                out.append(d)
    return out


def provisional_summary(records: list[dict]) -> str | None:
    """"2 of 7 measured decisions are provisional (...); ..." or None when every one is final."""
    prov = [d for d in records if d.get("provisional")]
    if not prov:
        return None
    return (f"{len(prov)} of {len(records)} measured decisions are provisional ({prov[0]['provisional']}"
            + (", and others" if len(prov) > 1 else "") + "): they are measured again on the first run that "
            "finds the machine quiet, or now with --no-cache")


def _dims(text: str) -> list[int]:
    return [int(x) for x in text.rstrip("c").split("x")] if text and text != "?" else []


def _library_record_for_tile(tile: dict, library: list[dict]) -> dict | None:
    """The LibraryDispatch decision for the call a tiled kernel computes, matched by shapes: the tile
    signature (the shapes the conv2d / matmul block read, taken before tiling) against the call's
    operand shapes, a conv2d's input padded as its attributes say."""
    parts = tile.get("workload", "").split()
    if len(parts) < 3:
        return None
    reads = [_dims(s) for s in parts[1:-2]]  # "conv2d-tile IN W OUT float32 lanes8": the shapes
    for rec in library:
        fields = rec["workload"].split()  # "conv2d 1x64x56x56*64x64x3x3c float32 s1_1.p1_1.d1_1.g1"
        if len(fields) < 3:
            continue
        op, shapes, attrs = fields[0], fields[1], fields[3:]
        operands = [_dims(s) for s in shapes.split("*")]
        if tile["kind"] in ("matmul_tile", "matvec_tile") and op == "matmul" and reads[:2] == operands[:2]:
            return rec
        if (tile["kind"] == "conv2d_tile" and op == "conv2d" and len(operands) == 2 and len(operands[0]) == 4
                and len(reads) >= 2 and attrs):
            pads = [int(p) for p in attrs[0].split(".")[1][1:].split("_")]  # s1_1.p1_1.d1_1.g1
            (n, c, h, w), weight = operands
            if reads[1] == weight and reads[0] == [n, c, h + 2 * pads[0], w + 2 * pads[1]]:
                return rec
    return None


def kernel_decisions(mod, kernels) -> dict[str, str]:
    """{kernel name: decision text} for a build's kernels (KernelTime-like: name, binding): what
    LibraryDispatch measured for the call (matched by binding for a torch call, by shapes for a
    call kept in TensorIR and fused), then the tile search's choice."""
    texts = decision_texts(mod)
    recs = decisions_of(mod)
    library = [d for d in recs if d["kind"] == "library_or_tir"]
    tiles = {d["kernel"]: d for d in recs if d["kind"] in ("conv2d_tile", "matmul_tile", "matvec_tile")}
    out = {}
    for k in kernels:
        found = [texts[b] for b in (k.binding or "").split(", ") if b in texts]
        parts = [found[0] + (f" (+{len(found) - 1} more calls)" if len(found) > 1 else "")] if found else []
        if k.name in tiles:
            rec = _library_record_for_tile(tiles[k.name], library)
            if rec is not None and not parts:
                parts.append(describe_decision(rec))
            parts.append(describe_tile(tiles[k.name]))
        if parts:
            out[k.name] = " · ".join(parts)
    return out
