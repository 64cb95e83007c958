"""Build any step of a pipeline with TVM.

``build(mod)`` finishes whatever is left of TVM's ``default_build`` pipeline and compiles the
module for the host CPU.  The module may be at any point: a fresh import (high-level ops), after
LegalizeOps / FuseOps / FuseTIR, or part-way through ``default_build`` itself (stepped one pass at
a time in a Session).  How far ``default_build`` already got is read from markers the passes leave
behind (see :func:`default_build_progress`); only the remaining passes run, then
``tvm.compile(..., relax_pipeline=None)``.  If that fails, the whole ``default_build`` is tried
once more (most of its passes are idempotent), and the first error is reported.

``R.ewise_fma`` (the course's op, no legalization in TVM 0.27) is lowered with
``backend.legalize.CUSTOM_LEGALIZE_MAP`` by the LegalizeOps step of the build.
``irviz.torch.*`` library functions (``backend.library_functions``) are registered before building.

``BuildResult.bindings`` maps each kernel to the Relax var(s) in ``main`` whose ``call_tir`` /
``call_dps_packed`` (or, after CallTIRRewrite, direct call; or call of a fused sub-function that
calls it) calls that kernel; several bindings are joined with ", " in program order.
Running a build and comparing it with PyTorch is ``irviz.core.backend.run``.
"""
from __future__ import annotations

import re
import time
from collections import defaultdict
from dataclasses import dataclass, field

import tvm
from tvm import relax

from irviz.core.errors import BuildError, traceback_text, tvm_error_text
from irviz.core.backend.gpu_schedule import schedule_kernels
from irviz.core.backend.legalize import CUSTOM_LEGALIZE_MAP
from irviz.core.backend.lower_errors import failing_kernel
from irviz.core.backend.library_functions import register_library_functions
from irviz.core.tvm_compat import as_target, callee_name, var_name

__all__ = [
    "BuildResult",
    "DEFAULT_BUILD_PASSES",
    "DEFAULT_BUILD_STEPS",
    "build",
    "default_build_progress",
    "kernel_bindings",
    "lower",
    "lower_until",
]

# tvm/relax/pipeline.py default_build_pipeline(), in order; the default_build pipeline of the pass
# registry steps through this same list
DEFAULT_BUILD_STEPS = (
    "DispatchSampling",
    "DispatchSortScan",
    "LegalizeOps",
    "RewriteDataflowReshape",
    "ToNonDataflow",
    "RemovePurityChecking",
    "CallTIRRewrite",
    "StaticPlanBlockMemory",
    "RewriteCUDAGraph",
    "LowerAllocTensor",
    "KillAfterLastUse",
    "LowerRuntimeBuiltin",
    "ComputePrimValue",
    "VMShapeLower",
    "AttachGlobalSymbol",
)
DEFAULT_BUILD_PASSES = DEFAULT_BUILD_STEPS
_LEGALIZE_INDEX = DEFAULT_BUILD_PASSES.index("LegalizeOps")
GPU_SCHEDULE = "dlight GPU schedules"  # the step a GPU build adds (BuildResult.passes_run shows it)


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
    mod: object = None  # the IRModule given to build() (kernel -> binding names come from it)
    lowered: object = None  # the module after the relax passes build() ran (before VM codegen)
    passes_run: list[str] = field(default_factory=list)  # default_build passes build() applied
    skipped: int = 0  # how many leading default_build passes were judged already done
    bindings: dict[str, str] = field(default_factory=dict)  # kernel name -> binding(s) in main
    before_rewrite: object = None  # the module just before CallTIRRewrite (binding names of kernels
    #                                the build's own LegalizeOps made), for another function's bindings

    def bindings_of(self, func: str = "main") -> dict[str, str]:
        """kernel name -> binding(s) in Relax function `func`, found as for `bindings`."""
        if func == "main":
            return self.bindings
        out = kernel_bindings(self.mod, func) if self.mod is not None else {}
        for m in (self.before_rewrite, self.lowered):
            if m is not None:
                for k, v in kernel_bindings(m, func).items():
                    out.setdefault(k, v)
        return out



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


def lower_until(mod, stop: str, including: bool = False):
    """`mod` with the default_build passes it lacks before pass `stop` (and `stop` itself when
    `including`) applied under the host target: a copy, or `mod` when none is left to apply."""
    end = DEFAULT_BUILD_PASSES.index(stop) + (1 if including else 0)
    cur = mod
    with as_target(None):
        for name in DEFAULT_BUILD_PASSES[default_build_progress(mod):end]:
            cur = _make_pass(name)(cur)
    return cur


