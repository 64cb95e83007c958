"""dlight's default GPU schedules, as TVM's GPU build applies them (`legalize_passes` of
tvm/relax/backend/cuda/pipeline.py): the rules Matmul, GEMV, Reduction, GeneralReduction and
Fallback, the first that takes a kernel scheduling it and marking it `tirx.is_scheduled`.

A marked kernel is left alone by every later rule, so the rules applied one after another (the
`gpu` pipeline's steps) give the module all of them at once gives (tests/core/test_gpu_pipeline.py).

    schedule_kernels(mod, target)     # every kernel not scheduled yet; BuildError names a failing one
"""
from __future__ import annotations

import tvm

from irviz.core.errors import BuildError, traceback_text, tvm_error_text
from irviz.core.backend.lower_errors import failing_line
from irviz.core.tvm_compat import shallow_copy
from irviz.core.views.module_diff import function_text

# (pass name, dlight rule class name, what it takes), in the order TVM applies them
GPU_RULES = (
    ("DlightGPUMatmul", "Matmul", "matmuls and batch matmuls: shared-memory tiles, a thread per output block"),
    ("DlightGPUGEMV", "GEMV", "matrix-vector products: each row reduced across a warp"),
    ("DlightGPUReduction", "Reduction", "reductions to a scalar per row (sum, max) with an elementwise epilogue"),
    ("DlightGPUGeneralReduction", "GeneralReduction", "softmax, layer norm: several reductions over one row"),
    ("DlightGPUFallback", "Fallback", "everything else (elementwise, transpose, gather): one thread per output"),
)

# the GPU the passes schedule for when the gpu pipeline runs with no target chosen
DEFAULT_GPU_TARGET = {"kind": "cuda", "arch": "sm_80"}


def rule(name: str):
    """A fresh dlight GPU rule by its class name ("Matmul", ...)."""
    from tvm.s_tir import dlight as dl

    return getattr(dl.gpu, name)()


def default_schedule(*rule_names: str):
    """ApplyDefaultSchedule with these rules (all five by default), first match wins."""
    from tvm.s_tir import dlight as dl

    return dl.ApplyDefaultSchedule(*(rule(n) for n in (rule_names or [r[1] for r in GPU_RULES])))


def is_scheduled(func) -> bool:
    attrs = func.attrs
    return attrs is not None and "tirx.is_scheduled" in attrs and int(attrs["tirx.is_scheduled"]) == 1


def schedule_kernels(mod, target):
    """`mod` with every PrimFunc not scheduled yet given dlight's GPU schedules under `target` (a
    GPU tvm Target), kernel by kernel so that one dlight cannot take is named. Host-side PrimFuncs
    (`tirx.is_host_func`, the VM's shape functions) stay as they are."""
    todo = {gv: f for gv, f in mod.functions.items()
            if isinstance(f, tvm.tirx.PrimFunc) and not is_scheduled(f)
            and not (f.attrs is not None and "tirx.is_host_func" in f.attrs)}
    if not todo:
        return mod
    updates = {}
    with target:
        for gv, func in todo.items():
            try:
                one = default_schedule()(tvm.IRModule({gv: func}))
            except Exception as exc:
                msg = tvm_error_text(exc, head=12, tail=6)
                where = failing_line(function_text(mod, gv.name_hint), str(target.kind.name), msg)
                loc = f" (line {where[0]} of its TensorIR: {where[1][:100]})" if where else ""
                raise BuildError(
                    f"dlight's GPU schedules failed on kernel {gv.name_hint}{loc}: {msg}",
                    "a kernel a CPU schedule (parallel or vectorized loops) or a hand schedule "
                    "already shaped is not one dlight takes: build an earlier step, or use the gpu "
                    "pipeline (or zero) for a GPU target", detail=traceback_text(exc)) from exc
            updates[gv] = one[gv.name_hint]
    out = shallow_copy(mod)
    for gv, func in updates.items():
        out[gv] = func
    return out
