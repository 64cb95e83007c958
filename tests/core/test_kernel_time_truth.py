"""Per-kernel times add up to no more than the run, or say they cannot be trusted.

The cases use registered functions that sleep, so each factor is tens of milliseconds against
microseconds, whatever the host and however busy it is."""
from __future__ import annotations

import time

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")

from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R

from irviz.core.backend.build import build
from irviz.core.backend.kernel_times import KernelTime, check_alone, check_sum, sum_limit_ms
from irviz.core.backend.run import run_module


@I.ir_module
class TwoExterns:
    @R.function
    def main(x: R.Tensor((2, 4), "float32")):
        with R.dataflow():
            a = R.call_dps_packed("irviz_test_kt_copy", (x,), out_ty=R.Tensor((2, 4), "float32"))
            b = R.call_dps_packed("irviz_test_kt_sleepy", (a,), out_ty=R.Tensor((2, 4), "float32"))
            c = R.add(b, x)
            R.output(c)
        return c


def _copy(x, out):
    out.copyfrom(x)


def _run(sleepy, repeats: int = 3):
    tvm.register_global_func("irviz_test_kt_copy", _copy, override=True)
    tvm.register_global_func("irviz_test_kt_sleepy", sleepy, override=True)
    mod = relax.transform.LegalizeOps()(TwoExterns)
    x = np.arange(8, dtype="float32").reshape(2, 4)
    res = run_module(build(mod), [x], repeats=repeats)
    return res, {k.name: k for k in res.kernels}


def test_kernels_that_add_up_to_more_than_the_run_are_marked_with_both_figures(monkeypatch):
    """Slow only once an instrument is set (every call after that, alone too): the timed run is
    fast, the kernel table would claim 20 ms per run."""
    slow = [False]
    set_instrument = relax.VirtualMachine.set_instrument

    def instrumented(self, instrument):
        slow[0] = True
        return set_instrument(self, instrument)

    monkeypatch.setattr(relax.VirtualMachine, "set_instrument", instrumented)

    def sleepy(x, out):
        if slow[0]:
            time.sleep(0.02)
        out.copyfrom(x)

    res, by_name = _run(sleepy)
    k = by_name["irviz_test_kt_sleepy"]
    assert res.tvm_ms < 10 <= k.ms, (res.tvm_ms, k)
    assert res.kernels_reliable is False
    total = sum(kt.ms for kt in res.kernels)
    assert f"{total:.3g} ms" in res.kernels_reason and f"{res.tvm_ms:.3g} ms" in res.kernels_reason
    # alone it is as slow as in the run: the kernel agrees with itself, the sum is what is wrong
    assert k.alone_ms is not None and k.reliable, k


@pytest.fixture
def instrumented(monkeypatch):
    """{"set": an instrument was set on some VM, "in": an instrumented VM is inside the call of
    irviz_test_kt_sleepy} (called alone, outside the VM, "in" is False)."""
    state = {"set": False, "in": False}
    set_instrument = relax.VirtualMachine.set_instrument

    def patched(self, instrument):
        import tvm_ffi

        def wrapper(func, symbol, before_run, ret_value, *args):
            state["in"] = bool(before_run) and str(symbol) == "irviz_test_kt_sleepy"
            return instrument(func, symbol, before_run, ret_value, *args)

        state["set"] = True
        return set_instrument(self, tvm_ffi.convert(wrapper))

    monkeypatch.setattr(relax.VirtualMachine, "set_instrument", patched)
    return state


def test_a_kernel_slow_only_inside_the_instrumented_run_is_marked_against_its_time_alone(instrumented):
    """Slow while the instrumented VM is inside its call, fast when called alone with the same
    arguments: that kernel is marked, with both figures per call."""
    def sleepy(x, out):
        if instrumented["in"]:
            time.sleep(0.02)
        out.copyfrom(x)

    res, by_name = _run(sleepy)
    k = by_name["irviz_test_kt_sleepy"]
    assert k.ms >= 10 and k.alone_ms is not None and k.alone_ms < k.ms / 4, k
    assert k.reliable is False and "timed alone" in k.reason and f"{k.ms / k.calls:.3g} ms per call" in k.reason
    assert by_name["irviz_test_kt_copy"].reliable
    assert res.kernels_reliable is False  # and 20 ms of kernels in a run of microseconds


def test_a_kernel_that_fails_when_called_alone_leaves_the_run_and_its_figure(instrumented):
    def picky(x, out):
        if instrumented["set"] and not instrumented["in"]:
            raise ValueError("only inside a run")
        if instrumented["in"]:  # over the sum's limit: the slowest kernel is then timed alone
            time.sleep(0.02)
        out.copyfrom(x)

    res, by_name = _run(picky)
    k = by_name["irviz_test_kt_sleepy"]
    assert k.alone_ms is None and k.reliable and k.reason is None, k
    assert res.kernels_reliable is False