def _register_library_functions(mod) -> None:
    try:
        register_library_functions(mod)
    except Exception:  # unknown irviz.torch.* name: let the build/run report it
        pass


# ---------------------------------------------------------------------------------------------
# build


def _lower(mod, target, start: int, gpu: bool = False) -> tuple[object, list[str], object]:
    """Run default_build[start:] one pass at a time (LegalizeOps with the ewise_fma map). `gpu`:
    the kernels not scheduled yet get dlight's GPU schedules once legalized, before CallTIRRewrite
    (where TVM's GPU build applies them; the VM's own host functions come later)."""
    names = list(DEFAULT_BUILD_PASSES[start:])
    ops, _, _, _ = _module_facts(mod) if start > _LEGALIZE_INDEX else (set(), None, None, None)
    if any(op in CUSTOM_LEGALIZE_MAP for op in ops):
        names.insert(0, "LegalizeOps")
    if gpu:
        names.insert(names.index("CallTIRRewrite") if "CallTIRRewrite" in names else 0, GPU_SCHEDULE)
    cur = mod
    before_rewrite = None  # last module whose main still has call_tir (binding names intact)
    with target:
        for name in names:
            if name == "CallTIRRewrite":
                before_rewrite = cur
            if name == GPU_SCHEDULE:  # names the kernel dlight cannot take: a BuildError of its own
                cur = schedule_kernels(cur, target)
                continue
            try:
                cur = _make_pass(name)(cur)
            except Exception as exc:  # every TVM failure becomes a BuildError
                raise _PassFailed(name, exc) from exc
    return cur, names, before_rewrite


class _PassFailed(Exception):
    def __init__(self, name, exc):
        super().__init__(name)
        self.name, self.exc = name, exc


def build(mod, target=None) -> BuildResult:
    """Finish default_build from wherever `mod` is and compile it for `target` (None: the host
    CPU). For a GPU target, kernels no pass scheduled get dlight's GPU schedules first.

    Raises BuildError with TVM's message (the pass that failed, if it was a pass) and a hint.
    """
    if not isinstance(mod, tvm.IRModule):
        raise BuildError(f"build() needs a tvm.IRModule, got {type(mod).__name__}",
                         "pass the module of a pipeline step (Session.module(i)).")
    if "main" not in [gv.name_hint for gv in mod.get_global_vars()]:
        raise BuildError("the module has no 'main' function", "build a module imported from a model.")
    tgt = as_target(target)
    gpu = str(tgt.kind.name) != "llvm"
    _register_library_functions(mod)
    t0 = time.perf_counter()
    start = default_build_progress(mod)
    attempts = [start] + ([0] if start > 0 else [])
    first_error = None
    for attempt in attempts:
        lowered = None
        try:
            lowered, names, before_rewrite = _lower(mod, tgt, attempt, gpu=gpu)
            ex = tvm.compile(lowered, target=tgt, relax_pipeline=None)
        except BuildError:  # a kernel dlight cannot take: no second attempt changes that
            raise
        except _PassFailed as pf:
            err = (f"default_build pass {pf.name} failed: {tvm_error_text(pf.exc)}",
                   traceback_text(pf.exc))
        except Exception as exc:
            # TVM's message seldom names the kernel: find it (once, on the way to the error)
            culprit = failing_kernel(lowered, tgt) if lowered is not None and first_error is None else None
            err = (f"TVM could not compile the module: {culprit or tvm_error_text(exc)}", traceback_text(exc))
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
                               bindings=bindings, before_rewrite=before_rewrite)
        if first_error is None:
            first_error = err
    message, detail = first_error
    raise BuildError(message, _build_hint(message), detail=detail)


def lower(mod, target=None):
    """The module `build` would hand to tvm.compile: default_build finished from wherever `mod` is,
    under `target`, with no code generated. Its PrimFuncs are the kernels. Raises BuildError."""
    if not isinstance(mod, tvm.IRModule):
        raise BuildError(f"lower() needs a tvm.IRModule, got {type(mod).__name__}",
                         "pass the module of a pipeline step (Session.module(i)).")
    tgt = as_target(target)
    _register_library_functions(mod)
    start = default_build_progress(mod)
    try:
        return _lower(mod, tgt, start)[0]
    except _PassFailed as pf:
        if start > 0:  # as build(): the whole of default_build once more
            try:
                return _lower(mod, tgt, 0)[0]
            except _PassFailed:
                pass
        message = f"default_build pass {pf.name} failed: {tvm_error_text(pf.exc)}"
        raise BuildError(message, _build_hint(message), detail=traceback_text(pf.exc)) from pf.exc


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
