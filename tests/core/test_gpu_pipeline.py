"""The `gpu` pipeline: TVM's GPU flow (relax.backend.cuda legalize_passes) stepped one pass at a
time, each dlight GPU rule its own step, under the session's GPU target (cuda sm_80 when none was
chosen); a CPU target for it, or a GPU target for a CPU schedule, is a clear error."""
from __future__ import annotations

import pytest
import tvm
import tvm_ffi

from irviz.core import passes
from irviz.core.backend.gpu_schedule import GPU_RULES, default_schedule, is_scheduled
from irviz.core.backend.kernel_code import launch_shapes
from irviz.core.errors import PassError
from irviz.core.workspace import Workspace

CUDA = {"kind": "cuda", "arch": "sm_80"}


def _session(pipeline: str, target: str | None = None, spec: str = "sample:gpt"):
    ws = Workspace()
    ws.target = target
    ws.open(spec, planned=passes.parse_pipeline(pipeline))
    return ws


@pytest.fixture(scope="module")
def gpt_gpu():
    ws = _session("gpu")
    ws.run_to_end()
    return ws


def _kernels(mod) -> dict:
    return {gv.name_hint: f for gv, f in mod.functions.items() if isinstance(f, tvm.tirx.PrimFunc)}


def test_stepping_the_gpu_pipeline_equals_tvms_gpu_legalize_passes(gpt_gpu):
    from tvm.relax.backend.cuda.pipeline import legalize_passes

    steps = gpt_gpu.session.steps
    assert [s.pass_name for s in steps[1:]] == [
        "LegalizeOps", "AnnotateTIROpPattern", "FoldConstant", "FuseOps", "FuseTIR",
        "DlightGPUMatmul", "DlightGPUGEMV", "DlightGPUReduction", "DlightGPUGeneralReduction",
        "DlightGPUFallback"]
    target = tvm.target.Target(CUDA)
    with target, tvm.transform.PassContext(opt_level=3):
        expected = tvm.transform.Sequential(legalize_passes(target))(steps[0].mod)
    assert tvm_ffi.structural_equal(steps[-1].mod, expected)


def test_rules_one_after_another_give_what_all_at_once_give(gpt_gpu):
    fused = next(s for s in gpt_gpu.session.steps if s.pass_name == "FuseTIR").mod
    with tvm.target.Target(CUDA):
        at_once = default_schedule()(fused)
        one_by_one = fused
        for _, rule, _ in GPU_RULES:
            one_by_one = default_schedule(rule)(one_by_one)
    assert tvm_ffi.structural_equal(one_by_one, at_once)
    # and the steps are the same module: each rule schedules kernels of its own kind
    assert tvm_ffi.structural_equal(gpt_gpu.session.steps[-1].mod, at_once)


def test_each_rule_step_changes_only_the_kernels_it_takes(gpt_gpu):
    by_pass = {s.pass_name: s for s in gpt_gpu.session.steps}
    matmul = by_pass["DlightGPUMatmul"].changes.changed
    general = by_pass["DlightGPUGeneralReduction"].changes.changed
    fallback = by_pass["DlightGPUFallback"].changes.changed
    assert matmul and all("matmul" in n for n in matmul)
    assert "layer_norm" in general and any("softmax" in n for n in general)
    assert fallback and not set(fallback) & (set(matmul) | set(general))
    text, _ = gpt_gpu.session.diff(by_pass["FuseTIR"].index, by_pass["DlightGPUMatmul"].index)
    assert "threadIdx" in text and "blockIdx" in text  # the diff of the step shows the bindings
    for name, f in _kernels(gpt_gpu.session.steps[-1].mod).items():
        assert is_scheduled(f), name
        assert launch_shapes(f) and launch_shapes(f)[0]["block"][0] > 1, name


def test_the_passes_run_under_the_chosen_gpu_target(gpt_gpu):
    ws = _session("gpu", "opencl")
    ws.run_to_end()
    fused = next(s for s in ws.session.steps if s.pass_name == "FuseTIR").mod
    with tvm.target.Target({"kind": "opencl"}):
        expected = default_schedule()(fused)
    assert tvm_ffi.structural_equal(ws.session.steps[-1].mod, expected)
    # OpenCL's rules differ from CUDA's (the default with no target chosen) on this model
    assert not tvm_ffi.structural_equal(ws.session.steps[-1].mod, gpt_gpu.session.steps[-1].mod)
    assert gpt_gpu.target_name == "cuda" and ws.target_name == "opencl"


def test_a_gpu_rule_with_a_cpu_target_and_a_cpu_schedule_with_a_gpu_target_are_errors():
    # refused as the pipeline is planned, before anything loads (as the CLI and the app refuse it)
    ws = Workspace()
    with pytest.raises(PassError) as e:
        ws.open("sample:mlp", planned="gpu", target="x86-avx2")
    assert "DlightGPUMatmul schedules kernels for a GPU" in e.value.message and "--target cuda" in e.value.hint
    assert ws.stage == "pipeline" and ws.session is None
    with pytest.raises(PassError) as e:
        passes.check_target(passes.get_pipeline("tir-cpu"), tvm.target.Target(CUDA))
    # the first CPU-only pass of tir-cpu is refused
    assert "CPUFuseLayoutOps schedules for a CPU" in e.value.message and "gpu pipeline" in e.value.hint
