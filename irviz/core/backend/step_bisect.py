"""Bisect a pipeline to the first step whose build gives wrong numbers, or fails to build or run.

    ref = reference_for(ws)                       # inputs + expected outputs, computed once
    result = bisect(ws.session, ref, progress=...)
    result.first_bad                              # StepCheck of the first bad step, or None

Only the steps that changed the module are candidates (an unchanged step builds the same module
as the step before it). The last changed step is checked first: when it matches, every step is
taken to match and a correct pipeline costs one build. Otherwise step 0 (the import) is checked,
then a binary search between the last good and the first bad candidate, which assumes that a wrong
module stays wrong through later passes (what bisecting a pass pipeline always assumes).

A pass that failed to apply (the session's error) is the first bad step, stage "pass", when every
recorded step before it matches.

Each check builds the step (``build.build``: whatever is left of default_build), runs ``main``
once on the reference inputs and compares every output: stage "build", "run" or "compare" says
where it went wrong. No timing: a bisect wants the verdict, not the speed.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from irviz.core.backend import build as build_mod
from irviz.core.backend import prim_run
from irviz.core.backend.outputs import flatten as _flatten
from irviz.core.backend.outputs import to_numpy as _to_numpy
from irviz.core.backend.outputs import to_tvm as _to_tvm
from irviz.core.backend.outputs import tolerances as _tolerances
from irviz.core.errors import IrvizError, RunError, tvm_error_text
from irviz.core.tvm_compat import var_name
from irviz.core.user_code import exception_line

__all__ = ["Reference", "StepCheck", "BisectResult", "reference_for", "check_module", "bisect",
           "module_inputs"]


@dataclass
class Reference:
    inputs: list            # main's leading arguments: numpy arrays (or python scalars)
    expected: list          # numpy arrays: the reference's outputs, flattened in order
    what: str               # "torch", "reference()" or "step 0" (no reference: the import's outputs)
    params: dict = field(default_factory=dict)  # weights main may still take by name (--keep-params)
    input_names: list = field(default_factory=list)


@dataclass
class StepCheck:
    index: int
    pass_name: str
    ok: bool
    stage: str | None = None      # None when ok; "build" | "run" | "compare" | "pass"
    reason: str = ""
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return {"index": self.index, "pass": self.pass_name, "ok": self.ok, "stage": self.stage,
                "reason": self.reason or None, "max_abs_error": _finite(self.max_abs_error),
                "max_rel_error": _finite(self.max_rel_error), "seconds": round(self.seconds, 3)}


@dataclass
class BisectResult:
    first_bad: StepCheck | None
    checked: list[StepCheck]       # in the order they were checked
    reference: str
    candidates: list[int]          # step indices that changed the module (0 included)
    seconds: float = 0.0

    def as_dict(self) -> dict:
        fb = self.first_bad
        return {
            "first_bad": None if fb is None else {
                "index": fb.index, "pass": fb.pass_name, "stage": fb.stage,
                "max_abs_error": _finite(fb.max_abs_error), "reason": fb.reason},
            "steps_checked": [c.as_dict() for c in self.checked],
            "reference": self.reference, "candidates": list(self.candidates),
            "seconds": round(self.seconds, 3),
        }


def _finite(x):
    if x is None:
        return None
    x = float(x)
    return x if np.isfinite(x) else None


def _numpy_outputs(obj) -> list[np.ndarray]:
    return [_to_numpy(x) for x in _flatten(obj) if x is not None]


def reference_for(ws, func: str = "main") -> Reference:
    """Inputs and expected outputs of the open model: PyTorch's outputs on the example inputs, an
    IR file's reference() on its inputs, or (no reference at all) what step 0 computes."""
    session = ws.need_session()
    if ws.loaded is not None:
        import torch

        ws.need_weights("bisecting (it runs the model)")

        example = tuple(ws.loaded.example_inputs)
        with torch.no_grad():
            out = ws.loaded.module(*example)
        tensors = [x for x in example if not isinstance(x, (int, float, bool, str))]
        inputs = [t.detach().cpu().numpy() if hasattr(t, "detach") else np.asarray(t) for t in tensors]
        params = {k: np.asarray(v) for k, v in (ws.kept_params or {}).items()}
        return Reference(inputs=inputs, expected=_numpy_outputs(out), what="torch", params=params,
                         input_names=[f"input_{i}" for i in range(len(inputs))])
    step0 = session.steps[0].mod
    func = prim_run.resolve_func(step0, func)
    if prim_run.is_prim_func(step0, func):
        return _prim_reference(ws, step0, func)
    named = ws._ir_named_inputs(step0, func)
    if named is None:  # repeated parameter names: by position, as step 0 takes them
        inputs, params = [_as_array(x) for x in ws._ir_inputs(step0, func)], {}
    else:  # by name: a step that bound some of them (BindParams) takes the others
        inputs, params = [], {k: _as_array(v) for k, v in named.items()}
    names = [f"input_{i}" for i in range(len(inputs))]
    if ws.ir_file is not None and ws.ir_file.reference is not None:
        args = [_as_array(x) for x in ws._ir_reference_inputs(step0, func)]
        try:
            out = ws.ir_file.reference(*args)
        except Exception as exc:
            raise RunError(f"reference() raised {exception_line(exc)}",
                           "run the file in plain Python to see the full error") from exc
        return Reference(inputs=inputs, expected=_numpy_outputs(out), what="reference()",
                         params=params, input_names=names)
    first = check_module(step0, Reference(inputs, [], "none", params=params), func=func)
    if not first.ok:
        raise RunError(f"there is no reference to compare with, and step 0 (the import) does not run: "
                       f"{first.reason}", "open a model file, or give the IR file a reference()")
    return Reference(inputs=inputs, expected=first._outputs, what="step 0", params=params,
                     input_names=names)