def test_kernels_whose_figures_hold_are_not_timed_alone():
    """Alone, a kernel's operands stay in cache: comparing figures that hold would only risk
    marking a kernel that streams its weights in the run."""
    def steady(x, out):
        time.sleep(0.005)
        out.copyfrom(x)

    res, _ = _run(steady)
    if res.kernels_reliable:  # a busy machine competing with the runs is a doubt of its own
        assert all(k.alone_ms is None for k in res.kernels), res.kernels


def test_a_consistent_model_stays_reliable():
    """5 ms of sleep per call, in the run and alone: the kernels add up to the run's time."""
    def sleepy(x, out):
        time.sleep(0.005)
        out.copyfrom(x)

    res, by_name = _run(sleepy)
    total = sum(k.ms for k in res.kernels)
    assert 4 <= by_name["irviz_test_kt_sleepy"].ms <= total <= sum_limit_ms(res.tvm_ms, sum(k.calls for k in res.kernels))
    # competition for the cores (another process) may still mark the runs, never the sum
    assert res.kernels_reliable or res.kernels_reason.startswith("the instrumented runs were competed with"), \
        res.kernels_reason
    assert all(k.reliable for k in res.kernels), res.kernels


def test_a_run_slowed_now_and_then_does_not_skew_the_kernel():
    """Every third call sleeps 30 ms: the mean of three runs made that 10 ms per run, the median
    of the runs says what a run takes."""
    count = [0]

    def sleepy(x, out):
        count[0] += 1
        if count[0] % 3 == 0:
            time.sleep(0.03)
        out.copyfrom(x)

    res, by_name = _run(sleepy)
    assert by_name["irviz_test_kt_sleepy"].ms < 5, by_name["irviz_test_kt_sleepy"]


def test_the_checks_state_both_figures():
    ks = [KernelTime("a", 2, 4.3, None), KernelTime("b", 1, 0.07, None)]
    assert check_sum(ks, 0.513) is not None and "4.37 ms" in check_sum(ks, 0.513) and "0.513 ms" in check_sum(ks, 0.513)
    assert check_sum(ks, 4.0) is None  # within 1.25x
    assert check_sum(ks, float("nan")) is None and check_sum([], 1.0) is None
    a = KernelTime("a", 2, 4.33, None, alone_ms=0.138)
    assert "2.17 ms per call in the run, 0.069 ms per call timed alone with the same arguments (31× apart)" in check_alone(a)
    # microseconds apart are the instrument's own cost, not a disagreement
    assert check_alone(KernelTime("t", 1, 0.0009, None, alone_ms=0.0002)) is None
    assert check_alone(KernelTime("n", 1, 1.0, None)) is None  # not re-timed


def _fake_result():
    from irviz.core.backend.run import RunResult

    why = check_alone(KernelTime("fused_matmul_add1_prepacked", 2, 4.33, "lv3", alone_ms=0.138))
    kernels = [KernelTime("fused_matmul_add1_prepacked", 2, 4.33, "lv3", reliable=False, reason=why, alone_ms=0.138),
               KernelTime("fused_matmul_add2_prepacked", 2, 0.138, "lv5", alone_ms=0.13)]
    return RunResult(max_abs_error=0.0, max_rel_error=0.0, allclose=True, outputs=1, tvm_ms=0.513,
                     torch_ms=0.9, kernels=kernels, threads=2, kernels_reliable=False,
                     kernels_reason=check_sum(kernels, 0.513))


def test_check_json_and_its_text_carry_the_marks():
    from irviz.cli.check import kernel_fields

    res, lines = _fake_result(), []
    out = kernel_fields(res, lines.append)
    assert out["kernels_reliable"] is False and "0.513 ms" in out["kernels_reason"]
    first, second = out["kernels"]
    assert first["reliable"] is False and "timed alone" in first["reason"] and first["alone_ms"] == 0.138
    assert second["reliable"] is True and second["reason"] is None
    assert any(s.startswith("kernels  unreliable: the kernels add up to 4.47 ms per run, more than the "
                            "whole run's 0.513 ms") for s in lines), lines
    assert any(s.startswith("kernel   fused_matmul_add1_prepacked: unreliable: 2.17 ms per call") for s in lines)


def test_the_report_marks_the_kernel_table():
    from irviz.core.export.report import _render_run, run_dict

    res = _fake_result()
    d = run_dict(res)
    assert d["kernels_reliable"] is False and d["kernels"][0]["reliable"] is False
    html = _render_run(3, res)
    assert "<details open>" in html and "kernel times unreliable: the kernels add up to 4.47 ms" in html
    assert "unreliable: 2.17 ms per call in the run, 0.069 ms per call timed alone" in html
    calm = _fake_result()
    calm.kernels_reliable, calm.kernels_reason = True, None
    calm.kernels[0].reliable, calm.kernels[0].reason = True, None
    assert "unreliable" not in _render_run(3, calm)
