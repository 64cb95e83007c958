"""Build any step of a pipeline with TVM and run it against PyTorch.

``build(mod)`` finishes whatever is left of TVM's ``default_build`` pipeline and compiles the
module for the host CPU.  The module may be at any point: a fresh import (high-level ops), after
LegalizeOps / FuseOps / FuseTIR, or part-way through ``default_build`` itself (stepped one pass at
a time in a Session).  How far ``default_build`` already got is read from markers the passes leave
behind (see :func:`default_build_progress`); only the remaining passes run, then
``tvm.compile(..., relax_pipeline=None)``.  If that fails, the whole ``default_build`` is tried
once more (most of its passes are idempotent), and the first error is reported.

``R.ewise_fma`` (the course's op, no legalization in TVM 0.27) is lowered with
``irviz.core.passes.course.CUSTOM_LEGALIZE_MAP`` by the LegalizeOps step of the build.
``irviz.torch.*`` library functions (``irviz.core.passes.library_dispatch``) are registered before building.

``run_and_compare(build_result, loaded)`` runs ``main`` in a ``relax.VirtualMachine`` on the CPU
with the model's example inputs and compares every output with PyTorch eager:

* outputs are flattened on both sides (tuples/lists/dicts; TVM arrays/tuples) and matched in order;
  a count or shape mismatch is a RunError.
* ``max_abs_error`` = max |tvm - torch| over all outputs.
* ``max_rel_error`` = max |tvm - torch| / |torch| over elements with |torch| > atol (near-zero
  reference values say nothing about relative error; the absolute error covers them).
* ``allclose``: float32/float64 outputs use rtol=1e-4 and atol=1e-4 * max(1, max|torch output|)
  (the absolute tolerance follows the output's scale, so deep models whose logits are in the tens
  do not fail on float32 rounding that accumulated over many layers); float16 uses 1e-2;
  integer and bool outputs must be equal.
* timing: ``repeats`` runs, torch eager and ``vm["main"]`` interleaved in the same loop (so machine
  load hits both equally), median of each; one warm-up run of each first.
* kernels: per-kernel time from ``vm.set_instrument`` over ``min(repeats, 3)`` extra runs (kept
  apart from the timed runs, since the instrument adds overhead per call).  ``KernelTime.ms`` is
  the mean total time per run of that kernel, ``calls`` the calls per run.  Only PrimFuncs of the
  built module and ``call_dps_packed`` externs are listed (not ``vm.builtin.*``).
  ``binding`` is the Relax var in ``main`` whose ``call_tir`` / ``call_dps_packed`` (or, after
  CallTIRRewrite, direct call; or call of a fused sub-function that calls it) calls that kernel;
  when several bindings call the same kernel they are joined with ", " in program order.
* threads: ``RunResult.threads`` is TVM's runtime thread count (``TVM_NUM_THREADS`` or TVM's
  default, 1 here; read from ``runtime.NumThreads``); ``torch_threads`` is the torch thread count
  used for the timed runs: by default torch is set to TVM's count while timing (``match_threads``).
"""
from __future__ import annotations

import os
import re
import statistics
import time
import traceback
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
import tvm
import tvm_ffi
from tvm import relax

from irviz.core.errors import BuildError, RunError, tvm_error_text
from irviz.core.passes.registry import DEFAULT_BUILD_STEPS
from irviz.core.tvm_compat import as_target, callee_name, var_name

try:  # the course's ewise_fma legalization lives with the course passes
    from irviz.core.passes.course import CUSTOM_LEGALIZE_MAP, legalize_ewise_fma  # noqa: F401
except ImportError:  # pragma: no cover - course_passes is part of the package
    from tvm import te

    def legalize_ewise_fma(bb, call):
        """FLegalize for relax.ewise_fma: a * b + c as one TE compute."""
        return bb.call_te(
            lambda a, b, c: te.compute(a.shape, lambda *i: a(*i) * b(*i) + c(*i), name="ewise_fma"),
            *call.args,
            primfunc_name_hint="ewise_fma",
        )

    CUSTOM_LEGALIZE_MAP = {"relax.ewise_fma": legalize_ewise_fma}

__all__ = [
    "BuildResult",
    "KernelTime",
    "RunResult",
    "DEFAULT_BUILD_PASSES",
    "alt_inputs",
    "build",
    "default_build_progress",
    "kernel_bindings",
    "run_and_compare",
]