def _prim_reference(ws, mod, func: str) -> Reference:
    """A PrimFunc's inputs (get_inputs() or random) and reference(*inputs), else what step 0's
    function writes."""
    from irviz.core.frontend.ir_file import raw_inputs

    inputs = prim_run.prim_args(mod, func, raw_inputs(ws.ir_file), ws.dims).inputs
    if ws.ir_file is not None and ws.ir_file.reference is not None:
        try:
            out = ws.ir_file.reference(*inputs)
        except Exception as exc:
            raise RunError(f"reference() raised {exception_line(exc)}",
                           "run the file in plain Python to see the full error") from exc
        return Reference(inputs=inputs, expected=_numpy_outputs(out), what="reference()")
    first = check_module(mod, Reference(inputs, [], "none"), func=func)
    if not first.ok:
        raise RunError(f"there is no reference to compare with, and step 0 does not run: "
                       f"{first.reason}", "give the IR file a reference()")
    return Reference(inputs=inputs, expected=first._outputs, what="step 0")


def _as_array(x):
    return x.numpy() if hasattr(x, "numpy") and not isinstance(x, np.ndarray) else x


def module_inputs(mod, ref: Reference, func: str = "main") -> list:
    """The arguments `func` of `mod` takes: the reference inputs, then kept weights by name."""
    names = [var_name(p) for p in mod[func].params]
    args = list(ref.inputs)
    if len(names) < len(args):
        raise RunError(f"{func} takes {len(names)} parameters, the reference has {len(args)} inputs",
                       "the step changed main's signature")
    for n in names[len(args):]:
        if n not in ref.params:
            raise RunError(f"{func} takes a parameter {n} that neither the inputs nor the kept "
                           "weights give", "bind the weights (BindParams) or open with --keep-params")
        args.append(ref.params[n])
    return args


def tolerances(expected: np.ndarray, atol=None, rtol=None) -> tuple[float, float]:
    """(atol, rtol) for one output: the given ones, else run.py's (atol scales with the output)."""
    if not np.issubdtype(expected.dtype, np.floating):
        return 0.0, 0.0
    r_default, a_default = _tolerances(expected)
    return (a_default if atol is None else float(atol)), (r_default if rtol is None else float(rtol))


def compare(got: list[np.ndarray], expected: list[np.ndarray], atol=None, rtol=None):
    """(ok, max abs error, max rel error, reason) of outputs against expected ones."""
    if len(got) != len(expected):
        return False, float("inf"), float("inf"), f"{len(got)} outputs, the reference has {len(expected)}"
    ok, max_abs, max_rel, reasons = True, 0.0, 0.0, []
    for i, (g, r) in enumerate(zip(got, expected)):
        if g.shape != r.shape and g.size == r.size == 1:
            g = g.reshape(r.shape)
        if g.shape != r.shape:
            return False, float("inf"), float("inf"), f"output {i}: shape {g.shape}, expected {r.shape}"
        a, rt = tolerances(r, atol, rtol)
        gd, rd = g.astype(np.float64), r.astype(np.float64)
        diff = np.abs(gd - rd)
        diff = np.where(np.isnan(gd) & np.isnan(rd), 0.0, np.where(np.isnan(diff), np.inf, diff))
        m = float(diff.max()) if diff.size else 0.0
        mask = np.abs(rd) > a
        rel = float((diff[mask] / np.abs(rd[mask])).max()) if mask.any() else 0.0
        max_abs, max_rel = max(max_abs, m), max(max_rel, rel)
        if not np.allclose(gd, rd, atol=a, rtol=rt, equal_nan=True):
            ok = False
            reasons.append(f"output {i} differs: max abs error {m:.3g} (atol {a:.3g}, rtol {rt:.3g})")
    return ok, max_abs, max_rel, "; ".join(reasons)


