"""Outputs as the run and its checks compare them: nested results flattened, torch / TVM / numpy
values converted, and two arrays compared with tolerances scaled to the reference."""
from __future__ import annotations

import numpy as np
import tvm


def flatten(obj) -> list:
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in flatten(v)]
    if isinstance(obj, (list, tuple)):
        return [x for v in obj for x in flatten(v)]
    if hasattr(obj, "numpy") or obj is None or isinstance(obj, (int, float, bool, np.ndarray)):
        return [obj]
    # tvm_ffi Array / other sequences of tensors
    try:
        items = list(obj)
    except TypeError:
        return [obj]
    return [x for v in items for x in flatten(v)]


def to_numpy(x) -> np.ndarray:
    if hasattr(x, "detach"):  # torch
        import torch  # lazy: numpy and TVM values convert without loading torch

        x = x.detach().cpu()
        if x.dtype == torch.bfloat16:
            x = x.float()
        return x.numpy()
    if hasattr(x, "numpy"):
        return np.asarray(x.numpy())
    return np.asarray(x)


def to_tvm(t, dev):
    import torch  # lazy: numpy and TVM values convert without loading torch

    if isinstance(t, torch.Tensor):
        t = t.detach().cpu().contiguous()
        if t.dtype == torch.bfloat16:  # numpy has no bfloat16: go through DLPack
            return tvm.runtime.from_dlpack(t)
        return tvm.runtime.tensor(t.numpy(), dev)
    if isinstance(t, np.ndarray):
        return tvm.runtime.tensor(t, dev)
    return t  # python scalars: passed as-is (R.Prim / R.Shape params)


def tolerances(ref: np.ndarray) -> tuple[float, float]:
    if ref.dtype in (np.float16,):
        return 1e-2, 1e-2
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    if not np.isfinite(scale):
        scale = 1.0
    return 1e-4, 1e-4 * max(1.0, scale)


def compare(got: np.ndarray, ref: np.ndarray) -> dict:
    rec = {"shape": tuple(ref.shape), "dtype": str(ref.dtype)}
    if not np.issubdtype(ref.dtype, np.floating):
        eq = bool(np.array_equal(got, ref))
        diff = np.abs(got.astype(np.float64) - ref.astype(np.float64)) if ref.size else np.zeros(0)
        rec.update(max_abs=float(diff.max()) if diff.size else 0.0, max_rel=0.0 if eq else float("inf"),
                   allclose=eq, rtol=0.0, atol=0.0)
        return rec
    rtol, atol = tolerances(ref)
    g = got.astype(np.float64)
    r = ref.astype(np.float64)
    diff = np.abs(g - r)
    # nan in both places counts as equal (np.allclose equal_nan); elsewhere nan -> inf error
    both_nan = np.isnan(g) & np.isnan(r)
    diff = np.where(both_nan, 0.0, np.where(np.isnan(diff), np.inf, diff))
    max_abs = float(diff.max()) if diff.size else 0.0
    mask = np.abs(r) > atol
    max_rel = float((diff[mask] / np.abs(r[mask])).max()) if mask.any() else 0.0
    ok = bool(np.allclose(g, r, rtol=rtol, atol=atol, equal_nan=True))
    rec.update(max_abs=max_abs, max_rel=max_rel, allclose=ok, rtol=rtol, atol=atol)
    return rec
