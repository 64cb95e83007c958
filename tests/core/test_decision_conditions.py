"""A CPU decision measured while the machine was busy, or too close to call, is used by the run that
measured it but cached as provisional: reused while the machine stays busy, measured again once it is
quiet, and shown as provisional wherever decisions are shown. The load reading is faked here, never
the real machine's."""
from __future__ import annotations

import json

import numpy as np
import pytest
from tvm import relax

from irviz.core.backend import timing
from irviz.core.backend.library_functions import library_calls
from irviz.core.passes.registry import PassInvocation, apply_pass
from irviz.core.tuning import conditions, decision_cache, measuring
from irviz.core.views import decisions

BUSY, QUIET = 1e6, 0.0  # load averages no machine is above / below the limits
REAL_CONTENTION = timing.contention


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """The cache in tmp_path and a load reading the test sets: machine["load"]."""
    state = {"load": QUIET, "dir": tmp_path}
    monkeypatch.setenv("IRVIZ_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(timing, "load_average", lambda: state["load"])
    # the real blocks' own contention (what this test machine's neighbours do) is not under test here
    monkeypatch.setattr(timing, "contention", lambda t, threads=1: None)
    decision_cache.set_cache_enabled(True)
    yield state
    decision_cache.set_cache_enabled(True)


def _next_run(monkeypatch):
    """What a new process sees: the cache read from its file again."""
    monkeypatch.setitem(decision_cache._state, "shared", None)


def _matmul(m=24, k=96, n=80):
    rng = np.random.default_rng(3)
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((m, k), "float32"))
    w = relax.const(rng.standard_normal((k, n)).astype("float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            o = bb.emit_output(relax.op.nn.relu(relax.op.matmul(x, w)))
        bb.emit_func_output(o)
    mod = bb.get()
    for name in ("LegalizeOps", "AnnotateTIROpPattern", "FoldConstant", "FuseOps", "FuseTIR",
                 "CPUInlineElementwise"):
        mod = apply_pass(PassInvocation(name), mod)
    return mod


def _fake_tile_timer(calls):
    """Every candidate built and scheduled as for real, timed by a stand-in: the second is fastest."""
    def timed(mod, inputs):
        calls.append(1)
        return (0.5 if len(calls) == 2 else 2.0), np.zeros(4, "float32")
    return timed


def _tile_record(mod):
    [rec] = [d for d in decisions.decisions_of(mod) if d["kind"] == "matmul_tile"]
    return rec


def _stored(state) -> dict:
    data = json.loads((state["dir"] / "cpu_decisions.json").read_text())
    [entries] = data["machines"].values()
    [rec] = [r for k, r in entries.items() if k.startswith("matmul-tile")]
    return rec


def test_a_tile_chosen_under_load_is_provisional_and_measured_again_once_the_machine_is_quiet(machine, monkeypatch):
    calls = []
    monkeypatch.setattr(measuring, "build_and_time", _fake_tile_timer(calls))
    machine["load"] = BUSY
    rec = _tile_record(apply_pass(PassInvocation("CPUTuneReductions", {"lanes": 8}), _matmul()))
    assert calls and rec["choice"] is not None  # used by this run
    assert rec["provisional"].startswith("measured while the machine was busy: load average")
    assert rec["measured"]["load_average"] == BUSY and rec["measured"]["threads"] >= 1
    assert "provisional: measured while the machine was busy" in decisions.describe_tile(rec)
    assert _stored(machine)["provisional"] == rec["provisional"]

    # the next run, still busy: the provisional choice is reused, not measured on noise again
    _next_run(monkeypatch)
    calls.clear()
    again = _tile_record(apply_pass(PassInvocation("CPUTuneReductions", {"lanes": 8}), _matmul()))
    assert calls == [] and again["choice"] == rec["choice"]
    assert again["provisional"] and "still busy" in again["reused"]

    # the next run on a quiet machine measures it again, and that choice is final
    _next_run(monkeypatch)
    machine["load"] = QUIET
    quiet = _tile_record(apply_pass(PassInvocation("CPUTuneReductions", {"lanes": 8}), _matmul()))
    assert calls and "provisional" not in quiet and quiet["measured"]["load_average"] == QUIET
    assert "provisional" not in decisions.describe_tile(quiet)
    assert "provisional" not in _stored(machine)

    # a final choice is reused, however busy the machine is later
    _next_run(monkeypatch)
    machine["load"] = BUSY
    calls.clear()
    final = _tile_record(apply_pass(PassInvocation("CPUTuneReductions", {"lanes": 8}), _matmul()))
    assert calls == [] and final["choice"] == quiet["choice"] and "provisional" not in final


def test_a_quiet_measurement_is_final_and_reused_on_the_next_run(machine, monkeypatch):
    calls = []
    monkeypatch.setattr(measuring, "build_and_time", _fake_tile_timer(calls))
    rec = _tile_record(apply_pass(PassInvocation("CPUTuneReductions", {"lanes": 8}), _matmul()))
    assert calls and "provisional" not in rec and rec["measured"]["contention"] is None
    _next_run(monkeypatch)
    calls.clear()
    again = _tile_record(apply_pass(PassInvocation("CPUTuneReductions", {"lanes": 8}), _matmul()))
    assert calls == [] and again["choice"] == rec["choice"]


def test_a_provisional_measurement_does_not_replace_a_final_one(machine):
    path = machine["dir"] / "cpu_decisions.json"
    cache = decision_cache.DecisionCache(path)
    cache.put("conv2d a", {"choice": "tir", "measured": {"load_average": 0.1}})
    cache.put("conv2d a", {"choice": "torch", "provisional": "measured while the machine was busy: x"})
    cache.put("conv2d b", {"choice": "torch", "provisional": "measured while the machine was busy: x"})
    later = decision_cache.DecisionCache(path)
    assert later.get("conv2d a")["choice"] == "tir"
    assert later.get("conv2d b") is None  # quiet now: measured again
    machine["load"] = BUSY
    assert later.get("conv2d b")["choice"] == "torch"


def test_library_dispatch_under_load_says_so_and_the_check_json_counts_it(machine, monkeypatch, capsys):
    from irviz.cli.main import main

    def timed(mod, inputs):  # TensorIR 1 ms, torch 5 ms; the numbers alike
        return (5.0 if library_calls(mod) else 1.0), np.zeros(4, "float32")

    monkeypatch.setattr(measuring, "build_and_time", timed)
    machine["load"] = BUSY
    code = main(["check", "sample:mlp", "--pipeline", "fast-cpu", "--json", "-"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    library = [d for d in out["decisions"] if d["kind"] == "library_or_tir"]
    assert library and all(d["provisional"].startswith("measured while the machine was busy") for d in library)
    assert all(d["measured"]["load_average"] == BUSY for d in library)
    assert out["decisions_provisional"] == sum(1 for d in out["decisions"] if d.get("provisional")) >= len(library)
    assert "provisional: measured while the machine was busy" in decisions.describe_decision(library[0])
    assert "measured decisions are provisional" in decisions.provisional_summary(out["decisions"])


def _block(median, spread, waited=0.0):
    half = median * spread / 2
    return timing.Timing(median_ms=median, min_ms=median - half, q1_ms=median - half, q3_ms=median + half,
                         runs=9, warmup=1, load=QUIET, others=0.0, waited=waited)


def test_candidates_too_close_for_their_spread_are_provisional_until_a_second_quiet_try(machine, monkeypatch):
    monkeypatch.setattr(timing, "contention", REAL_CONTENTION)
    wide = [_block(1.0, 0.3), _block(1.05, 0.3)]
    first = conditions.stamp(wide, QUIET, [(1.0, 0.3), (1.05, 0.3)], threads=2)
    assert first["provisional"].startswith("too close to call") and first["measured"]["spread"] == 0.3
    second = conditions.stamp(wide, QUIET, [(1.0, 0.3), (1.05, 0.3)], previous=first, threads=2)
    assert "provisional" not in second and "either is as fast" in second["settled"]
    # far apart, or a tie with steady runs: final at once
    assert "provisional" not in conditions.stamp(wide, QUIET, [(1.0, 0.3), (2.0, 0.3)], threads=2)
    assert "provisional" not in conditions.stamp([], QUIET, [(1.0, 0.02), (1.01, 0.02)], threads=2)
    # a block whose threads waited for a core is busy whatever the load average says
    waited = conditions.stamp([_block(1.0, 0.01, waited=1.5)], QUIET, [(1.0, 0.01), (3.0, 0.01)], threads=2)
    assert "waited for a core" in waited["provisional"]


@pytest.mark.parametrize("threads, cores, limit", [(1, 1, 1.5), (2, 2, 2.5), (8, 64, 66.0), (64, 64, 80.0),
                                                   (4, 2, 5.0)])
def test_the_load_limit_is_relative_to_the_cores_and_irvizs_threads(threads, cores, limit):
    assert conditions.load_limit(threads, cores) == limit


def test_busy_now_reads_the_load_average(machine):
    assert conditions.busy_now(threads=2) is None
    machine["load"] = BUSY
    assert "load average" in conditions.busy_now(threads=2)
