"""Prefill and decode estimated without weights: each program's kernels timed alone (tuning.estimate,
as ``check --no-weights`` does), beside the bandwidth limit of a decode step.

A decode step reads every weight once and the whole static cache (attention runs over all of its
positions under a mask), and does little arithmetic per byte, so no decode can beat the time to
move those bytes from memory: (weight bytes + cache bytes) / the machine's measured DRAM
bandwidth (STREAM triad, backend.machine_peak). The estimate at or near that limit says decode is
as fast as this machine allows; far above it says where to look (the kernel rows).
"""
from __future__ import annotations

from irviz.core.generate.programs import Programs


def _estimate(program, structure_only: bool, dims: dict, inner: dict | None = None) -> dict:
    """inner: sizes main defines from tensor values (decode's filled positions), bound here: the
    estimate binds only the sizes of main's parameters."""
    from tvm import relax

    from irviz.core.tuning.estimate import FOLDS, estimate_latency

    session = program.session
    fold = structure_only and any(s.pass_name in FOLDS for s in session.steps)
    source = {k: "--max-len" for k in dims}  # a symbolic context length is estimated at the length given
    mod = session.module()
    if inner:
        mod = relax.transform.BindSymbolicVars(inner, "main")(mod)
    return estimate_latency(mod, dims, func="main", fold_weights=fold, dims_source=source)


def weight_bytes(lm) -> int:
    from irviz.core.frontend.structure_only import weight_summary

    return int(weight_summary(lm)["bytes"])


def estimate_generation(progs: Programs, bandwidth: dict | None = None) -> dict:
    """{"estimated_prefill_ms", "estimated_decode_ms_per_token", "estimated_tokens_per_s",
    "bandwidth_limit_ms_per_token", "bandwidth_gbs", "bandwidth_source", "weight_bytes",
    "kv_cache_bytes", "decode_share_of_bandwidth" (limit / estimate: 1.0 is as fast as memory
    allows), "prefill_kernels", "decode_kernels" (the top rows), "complete" (both estimates count
    every kernel)}. `bandwidth`: machine_peak.memory_bandwidth()'s dict (None: measured now)."""
    from irviz.core.backend.machine_peak import memory_bandwidth

    pre = _estimate(progs.prefill, progs.structure_only, progs.dims())
    # decode reading the filled positions only is estimated at the last one: the whole cache, as the limit
    dec = _estimate(progs.decode, progs.structure_only, progs.dims(), progs.position_dims())
    bw = bandwidth or memory_bandwidth()
    wbytes = weight_bytes(progs.lm)
    cache = progs.layout.bytes
    limit_ms = (wbytes + cache) / (bw["gbs"] * 1e9) * 1e3 if bw.get("gbs") else None
    dec_ms = dec.get("estimated_ms")
    return {
        "estimated_prefill_ms": pre.get("estimated_ms"),
        "estimated_decode_ms_per_token": dec_ms,
        "estimated_tokens_per_s": 1e3 / dec_ms if dec_ms else None,
        "bandwidth_limit_ms_per_token": limit_ms,
        "decode_share_of_bandwidth": limit_ms / dec_ms if limit_ms and dec_ms else None,
        "bandwidth_gbs": bw.get("gbs"),
        "bandwidth_source": bw.get("source"),
        "weight_bytes": wbytes,
        "kv_cache_bytes": cache,
        "contended": list(pre.get("contended") or []) + list(dec.get("contended") or []),
        "complete": bool(pre.get("complete", True) and dec.get("complete", True)),
        "prefill_kernels": _top(pre),
        "decode_kernels": _top(dec),
        "not_estimated": {"prefill": pre.get("not_estimated", []), "decode": dec.get("not_estimated", [])},
    }


def _top(est: dict, n: int = 8) -> list[dict]:
    keep = ("name", "kind", "calls", "ms", "total_ms", "share", "shapes", "extrapolated")
    return [{k: r.get(k) for k in keep} for r in est.get("kernels", [])[:n]]