# tvm/relax/pipeline.py default_build_pipeline(), in order: the registry's list, one source of truth
DEFAULT_BUILD_PASSES = DEFAULT_BUILD_STEPS
_LEGALIZE_INDEX = DEFAULT_BUILD_PASSES.index("LegalizeOps")


def _make_pass(name: str) -> tvm.ir.transform.Pass:
    if name == "LegalizeOps":
        return relax.transform.LegalizeOps(customize_legalize_map=dict(CUSTOM_LEGALIZE_MAP))
    if name in ("DispatchSampling", "DispatchSortScan"):
        return getattr(relax.backend, name)()
    return getattr(relax.transform, name)()


# ---------------------------------------------------------------------------------------------
# results


@dataclass
class BuildResult:
    executable: object  # tvm.relax.Executable
    seconds: float
    target: str
    # beyond contracts.md:
    mod: object = None  # the IRModule given to build() (kernel -> binding names come from it)
    lowered: object = None  # the module after the relax passes build() ran (before VM codegen)
    passes_run: list[str] = field(default_factory=list)  # default_build passes build() applied
    skipped: int = 0  # how many leading default_build passes were judged already done
    bindings: dict[str, str] = field(default_factory=dict)  # kernel name -> binding(s) in main


@dataclass
class KernelTime:
    name: str
    calls: int  # calls per run of main
    ms: float  # total ms per run of main (mean over the instrumented runs)
    binding: str | None  # var in main calling it; several joined by ", "


@dataclass
class RunResult:
    max_abs_error: float
    max_rel_error: float
    allclose: bool
    outputs: int
    tvm_ms: float  # median over `repeats`
    torch_ms: float  # median over `repeats`, interleaved with the TVM runs
    kernels: list[KernelTime]  # slowest first
    threads: int  # TVM runtime threads
    # beyond contracts.md:
    torch_threads: int = 0
    repeats: int = 0
    rtol: float = 1e-4
    atol: float = 1e-4  # the largest atol used (it scales with each output's magnitude)
    per_output: list[dict] = field(default_factory=list)  # shape, dtype, max_abs, max_rel, allclose


# ---------------------------------------------------------------------------------------------
# hints


def _build_hint(msg: str) -> str:
    if "cannot emit this Relax operator" in msg or "FLegalize" in msg:
        op = re.search(r"R\.([\w.]+)\(", msg)
        what = f"R.{op.group(1)}" if op else "an operator"
        return (f"{what} has no lowering to TensorIR or a library call. Remove it with a pass, give "
                "LegalizeOps a customize_legalize_map entry for it, or route it to call_dps_packed.")
    if "Cannot find" in msg or "not registered" in msg or "not found" in msg:
        return ("a function the module calls is not registered: register it with "
                "tvm.register_global_func before building/running.")
    if "MakePackedAPI" in msg or "shape lowering" in msg:
        return ("the module is part-way through default_build and the remaining passes could not "
                "finish it; build the step before the last pass you applied.")
    return ("TVM could not finish default_build for this step. Try building an earlier step to "
            "find the pass that produced an unbuildable module.")


def _run_hint(msg: str) -> str:
    if "Cannot find" in msg:
        m = re.search(r"Cannot find (?:ffi::Function|PackedFunc|function) ([\w.]+)", msg)
        name = m.group(1) if m else "a function"
        return (f"{name} is called through call_dps_packed/call_packed but is not registered in "
                "this process: register it with tvm.register_global_func before running.")
    if "Check failed" in msg and ("shape" in msg.lower() or "ndim" in msg or "dtype" in msg):
        return "the inputs do not match main's parameter types (shape/dtype)."
    return "the compiled module failed at run time; try an earlier step to find the pass that broke it."


# ---------------------------------------------------------------------------------------------
# how far default_build got


_OPS_AFTER = (
    # (marker op / extern prefix, number of default_build passes done when it is present)
    ("vm.builtin.check_tensor_info", 14),  # VMShapeLower
    ("vm.builtin.match_shape", 14),
    ("vm.builtin.check_tuple_info", 14),
    ("vm.builtin.check_shape_info", 14),
    ("vm.builtin.check_prim_value_info", 14),
    ("relax.vm.alloc_storage", 12),  # LowerRuntimeBuiltin
    ("relax.vm.alloc_tensor", 12),
    ("relax.vm.kill_object", 12),
    ("relax.vm.call_tir_dyn", 12),
    ("relax.memory.kill_tensor", 11),  # KillAfterLastUse
    ("relax.memory.kill_storage", 11),
    ("relax.memory.alloc_storage", 8),  # StaticPlanBlockMemory (RewriteCUDAGraph is a no-op on CPU)
    ("relax.memory.alloc_tensor", 8),
    ("relax.builtin.alloc_tensor", 7),  # CallTIRRewrite
)


