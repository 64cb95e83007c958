"""Build & Run for a GPU target: on a machine with a CUDA device the build runs there, is compared
with torch and timed with the device synchronised; elsewhere the build is made (its CUDA source is
there to read) and the run is refused with "no such device here". The device tests skip, not fail,
without a GPU."""
from __future__ import annotations

import re

import pytest
import tvm

from irviz.core import passes
from irviz.core.backend import run as run_mod
from irviz.core.errors import RunError
from irviz.core.target import not_runnable_here, resolve_target
from irviz.core.workspace import Workspace

NO_CUDA = not_runnable_here(resolve_target("cuda"))
needs_cuda = pytest.mark.skipif(NO_CUDA is not None, reason=f"no CUDA device to run on: {NO_CUDA}")


def _workspace(pipeline: str, target: str | None = "cuda", spec: str = "sample:mlp") -> Workspace:
    ws = Workspace()
    ws.target = target
    ws.open(spec, planned=passes.parse_pipeline(pipeline))
    ws.run_to_end()
    return ws


@needs_cuda
@pytest.mark.parametrize("pipeline", ["zero", "gpu"])
def test_build_and_run_on_the_gpu_matches_torch(pipeline):
    ws = _workspace(pipeline)
    built, res = ws.build_run(repeats=3)
    assert '"kind":"cuda"' in built.target.replace(" ", "")
    assert res.allclose and res.tvm_ms > 0 and res.verdict == "pass"
    assert res.kernels and all(k.ms > 0 for k in res.kernels)


@pytest.mark.skipif(NO_CUDA is None, reason="a CUDA device is here: the run is tested on it")
def test_without_a_gpu_the_build_is_made_and_the_run_refused():
    ws = _workspace("gpu", target=None)  # the gpu pipeline's default target: cuda
    with pytest.raises(RunError) as e:
        ws.build_run(repeats=1)
    assert "built for cuda; no such device here, not run" in e.value.message
    assert ws.stage_seconds["build"] > 0  # the refused run built the step first
    built = ws.build_step()
    assert "dlight GPU schedules" in built.passes_run and '"arch":"sm_80"' in built.target
    (host_lib,) = built.executable.mod.imports
    (device,) = [m for m in host_lib.imports if m.kind == "cuda"]
    source = device.inspect_source()
    kernels = set(re.findall(r"__global__ void __launch_bounds__\(\d+\) (\w+)\(", source))
    assert kernels == {"fused_matmul_add_relu_kernel", "fused_matmul1_add1_kernel"}
    assert "threadIdx.x" in source


def test_a_gpu_call_is_timed_to_the_end_of_its_work():
    class FakeGpu:
        synced = 0

        def dlpack_device_type(self):
            return 2  # kDLCUDA

        def sync(self):
            self.synced += 1

    dev, calls = FakeGpu(), []
    fn = run_mod._synced(lambda *a: calls.append(a) or "out", dev)
    assert fn(1, 2) == "out" and calls == [(1, 2)] and dev.synced == 1
    cpu_fn = len
    assert run_mod._synced(cpu_fn, tvm.cpu()) is cpu_fn  # the CPU returns when done: no wrapper
