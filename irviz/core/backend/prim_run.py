"""Run one PrimFunc on its own, as the TensorIR chapter does: ``rt_mod["mm"](a, b, c)``.

A module may hold only PrimFuncs (``te.create_prim_func([A, B, C])``, an ``@I.ir_module`` of
``@T.prim_func``s); any module's PrimFunc can be run by name (``--func mm``). The function is built
alone (``tvm.compile`` of a module holding just it, callable by its name in the module), then
called in destination-passing style:

* inputs: the given values (an IR file's get_inputs(), in parameter order) or random arrays;
* outputs: the parameters after the ones get_inputs() gives, else the last parameter (destination
  passing: ``te.create_prim_func([A, B, C])`` writes C); allocated with zeros from the buffer
  shapes. A symbolic size takes its value from the inputs' shapes, else from `dims`
  (``--dim n=128``);
* the result is what the outputs hold after the call, compared with reference(*inputs) if given.
"""
from __future__ import annotations

import time

import numpy as np
import tvm
from tvm import relax, tirx

from irviz.core.backend.build import BuildResult
from irviz.core.backend.outputs import to_numpy
from irviz.core.backend.run import KernelTime, RunResult, tvm_threads
from irviz.core.backend.run import _compare_outputs as compare_outputs
from irviz.core.backend.timing import judge, time_alone
from irviz.core.errors import BuildError, RunError, traceback_text, tvm_error_text
from irviz.core.frontend.inputs import prim_functions
from irviz.core.tvm_compat import as_target, var_name

__all__ = ["is_prim_func", "prim_functions", "resolve_func", "build_prim", "prim_args", "run_prim",
           "PrimArgs"]


def is_prim_func(mod, func: str) -> bool:
    return func in prim_functions(mod)


def resolve_func(mod, func: str | None) -> str:
    """`func`, or for the default "main" of a module with no Relax function and no PrimFunc named
    main, its first PrimFunc (the only one, usually)."""
    func = func or "main"
    if func in [gv.name_hint for gv in mod.get_global_vars()]:
        return func
    if func == "main" and not any(isinstance(f, relax.Function) for f in mod.functions.values()):
        prims = prim_functions(mod)
        if prims:
            return prims[0]
    return func


def build_prim(mod, func: str, target=None) -> BuildResult:
    """Compile PrimFunc `func` of `mod` alone, callable as `func` (te.create_prim_func names every
    function "main" in its global_symbol)."""
    tgt = as_target(target)
    f = mod[func]
    if f.attrs is None or f.attrs.get("global_symbol") != func:
        f = f.with_attr("global_symbol", func)
    one = tvm.IRModule({func: f})
    t0 = time.perf_counter()
    try:
        ex = tvm.compile(one, target=tgt)
    except Exception as exc:
        raise BuildError(f"TVM could not compile the PrimFunc {func}: {tvm_error_text(exc)}",
                         "the TensorIR function does not lower: check its buffers and loops",
                         detail=traceback_text(exc)) from exc
    return BuildResult(executable=ex, seconds=time.perf_counter() - t0, target=str(tgt), mod=mod,
                       lowered=one, passes_run=[], skipped=0, bindings={})


class PrimArgs:
    """The arrays one call takes: `args` in parameter order, `outputs` the indices written."""

    def __init__(self, func: str, args: list[np.ndarray], outputs: list[int], names: list[str]):
        self.func, self.args, self.outputs, self.names = func, args, outputs, names

    @property
    def inputs(self) -> list[np.ndarray]:
        return [a for i, a in enumerate(self.args) if i not in self.outputs]