def _module_facts(mod) -> tuple[set[str], set[str], bool, bool]:
    """(op names, extern symbols, any relax function has relax.force_pure, any dataflow block)."""
    ops: set[str] = set()
    externs: set[str] = set()
    force_pure = False
    dataflow = False

    def visit(e):
        nonlocal dataflow
        if isinstance(e, relax.Call):
            if isinstance(e.op, tvm.ir.Op):
                ops.add(e.op.name)
        elif isinstance(e, relax.ExternFunc):
            externs.add(str(e.global_symbol))
        elif isinstance(e, relax.SeqExpr):
            if any(isinstance(b, relax.DataflowBlock) for b in e.blocks):
                dataflow = True

    for func in mod.functions.values():
        if isinstance(func, relax.Function):
            if func.attrs is not None and "relax.force_pure" in func.attrs.keys():
                force_pure = force_pure or bool(func.attrs["relax.force_pure"])
            relax.analysis.post_order_visit(func, visit)
    return ops, externs, force_pure, dataflow


def default_build_progress(mod) -> int:
    """How many leading default_build passes `mod` has been through, judged from their markers.

    0 = none (or only passes that leave no trace and are safe to run again).  The early passes
    (Dispatch*, LegalizeOps, RewriteDataflowReshape, ToNonDataflow) are idempotent, so 0 is the safe
    answer whenever no later marker is present.
    """
    ops, externs, force_pure, _ = _module_facts(mod)
    present = ops | externs
    done = 0
    for marker, n in _OPS_AFTER:
        if marker in present:
            done = max(done, n)
    if done == 0 and force_pure:
        done = DEFAULT_BUILD_PASSES.index("RemovePurityChecking") + 1
    return done


def _register_library_functions(mod) -> None:
    try:
        from irviz.core.passes import library_dispatch as dispatch
    except ImportError:  # pragma: no cover
        return
    try:
        dispatch.register_library_functions(mod)
    except Exception:  # unknown irviz.torch.* name: let the build/run report it
        pass


# ---------------------------------------------------------------------------------------------
# build


def _lower(mod, target, start: int) -> tuple[object, list[str], object]:
    """Run default_build[start:] one pass at a time (LegalizeOps with the ewise_fma map)."""
    names = list(DEFAULT_BUILD_PASSES[start:])
    ops, _, _, _ = _module_facts(mod) if start > _LEGALIZE_INDEX else (set(), None, None, None)
    if any(op in CUSTOM_LEGALIZE_MAP for op in ops):
        names.insert(0, "LegalizeOps")
    cur = mod
    before_rewrite = None  # last module whose main still has call_tir (binding names intact)
    with target:
        for name in names:
            if name == "CallTIRRewrite":
                before_rewrite = cur
            try:
                cur = _make_pass(name)(cur)
            except Exception as exc:  # noqa: BLE001 - every TVM failure becomes a BuildError
                raise _PassFailed(name, exc) from exc
    return cur, names, before_rewrite


class _PassFailed(Exception):
    def __init__(self, name, exc):
        super().__init__(name)
        self.name, self.exc = name, exc


