"""irviz.core.backend.build and .run: build any pipeline step, run it on the VM, compare with PyTorch."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import tvm
from torch import nn
from tvm import relax
from tvm.relax.frontend.torch import from_exported_program
from tvm.script import ir as I
from tvm.script import relax as R

from irviz.core.backend.build import (
    DEFAULT_BUILD_PASSES,
    BuildResult,
    build,
    default_build_progress,
    kernel_bindings,
)
from irviz.core.backend.run import build_and_run, run_and_compare
from irviz.core.errors import BuildError, RunError
from irviz.core.frontend.model_file import LoadedModel
from irviz.core.passes import PassInvocation, apply_pass, get_pipeline
from irviz.core.tvm_compat import host_target, var_name


# ---------------------------------------------------------------------------------------------
# small models


class CourseMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear0 = nn.Linear(784, 128)
        self.linear1 = nn.Linear(128, 10)

    def forward(self, x):
        return self.linear1(torch.relu(self.linear0(x)))


class ConvBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x)))
        return self.fc(torch.flatten(x, 1))


class TwoOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 4)

    def forward(self, x):
        y = self.fc(x)
        return y.relu(), (y.sum(dim=1), y * 2)


class Tiny(nn.Module):
    """Linear + ReLU + reshape + sum: few, small kernels, so 35 builds stay quick."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        y = torch.relu(self.fc(x)).reshape(4, 2)
        return y * 2.0 + 1.0


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    lm = _loaded(Tiny(), torch.randn(2, 8), name="tiny")
    return lm, _import(lm)


