"""Latency across a pipeline: build and time the model at every step (charted by views.latency_chart).

    trace = latency_trace(session, loaded)          # one dict per step

``latency_trace`` builds every recorded step of the session and runs it against PyTorch
(``run.build_and_run``: whatever is left of ``default_build``, ``tvm.compile``, then torch eager and
TVM interleaved, median of ``repeats`` each).  A step that cannot be built or run
gets ``ok: False`` and the error message; the trace goes on with the next step.

Steps whose module did not change are not built again: results are keyed by a structural hash of
the module (``diff.function_hashes``: cached per function, weights hashed once), so a pass that
changed nothing, or a module seen before (``cache=`` kept across calls, as the engine does), reuses
the earlier figures (``cached: True`` in the entry).

Entry: ``{step, pass, ok, tvm_ms, torch_ms, max_abs_error, allclose, build_seconds, error,
threads, cached}``; ``tvm_ms``/``torch_ms``/... are None when the step could not be built/run.
``allclose`` is None for a session without a PyTorch model (an opened TVMScript step).
"""
from __future__ import annotations

import math

from irviz.core.backend import prim_run
from irviz.core.backend.run import build_and_run
from irviz.core.errors import IrvizError, tvm_error_text
from irviz.core.views import module_diff as diff_mod

__all__ = ["latency_trace", "module_key"]


def module_key(mod) -> int:
    """A structural hash of the whole module (order of functions does not matter)."""
    return hash(tuple(sorted(diff_mod.function_hashes(mod).items()))) & 0xFFFFFFFFFFFFFFFF


def _finite(x):
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _measure(mod, loaded, repeats: int, params=None, target=None) -> dict:
    """Build + run one module; never raises (the error goes into the entry)."""
    out = {"ok": False, "tvm_ms": None, "torch_ms": None, "max_abs_error": None, "allclose": None,
           "build_seconds": None, "threads": None, "error": None}

    def built(br):
        out["build_seconds"] = _finite(br.seconds)

    prim = prim_run.resolve_func(mod, "main") if loaded is None else "main"
    try:
        if prim_run.is_prim_func(mod, prim):  # a PrimFunc-only module: its function alone
            br = prim_run.build_prim(mod, prim)
            built(br)
            res = prim_run.run_prim(br, prim_run.prim_args(mod, prim), repeats=repeats)
        else:
            _, res = build_and_run(mod, loaded, repeats=repeats, on_built=built, params=params, target=target)
    except Exception as exc:  # an unbuildable step is a result, not a failure
        msg = exc.message if isinstance(exc, IrvizError) else tvm_error_text(exc, with_type=True)
        out["error"] = msg.strip().splitlines()[0][:300] if msg.strip() else type(exc).__name__
        out["error_detail"] = msg[:4000]
        return out
    out.update(ok=True, tvm_ms=_finite(res.tvm_ms), torch_ms=_finite(res.torch_ms),
               max_abs_error=_finite(res.max_abs_error),
               allclose=None if loaded is None else bool(res.allclose),
               threads=getattr(res, "threads", None))
    return out


def latency_trace(session, loaded, steps=None, repeats: int = 10, progress=None, *,
                  cache: dict | None = None, params: dict | None = None, target=None) -> list[dict]:
    """Build and time every step of ``session`` (or the indices in ``steps``).

    loaded: the LoadedModel (PyTorch reference; None = run without a reference, no torch line).
    progress(text, fraction): called before each step and once at the end.
    cache: {module hash: measurement} kept by the caller across calls (a new dict when None).
    params: weights main still takes as parameters (--keep-params), fed after the inputs.
    target: what each step is built for (a CPU this machine runs; None: the host).
    """
    n = len(session.steps)
    if steps is None or steps == "all":
        indices = list(range(n))
    else:
        indices = sorted({(int(i) + n) % n if int(i) < 0 else int(i) for i in steps})
        bad = [i for i in indices if not 0 <= i < n]
        if bad:
            raise IndexError(f"no step {bad[0]}: the session has steps 0..{n - 1}")
    cache = {} if cache is None else cache
    repeats = max(1, int(repeats))
    out: list[dict] = []
    for k, i in enumerate(indices):
        st = session.steps[i]
        if progress is not None:
            progress(f"Latency: building and timing step {i} ({st.pass_name}), {k + 1}/{len(indices)}",
                     k / max(1, len(indices)))
        try:
            key = (module_key(st.mod), str(target))  # the same module built for another CPU is another figure
        except Exception:  # no hash: just measure
            key = None
        hit = cache.get(key) if key is not None else None
        if hit is None:
            hit = _measure(st.mod, loaded, repeats, params, target)
            if key is not None:
                cache[key] = hit
            cached = False
        else:
            cached = True
        entry = {"step": i, "pass": st.pass_name, **{k2: v for k2, v in hit.items()}, "cached": cached}
        out.append(entry)
    if progress is not None:
        progress("Latency: done", 1.0)
    return out