def build(mod, target=None) -> BuildResult:
    """Finish default_build from wherever `mod` is and compile it for `target` (host CPU).

    Raises BuildError with TVM's message (the pass that failed, if it was a pass) and a hint.
    """
    if not isinstance(mod, tvm.IRModule):
        raise BuildError(f"build() needs a tvm.IRModule, got {type(mod).__name__}",
                         "pass the module of a pipeline step (Session.module(i)).")
    if "main" not in [gv.name_hint for gv in mod.get_global_vars()]:
        raise BuildError("the module has no 'main' function", "build a module imported from a model.")
    tgt = as_target(target)
    _register_library_functions(mod)
    t0 = time.perf_counter()
    start = default_build_progress(mod)
    attempts = [start] + ([0] if start > 0 else [])
    first_error = None
    for attempt in attempts:
        try:
            lowered, names, before_rewrite = _lower(mod, tgt, attempt)
            ex = tvm.compile(lowered, target=tgt, relax_pipeline=None)
        except _PassFailed as pf:
            err = (f"default_build pass {pf.name} failed: {tvm_error_text(pf.exc)}",
                   _tb(pf.exc))
        except Exception as exc:  # noqa: BLE001
            err = (f"TVM could not compile the module: {tvm_error_text(exc)}", _tb(exc))
        else:
            seconds = time.perf_counter() - t0
            # names the user sees in `mod` first; kernels created by the build's LegalizeOps get
            # the var names of the high-level ops they replace (before CallTIRRewrite drops them)
            bindings = kernel_bindings(mod)
            for m in (before_rewrite, lowered):
                if m is not None:
                    for k, v in kernel_bindings(m).items():
                        bindings.setdefault(k, v)
            return BuildResult(executable=ex, seconds=seconds, target=str(tgt), mod=mod,
                               lowered=lowered, passes_run=names, skipped=attempt,
                               bindings=bindings)
        if first_error is None:
            first_error = err
    message, detail = first_error
    raise BuildError(message, _build_hint(message), detail=detail)


def _tb(exc) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


# ---------------------------------------------------------------------------------------------
# kernel -> binding


_CALL_OPS = ("relax.call_tir", "relax.call_dps_packed", "relax.call_tir_inplace",
             "relax.call_tir_with_grad", "relax.call_pure_packed", "relax.call_inplace_packed")


def _callees(call, mod, seen) -> list[str]:
    """Kernels (PrimFunc names / extern symbols) a call reaches; recurses into relax sub-functions."""
    if not isinstance(call, relax.Call):
        return []
    if isinstance(call.op, tvm.ir.Op):
        if call.op.name in _CALL_OPS and call.args:
            name = callee_name(call.args[0])
            return [name] if name else []
        if call.op.name == "relax.vm.call_tir_dyn" and call.args:
            name = callee_name(call.args[0])
            return [name] if name else []
        return []
    name = callee_name(call.op)
    if name is None:
        return []
    if isinstance(call.op, tvm.ir.GlobalVar) and call.op in mod.get_global_vars():
        func = mod[call.op]
        if isinstance(func, relax.Function):  # fused sub-function (before FuseTIR)
            if name in seen:
                return []
            seen = seen | {name}
            found: list[str] = []

            def visit(e):
                for k in _callees(e, mod, seen):
                    if k not in found:
                        found.append(k)

            relax.analysis.post_order_visit(func.body, visit)
            return found
    return [name]


def _is_dps_direct_call(call, mod) -> bool:
    """A lowered (destination-passing) call: `prim_func(in..., out)` or `R.call_packed(extern, ..., out)`."""
    if not isinstance(call, relax.Call) or not call.args:
        return False
    if isinstance(call.op, relax.ExternFunc):
        return True
    if isinstance(call.op, tvm.ir.GlobalVar) and call.op in mod.get_global_vars():
        return isinstance(mod[call.op], tvm.tirx.PrimFunc)
    if isinstance(call.op, tvm.ir.Op) and call.op.name == "relax.vm.call_tir_dyn":
        return False
    return False


def kernel_bindings(mod, func: str = "main") -> dict[str, str]:
    """kernel name -> the var(s) in `func` whose binding calls it (", "-joined, program order).

    Before CallTIRRewrite that is the var bound to ``R.call_tir(...)`` / ``R.call_dps_packed``
    (or to the call of a fused sub-function reaching the kernel); after it, kernels are called in
    destination-passing style (``_ = add(x, y, alloc)``), and the output buffer's var names them.
    """
    if func not in [gv.name_hint for gv in mod.get_global_vars()]:
        return {}
    fn = mod[func]
    if not isinstance(fn, relax.Function):
        return {}
    out: dict[str, list[str]] = defaultdict(list)

    def walk(expr):
        if isinstance(expr, relax.SeqExpr):
            for block in expr.blocks:
                for b in block.bindings:
                    value = b.value
                    kernels = _callees(value, mod, frozenset())
                    name = var_name(b.var)
                    if kernels and _is_dps_direct_call(value, mod) and isinstance(value.args[-1], relax.Var):
                        # after CallTIRRewrite: `_ = add(x, y, alloc)`; the output buffer names it
                        name = var_name(value.args[-1])
                    for k in kernels:
                        if k.startswith("vm.builtin."):
                            continue
                        if name not in out[k]:
                            out[k].append(name)
                    if isinstance(value, (relax.If, relax.SeqExpr)):
                        walk(value)
            walk(expr.body)
        elif isinstance(expr, relax.If):
            walk(expr.true_branch)
            walk(expr.false_branch)

    walk(fn.body)
    return {k: ", ".join(v) for k, v in out.items()}


