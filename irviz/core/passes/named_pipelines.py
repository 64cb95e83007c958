"""Named pipelines, as plain data: ``name -> (description, [PassInvocation, ...])``.

``zero`` and ``default_build`` mirror ``tvm/relax/pipeline.py`` of TVM 0.27 step by step
(stepping them equals ``relax.get_pipeline(name)``; see tests/core/test_passes.py); ``gpu`` mirrors
``legalize_passes`` of ``tvm/relax/backend/cuda/pipeline.py``, one step per dlight rule (see
tests/core/test_gpu_pipeline.py).
"""
from __future__ import annotations

from irviz.core.backend.build import DEFAULT_BUILD_STEPS
from irviz.core.backend.gpu_schedule import GPU_RULES
from irviz.core.errors import PassError
from irviz.core.passes.registry import BUILTIN_PREFIX, PassInvocation, find_pass, target_for


def _inv(*names) -> list[PassInvocation]:
    return [PassInvocation(n) for n in names]


ZERO_STEPS = ("LegalizeOps", "AnnotateTIROpPattern", "FoldConstant", "FuseOps", "FuseTIR")
# the zero pipeline with reshapes and transposes fusable into the kernel before them: on a CPU each
# one left alone is a parallel launch and a pass over memory (a transformer has four per layer)
CPU_ZERO_STEPS = ("LegalizeOps", "AnnotateTIROpPattern", "CPUFuseLayoutOps", "FoldConstant", "FuseOps", "FuseTIR")

GPU_SCHEDULE_STEPS = tuple(name for name, _, _ in GPU_RULES)

# batch norm (inference) folded into the convolution's weights, or else split into elementwise ops
# that FuseOps puts into the convolution before it: either way no pass over memory of its own.
# FastMath before LegalizeOps, so the TensorIR it makes is fused and scheduled as any other.
CPU_PRE_STEPS = ("FoldBatchNorm", "DecomposeOpsForInference", "FastMath", "CanonicalizeBindings")

CPU_SCHEDULE_STEPS = ("CPUTuneConv2d", "CPUTileConv2d", "CPUInlineElementwise", "CPUTuneMatVec", "CPUMatVec",
                      "CPUTuneReductions",
                      "CPUTileReductions", "CPUParallelVectorize",
                      "CPUPrepackWeights")

PIPELINES: dict[str, tuple[str, list[PassInvocation]]] = {
    "zero": (
        "TVM's zero pipeline: legalize to TensorIR, then fuse operators (relax.get_pipeline('zero'))",
        _inv(*ZERO_STEPS),
    ),
    "course": (
        "The course: EwiseFMA, MatmulAddFuse, LowerToTensorIR (TOPI), FuseTIR, LegalizeOps for the rest",
        _inv("EwiseFMA", "MatmulAddFuse", "LowerToTensorIR", "FuseTIR", "LegalizeOps"),
    ),
    "default_build": (
        "What tvm.compile runs on CPU, step by step (relax.get_pipeline('default_build')); no fusion",
        _inv(*DEFAULT_BUILD_STEPS),
    ),
    "fast-cpu": (
        "Each conv2d/matmul timed on this machine as a torch call and as TensorIR; the faster kept "
        "(torch through call_dps_packed); the rest fused (reshapes and transposes into the kernel before them) and scheduled TensorIR, conv2d tiles measured",
        [*_inv(*CPU_PRE_STEPS), PassInvocation("LibraryDispatch", {"measure": True}),
         *_inv(*CPU_ZERO_STEPS, *CPU_SCHEDULE_STEPS)],
    ),
    "tir-cpu": (
        "All TensorIR, no library: batch norm folded into the conv's weights, exp/tanh/erf as "
        "vectorizable arithmetic, the zero pipeline (reshapes and transposes fused into the kernel before them), then CPU schedule rules (blocked and depthwise conv2d with "
        "prepacked weights and tiles measured on this machine, tiled reductions, parallel + vectorized loops)",
        _inv(*CPU_PRE_STEPS, *CPU_ZERO_STEPS, *CPU_SCHEDULE_STEPS),
    ),
    "gpu": (
        "TVM's GPU flow (relax.backend.cuda legalize_passes): legalize and fuse as zero does, then "
        "dlight's GPU schedule rules one step each, under the GPU target (--target; none: cuda sm_80)",
        _inv(*ZERO_STEPS, *GPU_SCHEDULE_STEPS),
    ),
}


def list_pipelines() -> list[tuple[str, str]]:
    return [(name, desc) for name, (desc, _) in PIPELINES.items()]


def get_pipeline(name: str) -> list[PassInvocation]:
    """A fresh copy of a named pipeline's invocations. A named pipeline is built-in passes: a
    name a user's pass file took stands for the built-in, "builtin:NAME"."""
    if name not in PIPELINES:
        raise PassError(f"unknown pipeline {name!r}", hint="known pipelines: " + ", ".join(PIPELINES))
    return [PassInvocation(_builtin(i.name), dict(i.params)) for i in PIPELINES[name][1]]


def check_target(invocations, target) -> None:
    """PassError before anything runs when a pass of `invocations` cannot run under `target` (a
    tvm Target, None: none chosen): a CPU schedule with a GPU target, a GPU rule with a CPU one."""
    for inv in invocations:
        spec = find_pass(inv.name)
        if spec is not None:
            target_for(spec, target)


def _builtin(name: str) -> str:
    spec = find_pass(name)
    return BUILTIN_PREFIX + name if spec is not None and spec.category == "user" else name