def check_module(mod, ref: Reference, *, index: int = 0, pass_name: str = "", atol=None, rtol=None,
                 func: str = "main", target=None) -> StepCheck:
    """Build `mod` (for `target`, a CPU this machine runs; None: the host), run `func` once on the
    reference inputs, compare. Never raises: the verdict says in which stage it went wrong."""
    import tvm
    from tvm import relax

    def text(exc):
        return exc.message if isinstance(exc, IrvizError) else tvm_error_text(exc, with_type=True)

    t0 = time.perf_counter()
    chk = StepCheck(index=index, pass_name=pass_name, ok=False)
    func = prim_run.resolve_func(mod, func)
    prim = prim_run.is_prim_func(mod, func)
    try:
        built = prim_run.build_prim(mod, func) if prim else build_mod.build(mod, target)
    except Exception as exc:  # an unbuildable step is a verdict
        chk.stage, chk.reason = "build", text(exc)
        chk.seconds = time.perf_counter() - t0
        return chk
    try:
        if prim:
            got = prim_run.call_prim(built, prim_run.prim_args(mod, func, ref.inputs))
        else:
            dev = tvm.cpu()
            args = [_to_tvm(x, dev) for x in module_inputs(mod, ref, func)]
            out = relax.VirtualMachine(built.executable, dev)[func](*args)
            got = _numpy_outputs(out)
    except Exception as exc:
        chk.stage, chk.reason = "run", text(exc)
        chk.seconds = time.perf_counter() - t0
        return chk
    chk._outputs = got
    if not ref.expected:  # only the outputs were wanted
        chk.ok = True
    else:
        ok, chk.max_abs_error, chk.max_rel_error, reason = compare(got, ref.expected, atol, rtol)
        chk.ok = ok
        if not ok:
            chk.stage, chk.reason = "compare", f"outputs differ from {ref.what}: {reason}"
    chk.seconds = time.perf_counter() - t0
    return chk


def bisect(session, ref: Reference, *, atol=None, rtol=None, progress=None, func: str = "main",
           target=None) -> BisectResult:
    """The first step of `session` that builds, runs or computes wrong (see the module doc), each
    step built for `target` (None: the host)."""
    t0 = time.perf_counter()
    steps = session.steps
    candidates = [0] + [st.index for st in steps[1:] if st.changed]
    checked: list[StepCheck] = []
    seen: dict[int, StepCheck] = {}

    def verdict(i: int) -> StepCheck:
        if i in seen:
            return seen[i]
        st = steps[i]
        if progress is not None:
            progress(f"Bisect: building and running step {i} ({st.pass_name}), check {len(checked) + 1}",
                     min(0.95, len(checked) / max(2, len(candidates).bit_length() + 2)), st.pass_name)
        c = check_module(st.mod, ref, index=i, pass_name=st.pass_name, atol=atol, rtol=rtol, func=func,
                         target=target)
        seen[i] = c
        checked.append(c)
        return c

    def done(first_bad):
        return BisectResult(first_bad, checked, ref.what, candidates, time.perf_counter() - t0)

    last = verdict(candidates[-1])
    if last.ok:
        err = session.error
        if err is not None and session.pipeline:
            failed = StepCheck(index=len(steps), pass_name=session.pipeline[0].name, ok=False,
                               stage="pass", reason=getattr(err, "message", str(err)))
            return done(failed)
        return done(None)
    if len(candidates) == 1 or not verdict(0).ok:
        return done(seen[0])
    lo, hi = 0, len(candidates) - 1  # candidates[lo] matches, candidates[hi] does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if verdict(candidates[mid]).ok:
            lo = mid
        else:
            hi = mid
    return done(seen[candidates[hi]])