# ---------------------------------------------------------------------------------------------
# run and compare


def _flatten(obj) -> list:
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in _flatten(v)]
    if isinstance(obj, (list, tuple)):
        return [x for v in obj for x in _flatten(v)]
    if hasattr(obj, "numpy") or obj is None or isinstance(obj, (int, float, bool, np.ndarray)):
        return [obj]
    # tvm_ffi Array / other sequences of tensors
    try:
        items = list(obj)
    except TypeError:
        return [obj]
    return [x for v in items for x in _flatten(v)]


def _to_numpy(x) -> np.ndarray:
    if hasattr(x, "detach"):  # torch
        import torch

        x = x.detach().cpu()
        if x.dtype == torch.bfloat16:
            x = x.float()
        return x.numpy()
    if hasattr(x, "numpy"):
        return np.asarray(x.numpy())
    return np.asarray(x)


def _to_tvm(t, dev):
    import torch

    if isinstance(t, torch.Tensor):
        t = t.detach().cpu().contiguous()
        if t.dtype == torch.bfloat16:  # numpy has no bfloat16: go through DLPack
            return tvm.runtime.from_dlpack(t)
        return tvm.runtime.tensor(t.numpy(), dev)
    if isinstance(t, np.ndarray):
        return tvm.runtime.tensor(t, dev)
    return t  # python scalars: passed as-is (R.Prim / R.Shape params)


def _tolerances(ref: np.ndarray) -> tuple[float, float]:
    if ref.dtype in (np.float16,):
        return 1e-2, 1e-2
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    if not np.isfinite(scale):
        scale = 1.0
    return 1e-4, 1e-4 * max(1.0, scale)


def _compare(got: np.ndarray, ref: np.ndarray) -> dict:
    rec = {"shape": tuple(ref.shape), "dtype": str(ref.dtype)}
    if not np.issubdtype(ref.dtype, np.floating):
        eq = bool(np.array_equal(got, ref))
        diff = np.abs(got.astype(np.float64) - ref.astype(np.float64)) if ref.size else np.zeros(0)
        rec.update(max_abs=float(diff.max()) if diff.size else 0.0, max_rel=0.0 if eq else float("inf"),
                   allclose=eq, rtol=0.0, atol=0.0)
        return rec
    rtol, atol = _tolerances(ref)
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


def _main_params(mod) -> list[str] | None:
    if mod is None or "main" not in [gv.name_hint for gv in mod.get_global_vars()]:
        return None
    fn = mod["main"]
    return [var_name(p) for p in fn.params] if isinstance(fn, relax.Function) else None


# TVM's runtime starts one worker per core only when told to (it used 1 here); torch uses every core.
# The pool reads this when it starts, i.e. at the first run after this module is imported.
os.environ.setdefault("TVM_NUM_THREADS", str(os.cpu_count() or 1))


def tvm_threads() -> int:
    try:
        return int(tvm.get_global_func("runtime.NumThreads")())
    except Exception:  # pragma: no cover
        return 0


def alt_inputs(loaded) -> tuple | None:
    """The model file's second input set (``get_alt_inputs()``), or None.

    Uses ``loaded.alt_inputs`` when the loader stored it; otherwise calls ``get_alt_inputs()``
    of the model file's latest load (a model with dynamic shapes gives other sizes there, so one
    build can be checked on two sizes: ``run_and_compare(br, loaded, inputs=alt_inputs(loaded))``).
    """
    got = getattr(loaded, "alt_inputs", None)
    if got is not None:
        return tuple(got)
    import sys
    from pathlib import Path

    from irviz.core.frontend import model_file

    kind, target, factory = model_file.parse_spec(getattr(loaded, "spec", "") or "")
    try:
        if kind == "sample":
            from irviz.core.frontend.samples import sample_path

            path = sample_path(target)
        else:
            path = Path(target).expanduser().resolve()
    except Exception:  # noqa: BLE001
        return None
    modname = model_file._loaded_names.get(str(path))  # noqa: SLF001
    module = sys.modules.get(modname) if modname else None
    fn = getattr(module, "get_alt_inputs", None)
    if not callable(fn):
        return None
    try:
        got = fn()
    except Exception as exc:  # noqa: BLE001
        raise RunError(f"get_alt_inputs() in {path.name} raised {type(exc).__name__}: {exc}",
                       "get_alt_inputs() must return a tuple of tensors, like get_model()'s inputs.",
                       detail=_tb(exc)) from exc
    if hasattr(got, "shape"):
        got = (got,)
    return tuple(got)


