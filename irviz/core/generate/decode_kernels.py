"""Where a decode step's time goes, kernel by kernel, against the memory bandwidth.

A decode step is matrix-vector work: each weight is read once and used for one multiply-add, so a
kernel can go no faster than its bytes over the machine's DRAM bandwidth. Each kernel's share of
that limit ("% of bandwidth") says which ones stream memory as fast as it allows and which do not:

    rows = decode_kernel_rows(gen, bw_gbs)   # gen: generation.TvmGenerator, bw: machine_peak's GB/s
    rows[0] == {"name": ..., "calls": 2, "ms": 27.1, "bytes": 545e6, "share": 0.91, ...}

The bytes are those of the kernel's arguments (what it reads and writes once each): for a matrix-
vector product with a packed weight that is the weight plus two vectors. Times come from
backend.kernel_times (an instrumented VM, checked against the uninstrumented run).
"""
from __future__ import annotations

import numpy as np


def kernel_bytes(mod) -> dict[str, int]:
    """{PrimFunc name: bytes of its arguments} for the PrimFuncs of `mod` with static shapes."""
    from tvm import tirx

    out = {}
    for gv, func in mod.functions.items():
        if not isinstance(func, tirx.PrimFunc):
            continue
        total = 0
        for p in func.params:
            ty = getattr(p, "ty", None)
            shape = getattr(ty, "shape", None)
            if shape is None:
                continue
            dims = [int(d) if isinstance(d, (int, tirx.IntImm)) else None for d in shape]
            if None in dims:
                total = None
                break
            total += int(np.prod(dims, dtype=np.int64)) * tvm_itemsize(ty.dtype)
        if total:
            out[gv.name_hint] = total
    return out


def tvm_itemsize(dtype) -> int:
    import tvm

    return tvm.runtime.DataType(str(dtype)).itemsize


def decode_inputs(gen):
    """The arguments of one decode call at the first position after the prompt (as the timing takes)."""
    import tvm

    S = int(gen.progs.prompt.shape[1])
    _, cache = gen.prefill(gen.progs.prompt.numpy())
    tok = tvm.runtime.tensor(np.array([[1]], "int64"), gen.dev)
    pos = tvm.runtime.tensor(np.array([S], "int64"), gen.dev)
    return [tok, pos, *cache, *gen.decode_weights]


def decode_kernel_rows(gen, bandwidth_gbs: float | None, *, model_ms: float | None = None,
                       top: int = 8) -> dict:
    """{"kernels": the `top` slowest decode kernels, each {"name", "calls", "ms" (per decode step),
    "bytes" (per step), "gbs", "share" (of `bandwidth_gbs`; None without it), "reliable", "reason"},
    "sum_ms", "reliable", "reason"}."""
    from irviz.core.backend.kernel_times import time_kernels
    from irviz.core.backend.run import tvm_threads

    built = gen.progs.decode.built
    sizes = {}
    for m in (built.lowered, built.mod):
        if m is not None:
            sizes.update({k: v for k, v in kernel_bytes(m).items() if k not in sizes})
    times = time_kernels(built, gen.dev, decode_inputs(gen), model_ms=model_ms, threads=tvm_threads() or 1)
    rows = []
    for k in times.kernels[:top]:
        nbytes = sizes.get(k.name, 0) * k.calls or None
        gbs = nbytes / (k.ms * 1e6) if nbytes and k.ms > 0 else None
        rows.append({"name": k.name, "calls": k.calls, "ms": k.ms, "bytes": nbytes, "gbs": gbs,
                     "share": gbs / bandwidth_gbs if gbs and bandwidth_gbs else None,
                     "reliable": k.reliable, "reason": k.reason})
    return {"kernels": rows, "sum_ms": times.sum_ms, "reliable": times.reliable, "reason": times.reason}
