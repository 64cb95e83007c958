"""Decisions measured on the machine: the vector width from the target, library-or-TensorIR and
conv2d tiles chosen from timings (mocked here, so the choice is known), read back from the cache,
failing candidates dropped, a corrupt cache ignored and rewritten."""
from __future__ import annotations

import json

import numpy as np
import pytest
import tvm
from tvm import relax

from irviz.core import target as cpu_info
from irviz.core.backend import timing
from irviz.core.backend.library_functions import library_calls
from irviz.core.passes.registry import PassInvocation, apply_pass
from irviz.core.tuning import decision_cache, measuring, tile_search
from irviz.core.views import decisions


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("IRVIZ_CACHE_DIR", str(tmp_path))
    # a quiet machine whatever the real one's load: how that is judged has tests of its own
    monkeypatch.setattr(timing, "load_average", lambda: 0.0)
    monkeypatch.setattr(timing, "contention", lambda t, threads=1: None)
    decision_cache.set_cache_enabled(True)
    yield tmp_path
    decision_cache.set_cache_enabled(True)


@pytest.mark.parametrize("target, isa, lanes", [
    ({"kind": "llvm", "mcpu": "skylake-avx512"}, "AVX-512", 16),
    ({"kind": "llvm", "mcpu": "haswell"}, "AVX2", 8),
    ({"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mcpu": "cortex-a72"}, "NEON", 4),
])
def test_vector_width_comes_from_the_target_features(target, isa, lanes):
    assert cpu_info.vector_isa(tvm.target.Target(target)) == (isa, lanes)


def test_host_cpu_is_named_with_its_vector_width():
    info = cpu_info.cpu_info()
    assert info.model and info.mcpu and info.vector_lanes in (1, 4, 8, 16)
    assert f"{info.vector_lanes} float32 lanes" in info.summary()