def run_and_compare(build_result: BuildResult, loaded, repeats: int = 10, *,
                    params: dict | None = None, match_threads: bool = True,
                    inputs=None) -> RunResult:
    """Run main on the CPU VM with `loaded.example_inputs`; compare with torch; time both.

    `inputs`: run on these tensors instead of the example inputs (e.g. ``alt_inputs(loaded)``:
    other sizes for a module built with symbolic dims); torch runs on the same tensors.

    `params` (name -> array, e.g. ``Imported.params``) supplies extra main parameters when the
    module was imported with parameters as inputs; they are appended in main's parameter order.
    `match_threads`: run torch with as many threads as TVM's runtime uses while timing (restored
    afterwards), so the two figures compare like with like; on a loaded 2-core machine torch's
    default 2-thread pool can cost ~20 ms even for a tiny MLP.  False: torch keeps its own setting.
    Raises RunError (VM creation, the call itself, output count/shape mismatch, bad inputs).
    """
    import torch

    repeats = max(1, int(repeats))
    dev = tvm.cpu()
    example = tuple(inputs) if inputs is not None else tuple(loaded.example_inputs)
    # python scalars in example_inputs were specialised into the graph by torch.export
    inputs = [x for x in example if not isinstance(x, (int, float, bool, str))]
    param_names = _main_params(build_result.mod)
    if param_names is not None and len(param_names) != len(inputs):
        extra = param_names[len(inputs):]
        if len(param_names) > len(inputs) and params:
            missing = [n for n in extra if n not in params]
            if missing:
                raise RunError(
                    f"main takes {len(param_names)} parameters but the model has {len(inputs)} "
                    f"example inputs; no value for {', '.join(missing[:5])}",
                    "pass the imported params (Imported.params) for the weights main takes as inputs.")
            inputs = inputs + [params[n] for n in extra]
        elif len(param_names) > len(inputs):
            shown = ", ".join(extra[:5]) + (", ..." if len(extra) > 5 else "")
            raise RunError(
                f"main takes {len(param_names)} parameters but the model has only {len(inputs)} "
                f"example inputs (the extra ones look like weights: {shown})",
                "the module keeps parameters as inputs (keep_params_as_input=True): pass params= "
                "(Imported.params), or bind them (BindParams) / import without keep_params_as_input.")
        else:
            raise RunError(
                f"main takes {len(param_names)} parameters but the model has {len(inputs)} example inputs",
                "the module does not match this model: build a step from the same session.")
    try:
        tvm_inputs = [_to_tvm(x, dev) for x in inputs]
    except Exception as exc:  # noqa: BLE001
        raise RunError(f"could not convert the example inputs to TVM tensors: {tvm_error_text(exc)}",
                       "inputs must be torch tensors with a dtype numpy knows.", detail=_tb(exc)) from exc

    # --- torch reference
    try:
        with torch.no_grad():
            ref_out = loaded.module(*example)
    except Exception as exc:  # noqa: BLE001
        raise RunError(f"PyTorch failed on the example inputs: {exc}",
                       "the model itself does not run with its example inputs.",
                       detail=_tb(exc)) from exc

    # --- TVM
    try:
        vm = relax.VirtualMachine(build_result.executable, dev)
        main = vm["main"]
    except Exception as exc:  # noqa: BLE001
        msg = tvm_error_text(exc)
        raise RunError(f"could not load the compiled module: {msg}", _run_hint(msg),
                       detail=_tb(exc)) from exc
    try:
        tvm_out = main(*tvm_inputs)
    except Exception as exc:  # noqa: BLE001
        msg = tvm_error_text(exc)
        raise RunError(f"running main failed: {msg}", _run_hint(msg), detail=_tb(exc)) from exc

    refs = [_to_numpy(x) for x in _flatten(ref_out) if x is not None]
    gots = [_to_numpy(x) for x in _flatten(tvm_out) if x is not None]
    if len(refs) != len(gots):
        raise RunError(
            f"TVM returned {len(gots)} outputs, PyTorch {len(refs)}",
            "the step changed what main returns; outputs are compared in order after flattening "
            "tuples on both sides.")
    per_output = []
    for i, (g, r) in enumerate(zip(gots, refs)):
        if g.shape != r.shape:
            if g.size == r.size and g.size == 1:
                g = g.reshape(r.shape)
            else:
                raise RunError(f"output {i}: TVM shape {g.shape}, PyTorch shape {r.shape}",
                               "the step changed an output's shape.")
        per_output.append(_compare(g, r))

    # --- timing: interleaved, median of each
    tvm_times, torch_times = [], []
    saved_threads = torch.get_num_threads()
    n_tvm = tvm_threads()
    if match_threads and n_tvm > 0:
        torch.set_num_threads(n_tvm)
    used_torch_threads = torch.get_num_threads()
    try:
        with torch.no_grad():
            loaded.module(*example)  # warm-up (TVM already ran once above)
            for _ in range(repeats):
                t0 = time.perf_counter()
                main(*tvm_inputs)
                t1 = time.perf_counter()
                loaded.module(*example)
                t2 = time.perf_counter()
                tvm_times.append(t1 - t0)
                torch_times.append(t2 - t1)
    except Exception as exc:  # noqa: BLE001
        msg = tvm_error_text(exc)
        raise RunError(f"a timed run failed: {msg}", _run_hint(msg), detail=_tb(exc)) from exc
    finally:
        torch.set_num_threads(saved_threads)

    kernels = _kernel_times(build_result, dev, tvm_inputs, runs=min(repeats, 3))

    rtol = max((o.get("rtol", 0.0) for o in per_output), default=1e-4)
    atol = max((o.get("atol", 0.0) for o in per_output), default=1e-4)
    return RunResult(
        max_abs_error=max((o["max_abs"] for o in per_output), default=0.0),
        max_rel_error=max((o["max_rel"] for o in per_output), default=0.0),
        allclose=all(o["allclose"] for o in per_output),
        outputs=len(per_output),
        tvm_ms=statistics.median(tvm_times) * 1e3,
        torch_ms=statistics.median(torch_times) * 1e3,
        kernels=kernels,
        threads=n_tvm,
        torch_threads=used_torch_threads,
        repeats=repeats,
        rtol=rtol,
        atol=atol,
        per_output=per_output,
    )