def prim_args(mod, func: str, given=None, dims: dict | None = None, seed: int = 0) -> PrimArgs:
    """Inputs (`given`, else random) and zero outputs for PrimFunc `func` (see the module doc)."""
    f = mod[func]
    buffers = []
    for p in f.params:
        if not isinstance(p.ty, tirx.BufferType):
            raise RunError(f"{func} takes {var_name(p)} ({p.ty}), which is not a buffer",
                           "irviz runs PrimFuncs whose parameters are all buffers")
        buffers.append(p.ty)
    names = [var_name(p) for p in f.params]
    n = len(buffers)
    if n == 0:
        raise RunError(f"{func} takes no buffers: there is nothing to run and compare",
                       "give the PrimFunc its input and output buffers as parameters")
    if given is not None:
        given = [to_numpy(v) for v in (given if isinstance(given, (list, tuple)) else [given])]
        if len(given) > n:
            raise RunError(f"get_inputs() returned {len(given)} values; {func} takes {n} "
                           f"({', '.join(names)})", f"return the inputs of {func} in order")
    outputs = list(range(len(given), n)) if given is not None and len(given) < n else [n - 1]
    sizes = dict(dims or {})
    for i, v in enumerate(given or ()):
        want = buffers[i].shape
        if len(v.shape) != len(want):
            raise RunError(f"get_inputs(): {names[i]} has shape {tuple(v.shape)}; {func} expects "
                           f"({', '.join(str(d) for d in want)})", f"give {names[i]} that shape")
        for d, s in zip(want, v.shape):
            if isinstance(d, tirx.Var):
                sizes.setdefault(str(d), int(s))
            elif int(d) != int(s):
                raise RunError(f"get_inputs(): {names[i]} has shape {tuple(v.shape)}; {func} expects "
                               f"({', '.join(str(x) for x in want)})", f"give {names[i]} that shape")
    made = [i for i in range(n) if given is None or i >= len(given)]
    missing = sorted({str(d) for i in made for d in buffers[i].shape
                      if not isinstance(d, tirx.IntImm) and str(d) not in sizes})
    if missing:
        example = ",".join(f"{m}=128" for m in missing)
        raise RunError(f"{func} has symbolic sizes with no value: {', '.join(missing)}",
                       f"give them values (irviz check FILE --func {func} --dim {example}), or define "
                       "get_inputs() in the file")
    rng = np.random.default_rng(seed)
    args = []
    for i, b in enumerate(buffers):
        if given is not None and i < len(given):
            args.append(np.ascontiguousarray(given[i]))
            continue
        shape = [int(d) if isinstance(d, tirx.IntImm) else sizes[str(d)] for d in b.shape]
        dtype = str(b.dtype)
        if i in outputs:
            args.append(np.zeros(shape, dtype))
        elif dtype.startswith("float"):
            args.append(rng.standard_normal(shape).astype(dtype))
        else:
            args.append(rng.integers(0, 8, shape).astype(dtype))
    return PrimArgs(func, args, outputs, names)


def call_prim(built: BuildResult, pa: PrimArgs) -> list[np.ndarray]:
    """One call on fresh copies of the arrays: what the outputs hold afterwards."""
    dev = tvm.cpu()
    targs = [tvm.runtime.tensor(a, dev) for a in pa.args]
    try:
        built.executable[pa.func](*targs)
    except Exception as exc:
        raise RunError(f"running {pa.func} failed: {tvm_error_text(exc)}",
                       "the inputs must match the function's buffers (shape and dtype)",
                       detail=traceback_text(exc)) from exc
    return [targs[i].numpy() for i in pa.outputs]


def run_prim(built: BuildResult, pa: PrimArgs, *, reference=None, repeats: int = 10):
    """Call, compare with `reference` (the expected outputs) if given, and time the function."""
    got = call_prim(built, pa)
    dev = tvm.cpu()
    targs = [tvm.runtime.tensor(a, dev) for a in pa.args]
    fn = built.executable[pa.func]
    timing = time_alone(lambda: fn(*targs), max(1, int(repeats)), warmup=0, settle=0)
    per_output = []
    if reference is not None:
        per_output = compare_outputs(
            got if len(got) != 1 else got[0], reference, "reference()",
            count_hint=f"{pa.func} writes {', '.join(pa.names[i] for i in pa.outputs)}: reference() "
                       "returns one array per output buffer",
            shape_hint="reference() must return what the function writes")
    nan = float("nan")
    reliable, reason = judge({"TVM": timing}, tvm_threads())
    return RunResult(
        max_abs_error=max((o["max_abs"] for o in per_output), default=nan),
        max_rel_error=max((o["max_rel"] for o in per_output), default=nan),
        allclose=all(o["allclose"] for o in per_output) if per_output else None,
        outputs=len(per_output), tvm_ms=timing.median_ms, torch_ms=nan, tvm_timing=timing.as_dict(),
        reliable=reliable, reason=reason,
        kernels=[KernelTime(name=pa.func, calls=1, ms=timing.median_ms, binding=None)],
        threads=tvm_threads(), repeats=int(repeats), per_output=per_output, func=pa.func)