def _conv_module(out_channels=16):
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 8, 14, 14), "float32"))
    w = relax.const(np.random.default_rng(0).standard_normal((out_channels, 8, 3, 3)).astype("float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.conv2d(x, w, padding=(1, 1)))
            o = bb.emit_output(y)
        bb.emit_func_output(o)
    return bb.get()


def _fake_timer(torch_ms, tir_ms, calls):
    """Stand-in for building and timing: torch's module calls irviz.torch.*, TensorIR's does not."""
    real = measuring.build_and_time

    def timed(mod, inputs):
        _, out = real(mod, inputs)  # still built and run: the numbers are checked
        is_torch = bool(library_calls(mod))
        calls.append("torch" if is_torch else "tir")
        return (torch_ms if is_torch else tir_ms), out
    return timed


@pytest.mark.parametrize("torch_ms, tir_ms, goes_to_torch", [(1.0, 2.0, True), (2.0, 1.0, False)])
def test_library_dispatch_keeps_the_faster_and_reads_it_back_from_the_cache(
        cache_dir, monkeypatch, torch_ms, tir_ms, goes_to_torch):
    calls = []
    monkeypatch.setattr(measuring, "build_and_time", _fake_timer(torch_ms, tir_ms, calls))
    monkeypatch.setattr(tile_search, "search", lambda *a, **k: None)  # tiles: another test
    out = apply_pass(PassInvocation("LibraryDispatch", {"measure": True}), _conv_module())
    assert bool(library_calls(out)) == goes_to_torch
    # the call both ways; when torch wins, the whole model both ways too
    assert sorted(calls) == (["tir", "tir", "torch", "torch"] if goes_to_torch else ["tir", "torch"])
    [rec] = [d for d in decisions.decisions_of(out) if d["kind"] == "library_or_tir"]
    assert rec["torch_ms"] == torch_ms and rec["tir_ms"] == tir_ms
    assert rec["choice"] == ("torch" if goes_to_torch else "tir")
    assert decisions.describe_decision(rec).endswith("→ torch" if goes_to_torch else "→ TIR")
    # the file names the machine; a second run measures nothing
    saved = json.loads((cache_dir / "cpu_decisions.json").read_text())
    assert saved["format"] == decision_cache.FORMAT
    [machine] = saved["machines"]
    assert json.loads(machine)["lanes"] == cpu_info.cpu_info().vector_lanes
    calls.clear()
    again = apply_pass(PassInvocation("LibraryDispatch", {"measure": True}), _conv_module())
    assert calls == []
    assert bool(library_calls(again)) == goes_to_torch
    # --no-cache: measured again
    decision_cache.set_cache_enabled(False)
    apply_pass(PassInvocation("LibraryDispatch", {"measure": True}), _conv_module())
    assert sorted(calls) == (["tir", "tir", "torch", "torch"] if goes_to_torch else ["tir", "torch"])


def test_a_library_call_that_raises_is_never_chosen(cache_dir, monkeypatch):
    real = measuring.build_and_time

    def timed(mod, inputs):
        if library_calls(mod):
            raise RuntimeError("torch refused this call")
        return 5.0, real(mod, inputs)[1]

    monkeypatch.setattr(measuring, "build_and_time", timed)
    monkeypatch.setattr(tile_search, "search", lambda *a, **k: None)
    out = apply_pass(PassInvocation("LibraryDispatch", {"measure": True}), _conv_module())
    [rec] = decisions.decisions_of(out)
    assert rec["choice"] == "tir" and rec["torch_ms"] is None
    assert any("torch call failed: torch refused this call" in n for n in rec["notes"])


FUSE_STEPS = ("LegalizeOps", "AnnotateTIROpPattern", "FoldConstant", "FuseOps", "FuseTIR")


def _apply(mod, names):
    for name in names:
        mod = apply_pass(PassInvocation(name), mod)
    return mod


def _fused_conv(out_channels=16):
    return _apply(_conv_module(out_channels), FUSE_STEPS)


def test_tile_search_keeps_the_fastest_and_drops_a_failing_candidate(cache_dir, monkeypatch):
    mod = _fused_conv()
    real = measuring.build_and_time
    seen = []

    def timed(m, inputs):
        conv = next(f for gv, f in m.functions.items() if isinstance(f, tvm.tirx.PrimFunc)
                    and "conv2d" in gv.name_hint)
        tile = {str(k): int(v) for k, v in conv.attrs["irviz.conv_tile"].items()}
        seen.append(tile)
        if len(seen) == 2:
            raise RuntimeError("candidate did not build")
        ms, out = real(m, inputs)
        return (0.5 if len(seen) == 3 else 9.0), out

    monkeypatch.setattr(measuring, "build_and_time", timed)
    out = apply_pass(PassInvocation("CPUTuneConv2d", {"lanes": 8}), mod)
    [rec] = [d for d in decisions.decisions_of(out) if d["kind"] == "conv2d_tile"]
    assert 2 < len(rec["candidates"]) <= tile_search.MAX_CANDIDATES
    assert rec["candidates"][1]["error"] == "candidate did not build"
    assert rec["choice"] == {k: seen[2][k] for k in ("vec", "reg")}
    # CPUTileConv2d applies the measured tile, and the model still computes the same numbers
    tiled = apply_pass(PassInvocation("CPUTileConv2d", {"lanes": 8}), out)
    kernel = next(f for gv, f in tiled.functions.items() if gv.name_hint == rec["kernel"])
    note = str(kernel.attrs["irviz.schedule_notes"]["CPUTileConv2d"])
    assert f"{rec['choice']['vec']} output channels per vector" in note and "tile measured" in note


def test_a_candidate_with_wrong_numbers_is_dropped(cache_dir, monkeypatch):
    real = measuring.build_and_time
    n = [0]

    def timed(m, inputs):
        ms, out = real(m, inputs)
        n[0] += 1
        return (0.1, out + 1.0) if n[0] == 2 else (1.0, out)

    monkeypatch.setattr(measuring, "build_and_time", timed)
    out = apply_pass(PassInvocation("CPUTuneConv2d", {"lanes": 8}), _fused_conv())
    [rec] = [d for d in decisions.decisions_of(out) if d["kind"] == "conv2d_tile"]
    assert "numbers differ" in rec["candidates"][1]["error"]
    assert rec["choice"] != {k: rec["candidates"][1][k] for k in ("vec", "reg")}


@pytest.mark.parametrize("content", ["{not json", json.dumps({"format": "something-else", "machines": {}}),
                                     json.dumps({"format": decision_cache.FORMAT, "machines": [1, 2]})])
def test_a_corrupt_or_foreign_cache_is_ignored_with_a_warning_and_rewritten(cache_dir, content):
    path = cache_dir / "cpu_decisions.json"
    path.write_text(content)
    with pytest.warns(UserWarning, match="ignoring the decision cache"):
        cache = decision_cache.DecisionCache(path)
    assert cache.get("anything") is None
    cache.put("conv2d 1x1", {"choice": "tir"})
    data = json.loads(path.read_text())
    assert data["format"] == decision_cache.FORMAT
    assert decision_cache.DecisionCache(path).get("conv2d 1x1") == {"choice": "tir"}


def test_two_processes_writing_the_cache_keep_each_others_decisions(cache_dir):
    path = cache_dir / "cpu_decisions.json"
    engine, check = decision_cache.DecisionCache(path), decision_cache.DecisionCache(path)  # both read it empty
    engine.put("kernel-ms a", {"ms": 1.0})
    check.put("kernel-ms b", {"ms": 2.0})  # written after, from a view that never saw a
    engine.put("kernel-ms c", {"ms": 3.0})
    later = decision_cache.DecisionCache(path)
    assert {k: v["ms"] for k, v in later.entries.items()} == {"kernel-ms a": 1.0, "kernel-ms b": 2.0,
                                                               "kernel-ms c": 3.0}
    check.put("kernel-ms a", {"ms": 1.5})  # a new measurement of the same kernel wins
    assert decision_cache.DecisionCache(path).get("kernel-ms a") == {"ms": 1.5}
    assert check.get("kernel-ms c") == {"ms": 3.0}  # and a write reads the others' in


def test_remeasure_applies_the_passes_again_measuring_afresh(cache_dir, monkeypatch):
    from irviz.core.passes import get_pipeline
    from irviz.core.workspace import Workspace

    ws = Workspace()
    ws.open("sample:small_cnn")
    pipeline = get_pipeline("fast-cpu")
    upto = [i.name for i in pipeline].index("LibraryDispatch") + 1
    ws.set_pipeline(pipeline[:upto + 1])
    for _ in range(upto):
        ws.step()
    done = ["import", *(i.name for i in pipeline[:upto])]
    assert done[-1] == "LibraryDispatch" and [st.pass_name for st in ws.session.steps] == done
    calls = []
    monkeypatch.setattr(measuring, "build_and_time", _fake_timer(3.0, 1.0, calls))
    monkeypatch.setattr(tile_search, "search", lambda *a, **k: None)
    ws.remeasure()  # the cache holds the first decisions; remeasure times them again
    assert sorted(calls) == ["tir", "tir", "torch", "torch"]  # a conv2d and a matmul, both ways
    assert [st.pass_name for st in ws.session.steps] == done
    assert [i.name for i in ws.planned()] == ["LegalizeOps"]
    recs = decisions.decisions_of(ws.session.module())
    assert {r["choice"] for r in recs} == {"tir"} and {r["tir_ms"] for r in recs} == {1.0}
    assert decision_cache.cache_enabled()


def test_tile_search_passes_over_kernels_without_a_root_block(cache_dir):
    # an extern kernel (TVM's sort, as Mixtral's top-k routing has) has no block to tile
    from tvm import topi

    bb = relax.BlockBuilder()
    v = relax.Var("v", relax.TensorType((4, 8), "float32"))
    with bb.function("main", [v]):
        with bb.dataflow():
            o = bb.emit_output(bb.emit_te(topi.sort, v, axis=1))
        bb.emit_func_output(o)
    out = apply_pass(PassInvocation("CPUTuneConv2d", {"lanes": 8}), bb.get())
    assert decisions.decisions_of(out) == []



def _two_convs(both_outputs: bool = False):
    """Two conv2d + relu in a row: a model where the whole can disagree with its calls
    (`both_outputs`: it returns both relus, a tuple)."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 8, 14, 14), "float32"))
    rng = np.random.default_rng(0)
    w1 = relax.const(rng.standard_normal((8, 8, 3, 3)).astype("float32"))
    w2 = relax.const(rng.standard_normal((16, 8, 3, 3)).astype("float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.relu(relax.op.nn.conv2d(x, w1, padding=(1, 1))))
            z = relax.op.nn.relu(relax.op.nn.conv2d(y, w2, padding=(1, 1)))
            o = bb.emit_output(relax.Tuple([y, bb.emit(z)]) if both_outputs else z)
        bb.emit_func_output(o)
    return bb.get()


def _calls_win_alone_and_lose_whole():
    """A build_and_time that still builds and runs (the outputs are checked) but reports: each call
    alone, torch 1 ms and TensorIR 2 ms; the whole model, torch 9 ms and TensorIR 3 ms."""
    real = measuring.build_and_time

    def timed(mod, inputs):
        _, out = real(mod, inputs)
        text = mod["main"].script()
        is_torch = "irviz.torch." in text
        whole = text.count("R.call_tir(") + text.count("R.call_dps_packed(") >= 2
        return ((9.0 if is_torch else 3.0) if whole else (1.0 if is_torch else 2.0)), out
    return timed


def test_the_whole_model_overrules_calls_that_win_alone_but_lose_in_the_model(cache_dir, monkeypatch):
    monkeypatch.setattr(measuring, "build_and_time", _calls_win_alone_and_lose_whole())
    monkeypatch.setattr(tile_search, "search", lambda *a, **k: None)
    out = apply_pass(PassInvocation("LibraryDispatch", {"measure": True}), _two_convs())
    assert library_calls(out) == []
    recs = decisions.decisions_of(out)
    [whole] = [r for r in recs if r["kind"] == "whole_model"]
    assert (whole["torch_ms"], whole["tir_ms"], whole["choice"]) == (9.0, 3.0, "tir")
    calls = [r for r in recs if r["kind"] == "library_or_tir"]
    assert len(calls) == 2 and all(r["choice"] == "tir" for r in calls)
    assert all("whole model ran faster all in TensorIR" in " ".join(r["notes"]) for r in calls)


def _fused_matmul(m=32, k=64, n=64):
    """x @ w + b through the pipeline up to the matmul tile search: one fused matmul kernel."""
    bb = relax.BlockBuilder()
    rng = np.random.default_rng(1)
    x = relax.Var("x", relax.TensorType((m, k), "float32"))
    w = relax.const(rng.standard_normal((k, n)).astype("float32"))
    b = relax.const(rng.standard_normal((n,)).astype("float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            o = bb.emit_output(relax.op.add(relax.op.matmul(x, w), b))
        bb.emit_func_output(o)
    return _apply(bb.get(), FUSE_STEPS + ("CPUInlineElementwise",))


def test_matmul_tile_search_keeps_the_fastest_and_the_rule_applies_it(cache_dir, monkeypatch):
    mod = _fused_matmul()
    real = measuring.build_and_time
    seen = []

    def timed(m, inputs):
        kernel = next(f for f in m.functions.values() if isinstance(f, tvm.tirx.PrimFunc)
                      and f.attrs is not None and "irviz.reduction_tile" in f.attrs)
        seen.append({str(k): int(v) for k, v in kernel.attrs["irviz.reduction_tile"].items()})
        ms, out = real(m, inputs)
        if len(seen) == 2:
            raise RuntimeError("candidate did not build")
        return (0.5 if len(seen) == 4 else 9.0), out

    monkeypatch.setattr(measuring, "build_and_time", timed)
    out = apply_pass(PassInvocation("CPUTuneReductions", {"lanes": 8}), mod)
    [rec] = [d for d in decisions.decisions_of(out) if d["kind"] == "matmul_tile"]
    assert 3 < len(rec["candidates"]) <= tile_search.MAX_CANDIDATES
    rule = tile_search.schedules.reduction_tile_rule([32, 64], 8)
    # the rule's own tile first, with the spread of its runs
    assert {k: v for k, v in rec["candidates"][0].items() if k != "spread"} == {**rule, "ms": 9.0}
    assert rec["candidates"][1]["error"] == "candidate did not build"
    assert rec["choice"] == seen[3] != seen[0]
    assert "fastest of" in decisions.describe_tile(rec)
    # CPUTileReductions applies the measured tile; the numbers stay the same
    tiled = apply_pass(PassInvocation("CPUTileReductions", {"lanes": 8}), out)
    kernel = next(f for gv, f in tiled.functions.items() if gv.name_hint == rec["kernel"])
    note = str(kernel.attrs["irviz.schedule_notes"]["CPUTileReductions"])
    shown = (f"{rec['choice']['reg']}x" if rec["choice"]["reg"] > 1 else "") + f"{rec['choice']['vec']}"
    assert f"tiled {shown} (tile measured)" in note
    ins = [np.random.default_rng(2).standard_normal((32, 64)).astype("float32")]
    untuned = apply_pass(PassInvocation("CPUTileReductions", {"lanes": 8}), mod)
    assert np.allclose(real(tiled, ins)[1], real(untuned, ins)[1],
                       rtol=1e-5, atol=1e-5)
    # read back from the cache: nothing built the second time
    seen.clear()
    again = apply_pass(PassInvocation("CPUTuneReductions", {"lanes": 8}), _fused_matmul())
    assert seen == []
    [rec2] = [d for d in decisions.decisions_of(again) if d["kind"] == "matmul_tile"]
    assert rec2["choice"] == rec["choice"]


def test_small_matmuls_keep_the_rule_tile_without_measuring(cache_dir, monkeypatch):
    calls = []
    monkeypatch.setattr(measuring, "build_and_time", lambda *a: calls.append(a))
    out = apply_pass(PassInvocation("CPUTuneReductions", {"lanes": 8}), _fused_matmul(4, 16, 16))
    assert calls == [] and decisions.decisions_of(out) == []


def test_the_kernel_table_names_the_measurements_of_a_matmul_kept_in_tensorir(cache_dir, monkeypatch):
    # the kept matmul is legalized and fused with its bias and relu: its binding name is gone, the
    # decision is found by the shapes the kernel's matmul block reads
    from irviz.core.passes import get_pipeline
    from irviz.core.workspace import Workspace

    calls = []
    monkeypatch.setattr(measuring, "build_and_time", _fake_timer(5.0, 1.0, calls))
    ws = Workspace()
    ws.open("sample:mlp")
    ws.set_pipeline(get_pipeline("fast-cpu"))
    ws.run_to_end()
    built, res = ws.build_run(repeats=2)
    decided = decisions.kernel_decisions(built.mod, res.kernels)
    # the sample's one-row matmul is a matrix-vector kernel (CPUMatVec): its panel search is named
    [(name, text)] = [(k, t) for k, t in decided.items() if "fastest of" in t]
    assert "matmul" in name
    assert text.startswith("torch 5 ms · TIR 1 ms → TIR") and "panels of" in text


def test_a_tiled_kernel_finds_the_measurement_of_the_call_it_computes():
    conv = {"kind": "library_or_tir", "workload": "conv2d 1x8x14x14*16x8x3x3c float32 s1_1.p1_1.d1_1.g1"}
    other = {"kind": "library_or_tir", "workload": "conv2d 1x8x14x14*16x8x3x3c float32 s1_1.p0_0.d1_1.g1"}
    mm = {"kind": "library_or_tir", "workload": "matmul 16x64*64x256c float32"}
    padded = {"kind": "conv2d_tile", "workload": "conv2d-tile 1x8x16x16 16x8x3x3 1x16x14x14 float32 lanes8"}
    unpadded = {"kind": "conv2d_tile", "workload": "conv2d-tile 1x8x14x14 16x8x3x3 1x16x12x12 float32 lanes8"}
    matmul = {"kind": "matmul_tile", "workload": "matmul-tile 16x64 64x256 16x256 float32 lanes8"}
    assert decisions._library_record_for_tile(padded, [mm, other, conv]) is conv
    assert decisions._library_record_for_tile(unpadded, [mm, conv, other]) is other
    assert decisions._library_record_for_tile(matmul, [conv, mm]) is mm
    assert decisions._library_record_for_tile(matmul, [conv]) is None


def test_the_measured_tensorir_side_runs_the_pipelines_steps():
    # tuning builds its TensorIR side from the passes directly (it sits below the registry)
    from irviz.core.passes import CPU_SCHEDULE_STEPS, CPU_ZERO_STEPS
    from irviz.core.tuning.library_or_tir import TIR_STEPS

    assert tuple(name for name, _ in TIR_STEPS) == CPU_ZERO_STEPS + CPU_SCHEDULE_STEPS


def test_a_matrix_vector_decision_says_why_its_panel_width_is_the_prefills():
    rec = {"kind": "matvec_tile", "workload": "matvec-tile 1x64 64x1024 1x1024 float32 lanes16 shared64",
           "choice": {"nb": 64, "unroll": 1, "par": 1},
           "candidates": [{"nb": 64, "unroll": 1, "par": 1, "ms": 0.2}, {"nb": 16, "unroll": 1, "par": 1, "ms": 0.19}],
           "shared_width": "the prefill packs this weight 64 wide: kept, so both programs share one packed copy"}
    text = decisions.describe_tile(rec)
    assert text.startswith("panels of 64 (the rule's, within the noise of the fastest)")
    assert text.endswith("both programs share one packed copy")


def test_a_model_with_several_outputs_gets_its_whole_model_verdict(cache_dir, monkeypatch):
    """ConvNeXt and ViT return tuples: their whole-model check failed on the tuple and kept the
    per-call choices unchecked."""
    monkeypatch.setattr(measuring, "build_and_time", _calls_win_alone_and_lose_whole())
    monkeypatch.setattr(tile_search, "search", lambda *a, **k: None)
    out = apply_pass(PassInvocation("LibraryDispatch", {"measure": True}), _two_convs(both_outputs=True))
    [whole] = [r for r in decisions.decisions_of(out) if r["kind"] == "whole_model"]
    assert not [n for n in whole["notes"] if "failed" in n], whole["notes"]
    assert (whole["torch_ms"], whole["tir_ms"], whole["choice"]) == (9.0, 3.0, "tir")
    assert library_calls(out) == []


def test_tensorir_is_timed_before_torch_and_the_pools_settle_between(cache_dir, monkeypatch):
    """torch's OpenMP threads spin after a call; TensorIR timed right after them lost cores to them."""
    events = []
    monkeypatch.setattr(measuring, "build_and_time", _fake_timer(2.0, 1.0, events))
    monkeypatch.setattr(measuring, "settle", lambda: events.append("settle"))
    monkeypatch.setattr(tile_search, "search", lambda *a, **k: None)
    apply_pass(PassInvocation("LibraryDispatch", {"measure": True}), _conv_module())
    assert events == ["tir", "settle", "torch"]
