"""Run a built module that has no PyTorch model behind it (an opened TVMScript step file).

There is nothing to compare with, so this only times `main` on random inputs of the parameter
types and reports per-kernel times; the result says plainly that no reference was available.
"""
from __future__ import annotations

import statistics
import time

import numpy as np
import tvm
from tvm import relax

from irviz.core.backend.build import RunResult, _kernel_times, _run_hint, _tb, tvm_threads
from irviz.core.errors import RunError, tvm_error_text


def random_inputs(mod, seed: int = 0) -> list[np.ndarray]:
    """One random array per parameter of main; RunError when a shape is symbolic."""
    rng = np.random.default_rng(seed)
    arrays = []
    for p in mod["main"].params:
        ty = p.ty
        if not isinstance(ty, relax.TensorType) or ty.shape is None:
            raise RunError(f"parameter {p.name} of main is not a tensor with a known shape ({ty})",
                           "only modules whose main takes tensors of static shape run without a model")
        dims = []
        for d in ty.shape.values:
            if not isinstance(d, tvm.tirx.IntImm):
                raise RunError(f"parameter {p.name} has a symbolic dimension {d}",
                               "open the model file instead: its example inputs fix the sizes")
            dims.append(int(d))
        dtype = str(ty.dtype)
        if dtype.startswith("float"):
            arrays.append(rng.standard_normal(dims).astype(dtype))
        elif dtype == "bool":
            arrays.append(rng.integers(0, 2, dims).astype(bool))
        else:
            arrays.append(rng.integers(0, 8, dims).astype(dtype))
    return arrays


def run_without_reference(build_result, repeats: int = 10) -> RunResult:
    """Time main on random inputs; errors are NaN and allclose is None (no reference)."""
    dev = tvm.cpu()
    inputs = [tvm.runtime.tensor(a) for a in random_inputs(build_result.mod)]
    try:
        main = relax.VirtualMachine(build_result.executable, dev)["main"]
        main(*inputs)
        times = []
        for _ in range(max(1, int(repeats))):
            t0 = time.perf_counter()
            main(*inputs)
            times.append(time.perf_counter() - t0)
    except Exception as exc:  # noqa: BLE001
        msg = tvm_error_text(exc)
        raise RunError(f"running main failed: {msg}", _run_hint(msg), detail=_tb(exc)) from exc
    return RunResult(
        max_abs_error=float("nan"), max_rel_error=float("nan"), allclose=None, outputs=0,
        tvm_ms=statistics.median(times) * 1e3, torch_ms=float("nan"),
        kernels=_kernel_times(build_result, dev, inputs, runs=min(repeats, 3)),
        threads=tvm_threads(), repeats=repeats,
    )