def _kernel_names(build_result: BuildResult) -> set[str]:
    names: set[str] = set()
    for m in (build_result.lowered, build_result.mod):
        if m is None:
            continue
        for gv, f in m.functions.items():
            if isinstance(f, tvm.tirx.PrimFunc):
                names.add(gv.name_hint)
    names.update(build_result.bindings)  # call_dps_packed externs
    return names


def _kernel_times(build_result: BuildResult, dev, tvm_inputs, runs: int) -> list[KernelTime]:
    """Per-kernel times from a second VM with an instrument (the timed VM stays uninstrumented)."""
    total: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    stack: list[float] = []

    def instrument(func, func_symbol, before_run, ret_value, *args):
        if before_run:
            stack.append(time.perf_counter())
        else:
            dt = time.perf_counter() - stack.pop()
            total[str(func_symbol)] += dt
            calls[str(func_symbol)] += 1
        return relax.VMInstrumentReturnKind.NO_OP

    try:
        vm = relax.VirtualMachine(build_result.executable, dev)
        vm.set_instrument(tvm_ffi.convert(instrument))
        for _ in range(runs):
            vm["main"](*tvm_inputs)
    except Exception as exc:  # noqa: BLE001
        msg = tvm_error_text(exc)
        raise RunError(f"an instrumented run failed: {msg}", _run_hint(msg), detail=_tb(exc)) from exc
    known = _kernel_names(build_result)
    out = [
        KernelTime(name=k, calls=calls[k] // runs, ms=total[k] * 1e3 / runs,
                   binding=build_result.bindings.get(k))
        for k in total
        if k in known and not k.startswith("vm.builtin.")
    ]
    out.sort(key=lambda kt: kt.ms, reverse=True)
    return out