class Embed(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.fc = nn.Linear(8, 3)

    def forward(self, ids):
        return self.fc(self.emb(ids))


def _loaded(model, *inputs, name="m") -> LoadedModel:
    torch.manual_seed(0)
    return LoadedModel(module=model.eval(), example_inputs=tuple(inputs), spec=f"test:{name}", name=name)


def _import(loaded, **kw):
    ep = torch.export.export(loaded.module, loaded.example_inputs).run_decompositions()
    return from_exported_program(ep, **kw)


@pytest.fixture(scope="module")
def mlp():
    torch.manual_seed(0)
    lm = _loaded(CourseMLP(), torch.randn(1, 784), name="mlp")
    return lm, _import(lm)


@pytest.fixture(scope="module")
def convbn():
    torch.manual_seed(0)
    m = ConvBN()
    with torch.no_grad():
        m.bn.running_mean.uniform_(-0.1, 0.1)
        m.bn.running_var.uniform_(0.5, 1.5)
    lm = _loaded(m, torch.randn(1, 3, 8, 8), name="convbn")
    return lm, _import(lm)


def _prim_names(mod) -> set[str]:
    return {gv.name_hint for gv, f in mod.functions.items() if isinstance(f, tvm.tirx.PrimFunc)}


def _main_vars(mod) -> set[str]:
    names = {var_name(p) for p in mod["main"].params}
    for block in mod["main"].body.blocks:
        names.update(var_name(b.var) for b in block.bindings)
    return names


def _check_kernels(res, br: BuildResult):
    assert res.kernels, "no kernels recorded"
    prims = _prim_names(br.lowered) | _prim_names(br.mod)
    main_vars = _main_vars(br.mod) | _main_vars(br.lowered)
    for k in res.kernels:
        assert k.name in prims, k.name
        assert k.ms >= 0 and k.calls >= 1
        if k.binding is not None:
            for b in k.binding.split(", "):
                assert b in main_vars, (k.name, b)
    assert [k.ms for k in res.kernels] == sorted((k.ms for k in res.kernels), reverse=True)


# ---------------------------------------------------------------------------------------------
# build + run


def test_mlp_fresh_import_builds_and_matches(mlp):
    lm, mod = mlp
    br = build(mod)
    assert br.seconds > 0 and "llvm" in br.target
    assert br.passes_run[0] == "DispatchSampling" and br.skipped == 0
    res = run_and_compare(br, lm, repeats=3)
    assert res.outputs == 1
    assert res.max_abs_error < 1e-4 and res.allclose
    assert res.tvm_ms > 0 and res.torch_ms > 0
    assert res.threads >= 1 and res.torch_threads >= 1
    _check_kernels(res, br)
    # bindings point at the high-level op's var of the input module (LegalizeOps keeps names)
    assert any(k.binding for k in res.kernels)


def test_build_and_run_with_and_without_a_reference(mlp):
    lm, mod = mlp
    seen = []
    br, res = build_and_run(mod, lm, repeats=1, on_built=seen.append)
    assert seen == [br] and br.mod is mod
    assert res.allclose and res.max_abs_error < 1e-4 and res.torch_ms > 0
    # no model: random inputs of main's types, timed, nothing to compare with
    br, res = build_and_run(mod, repeats=1)
    assert res.allclose is None and res.tvm_ms > 0
    assert np.isnan(res.max_abs_error) and np.isnan(res.torch_ms)
    _check_kernels(res, br)


def test_build_and_run_raises_the_failing_half(mlp):
    lm, _ = mlp
    with pytest.raises(BuildError):
        build_and_run(_no_lowering_module(), lm, repeats=1)
    with pytest.raises(RunError, match="main takes 5 parameters"):
        build_and_run(_import(lm, keep_params_as_input=True), lm, repeats=1)


def test_convbn_after_zero_pipeline(convbn):
    lm, mod = convbn
    with host_target():
        mod = relax.get_pipeline("zero")(mod)
    br = build(mod)
    res = run_and_compare(br, lm, repeats=2)
    assert res.max_abs_error < 1e-4 and res.allclose
    _check_kernels(res, br)
    fused = {k.name for k in res.kernels}
    assert fused <= _prim_names(mod)  # nothing new after fusion: kernels are the module's own
    assert all(k.binding for k in res.kernels)


def test_every_step_of_zero_and_default_build_builds(tiny):
    """Step zero then default_build one pass at a time (as a Session does) and build each."""
    lm, mod = tiny
    target = host_target()
    steps = get_pipeline("zero") + get_pipeline("default_build")
    assert [i.name for i in get_pipeline("default_build")] == list(DEFAULT_BUILD_PASSES)
    cur = mod
    progress = []
    for inv in steps:
        cur = apply_pass(inv, cur, target)
        br = build(cur)
        res = run_and_compare(br, lm, repeats=1)
        assert res.allclose and res.max_abs_error < 1e-4, inv.name
        assert res.kernels, inv.name
        progress.append(br.skipped)
    # the markers were seen: later steps skip the default_build passes already applied
    assert progress[-1] == len(DEFAULT_BUILD_PASSES) - 1  # after VMShapeLower (+AttachGlobalSymbol)
    assert progress == sorted(progress)
    assert default_build_progress(mod) == 0


def test_default_build_stepping_from_fresh_import(tiny):
    """default_build directly on an unfused import (no zero pipeline), one pass at a time."""
    lm, mod = tiny
    target = host_target()
    cur = mod
    for inv in get_pipeline("default_build"):
        cur = apply_pass(inv, cur, target)
        res = run_and_compare(build(cur), lm, repeats=1)
        assert res.allclose, inv.name


def test_tuple_outputs_flattened():
    torch.manual_seed(0)
    lm = _loaded(TwoOut(), torch.randn(2, 6), name="two_out")
    br = build(_import(lm))
    res = run_and_compare(br, lm, repeats=1)
    assert res.outputs == 3 and res.allclose
    assert [o["shape"] for o in res.per_output] == [(2, 4), (2,), (2, 4)]


def test_int64_input_embedding():
    torch.manual_seed(0)
    ids = torch.tensor([[1, 5, 19, 0]], dtype=torch.int64)
    lm = _loaded(Embed(), ids, name="embed")
    res = run_and_compare(build(_import(lm)), lm, repeats=2)
    assert res.allclose and res.max_abs_error < 1e-5


def test_params_as_input_is_named_in_the_error(mlp):
    lm, _ = mlp
    mod = _import(lm, keep_params_as_input=True)
    br = build(mod)
    with pytest.raises(RunError) as ei:
        run_and_compare(br, lm, repeats=1)
    msg = ei.value.user_message()
    assert "main takes 5 parameters" in msg and "1 example inputs" in msg
    assert "keep_params_as_input" in msg
    # ... and the weights can be supplied
    params = {var_name(p): t.detach().numpy() for p, t in
              zip(mod["main"].params[1:], [lm.module.linear0.weight, lm.module.linear0.bias,
                                            lm.module.linear1.weight, lm.module.linear1.bias])}
    res = run_and_compare(br, lm, repeats=1, params=params)
    assert res.allclose


# ---------------------------------------------------------------------------------------------
# ewise_fma


@I.ir_module
class FMAModule:
    @R.function
    def main(x: R.Tensor((3, 4), "float32"), y: R.Tensor((3, 4), "float32")):
        with R.dataflow():
            gv0 = R.ewise_fma(x, y, y)
            R.output(gv0)
        return gv0


class _MulAdd(nn.Module):
    def forward(self, x, y):
        return x * y + y


def test_ewise_fma_builds_and_matches_numpy():
    br = build(FMAModule)
    assert "ewise_fma" in _prim_names(br.lowered)
    x = np.random.rand(3, 4).astype("float32")
    y = np.random.rand(3, 4).astype("float32")
    vm = relax.VirtualMachine(br.executable, tvm.cpu())
    out = vm["main"](tvm.runtime.tensor(x), tvm.runtime.tensor(y)).numpy()
    np.testing.assert_allclose(out, x * y + y, rtol=1e-6)
    lm = _loaded(_MulAdd(), torch.from_numpy(x), torch.from_numpy(y), name="mul_add")
    res = run_and_compare(br, lm, repeats=1)
    assert res.allclose and res.max_abs_error < 1e-6
    assert [(k.name, k.binding) for k in res.kernels] == [("ewise_fma", "gv0")]


def test_ewise_fma_via_course_pass_every_step():
    """EwiseFMA (course pass) then each zero step: every step builds (ewise_fma legalized)."""
    torch.manual_seed(0)
    lm = _loaded(_MulAdd(), torch.randn(3, 4), torch.randn(3, 4), name="mul_add")
    cur = apply_pass(PassInvocation("EwiseFMA"), _import(lm), host_target())
    assert "R.ewise_fma" in cur.script()
    for inv in [None] + get_pipeline("zero"):
        if inv is not None:
            cur = apply_pass(inv, cur, host_target())
        assert run_and_compare(build(cur), lm, repeats=1).allclose


# ---------------------------------------------------------------------------------------------
# failures


@I.ir_module
class UnregisteredPacked:
    @R.function
    def main(x: R.Tensor((2, 4), "float32")):
        with R.dataflow():
            a = R.add(x, x)
            b = R.call_dps_packed("irviz_test_no_such_func", (a,), out_ty=R.Tensor((2, 4), "float32"))
            R.output(b)
        return b


class _Double(nn.Module):
    def forward(self, x):
        return x + x


def test_unregistered_packed_function_is_a_run_error():
    br = build(UnregisteredPacked)  # builds: the name is only looked up when the VM loads
    lm = _loaded(_Double(), torch.randn(2, 4), name="double")
    with pytest.raises(RunError) as ei:
        run_and_compare(br, lm, repeats=1)
    err = ei.value
    assert "irviz_test_no_such_func" in err.message
    assert "TVM_BACKTRACE" not in err.message
    assert "register_global_func" in err.hint
    assert err.stage == "run"


def _no_lowering_module():
    """R.hint_on_device: no legalization, and RealizeVDevice (which removes it) is not part of
    default_build, so VM codegen meets it.  (R.unique / R.nonzero / R.cumprod look unlowerable
    but build: they go to runtime builtins or DispatchSortScan.)"""
    x = relax.Var("x", relax.TensorType((4,), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            lv = bb.emit(relax.op.add(x, x))
            gv = bb.emit_output(relax.op.hint_on_device(lv, tvm.cpu()))
        bb.emit_func_output(gv)
    return bb.get()


def test_op_without_lowering_is_a_build_error():
    with pytest.raises(BuildError) as ei:
        build(_no_lowering_module())
    err = ei.value
    assert err.stage == "build"
    assert "CodeGenVM cannot emit this Relax operator" in err.message
    assert "R.hint_on_device" in err.message  # the offending call is shown
    assert "TVM_BACKTRACE" not in err.message
    assert "R.hint_on_device has no lowering" in err.hint
    assert err.detail  # the traceback, for "Details"


def test_not_a_module_is_a_build_error():
    with pytest.raises(BuildError):
        build("not a module")


def test_output_count_mismatch_is_a_run_error(mlp):
    class Wrap(nn.Module):
        def forward(self, x):
            return x[:, :10], x[:, :3]

    lm2 = _loaded(Wrap(), torch.randn(1, 784), name="wrap")
    br = build(mlp[1])
    with pytest.raises(RunError) as ei:
        run_and_compare(br, lm2, repeats=1)
    assert "outputs" in ei.value.message


def test_kernel_bindings_before_and_after_fusion(convbn):
    _, mod = convbn
    target = host_target()
    with target:
        legal = relax.transform.LegalizeOps()(mod)
        fused = relax.transform.FuseOps()(relax.transform.AnnotateTIROpPattern()(legal))
    kb = kernel_bindings(legal)
    assert set(kb) == _prim_names(legal)
    # before FuseTIR: main calls fused relax sub-functions; their prim funcs map to that call
    kf = kernel_bindings(fused)
    assert set(kf) == _prim_names(fused)
    main_vars = _main_vars(fused)
    assert all(b in main_vars for v in kf.values() for b in v.split(", "))


@I.ir_module
class SlowFirstCall:
    @R.function
    def main(x: R.Tensor((2, 4), "float32")):
        with R.dataflow():
            b = R.call_dps_packed("irviz_test_slow_first_call", (x,), out_ty=R.Tensor((2, 4), "float32"))
            R.output(b)
        return b


def test_kernel_times_leave_out_the_instrumented_vms_first_run():
    """A fresh VM's first run is cold (storage allocated, weights out of cache); counted, it had
    made single kernels read up to 10x their time."""
    import time

    from irviz.core.backend.kernel_times import time_kernels

    calls = []

    def slow_first(x, out):
        calls.append(1)
        if len(calls) == 1:
            time.sleep(0.3)
        out.copyfrom(x)

    tvm.register_global_func("irviz_test_slow_first_call", slow_first, override=True)
    x = tvm.runtime.tensor(np.ones((2, 4), "float32"))
    (kt,) = time_kernels(build(SlowFirstCall), tvm.cpu(), [x], model_ms=None, repeats=3).kernels
    assert len(calls) >= 4 and kt.calls == 1
    assert kt.ms < 30, kt  # the 300 ms first call would have added 100 ms to the mean of three
