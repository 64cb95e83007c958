"""Estimated latency without running: each distinct kernel timed alone at its shapes, times its
calls; cached per CPU; symbolic sizes at the example inputs' (or --dim) values."""
from __future__ import annotations

import json

import pytest
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

from irviz.cli.main import main
from irviz.core.errors import BuildError
from irviz.core.tuning.decision_cache import DecisionCache
from irviz.core.frontend.inputs import example_dims
from irviz.core.tuning.estimate import before_rewrite, call_sites, estimate_latency
from irviz.core.workspace import Workspace


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("IRVIZ_CACHE_DIR", str(tmp_path))
    return tmp_path


def _call_tir_sites(mod) -> int:
    n = []
    relax.analysis.post_order_visit(mod["main"], lambda e: n.append(1) if isinstance(e, relax.Call)
                                    and getattr(e.op, "name", "") == "relax.call_tir" else None)
    return len(n)


@I.ir_module
class TwiceThroughAFunction:
    @T.prim_func(private=True, s_tir=True)
    def double(x: T.Buffer((T.int64(64),), "float32"), y: T.Buffer((T.int64(64),), "float32")):
        for i in range(T.int64(64)):
            with T.sblock("y"):
                vi = T.axis.spatial(T.int64(64), i)
                y[vi] = x[vi] * T.float32(2)

    @R.function(private=True)
    def block(x: R.Tensor((64,), "float32")) -> R.Tensor((64,), "float32"):
        cls = TwiceThroughAFunction
        y = R.call_tir(cls.double, (x,), out_ty=R.Tensor((64,), "float32"))
        return y

    @R.function
    def main(x: R.Tensor((64,), "float32")) -> R.Tensor((64,), "float32"):
        cls = TwiceThroughAFunction
        a = cls.block(x)
        b = cls.block(a)
        c = R.call_tir(cls.double, (b,), out_ty=R.Tensor((64,), "float32"))
        return c


def test_call_sites_count_through_the_relax_functions_main_calls(cache_dir):
    sites, notes = call_sites(TwiceThroughAFunction)
    assert [(kind, name) for kind, name, _ in sites] == [("tir", "double")] * 3
    est = estimate_latency(TwiceThroughAFunction)
    # one signature (same kernel, same shapes): timed once, called three times
    assert [(r["name"], r["calls"]) for r in est["kernels"]] == [("double", 3)]
    r = est["kernels"][0]
    assert r["total_ms"] == pytest.approx(3 * r["ms"]) and est["estimated_ms"] == pytest.approx(
        r["total_ms"] + est["vm_entry_ms"] + est["vm_other_ms"])
    assert est["measured"] == 1 and est["complete"] and not notes


def test_a_structure_only_model_is_estimated_and_the_second_estimate_reads_the_cache(cache_dir):
    ws = Workspace(log=lambda line: None)
    ws.open("sample:mlp", no_weights=True)
    assert ws.structure_only
    est = ws.estimate()
    lowered_sites = _call_tir_sites(before_rewrite(ws.step_at().mod))
    assert sum(r["calls"] for r in est["kernels"]) == lowered_sites == est["sites"]
    assert est["complete"] and est["measured"] == len(est["kernels"]) and est["cached"] == 0
    vm_ms = est["vm_entry_ms"] + est["vm_other_ms"]
    assert est["estimated_ms"] == pytest.approx(sum(r["total_ms"] for r in est["kernels"]) + vm_ms)
    assert 0 < est["vm_entry_ms"] < 1.0  # ms: the one call into main the run makes
    assert sum(r["share"] for r in est["kernels"]) == pytest.approx(1.0 - vm_ms / est["estimated_ms"])
    totals = [r["total_ms"] for r in est["kernels"]]
    assert totals == sorted(totals, reverse=True) and all(t > 0 for t in totals)
    matmul = next(r for r in est["kernels"] if r["name"] == "matmul")
    assert matmul["shapes"] == "1x784, 784x128"  # the weights' real shapes, with no weights
    again = ws.estimate()
    assert again["measured"] == 0 and again["cached"] == len(est["kernels"])
    assert again["estimated_ms"] == pytest.approx(est["estimated_ms"])
    assert any(k.startswith("kernel-ms ") for k in DecisionCache.shared().entries)


def test_symbolic_sizes_take_the_example_inputs_then_dim(cache_dir):
    ws = Workspace(log=lambda line: None)
    ws.open("sample:dynamic_mlp")
    mod = ws.step_at().mod
    dims, source = example_dims(mod, [(2, 8, 32)])
    assert dims == {"batch": 2, "seq": 8} and set(source.values()) == {"example inputs"}
    ws.dims = {"seq": 64}
    est = ws.estimate()
    assert est["dims"] == {"batch": 2, "seq": 64}
    assert est["dims_source"] == {"batch": "example inputs", "seq": "--dim"}
    assert est["complete"]
    shapes = " ".join(r["shapes"] for r in est["kernels"])
    assert "2x64x32" in shapes and "2x8x" not in shapes  # seq from --dim, not the example
    with pytest.raises(BuildError, match="seq"):
        estimate_latency(mod, {"batch": 2})


def test_a_step_past_call_tir_rewrite_is_estimated_from_the_last_step_before_it(cache_dir):
    ws = Workspace(log=lambda line: None)
    from irviz.core.passes import parse_pipeline

    ws.open("sample:mlp", planned=parse_pipeline("default_build"), no_weights=True)
    ws.run_to_end()
    est = ws.estimate()
    assert est["step"] == len(ws.session.steps) - 1
    assert ws.session.steps[est["from_step"]].pass_name == "RemovePurityChecking"
    assert est["complete"] and est["kernels"]


def test_check_json_carries_the_estimate_for_a_model_without_weights(cache_dir, capsys):
    code = main(["check", "sample:mlp", "--no-weights", "--json", "-"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["ok"] and out["structure_only"] and out["failed_stage"] is None
    assert out["estimated_ms"] == pytest.approx(out["estimate"]["estimated_ms"], rel=1e-3)
    assert out["estimated_ms"] > 0
    names = {r["name"] for r in out["estimate"]["kernels"]}
    assert any("matmul" in n for n in names)  # fused by check's default pipeline
    code = main(["check", "sample:mlp", "--no-weights", "--no-estimate", "--json", "-"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["estimated_ms"] is None and "estimate" not in out


def test_a_kernel_too_slow_to_time_is_extrapolated_from_its_flops(cache_dir, monkeypatch):
    from irviz.core.tuning import estimate as estimate_mod

    monkeypatch.setattr(estimate_mod, "LONG_SECONDS", 0.0)  # every kernel after the first is "slow"
    monkeypatch.setattr(estimate_mod, "RATE_FLOPS", 1.0)
    ws = Workspace(log=lambda line: None)
    ws.open("sample:mlp", no_weights=True)
    est = ws.estimate()
    timed = [r for r in est["kernels"] if not r["extrapolated"] and r["flops"] > 0]
    extra = [r for r in est["kernels"] if r["extrapolated"]]
    assert len(timed) == 1 and extra and est["extrapolated"] == len(extra)
    # smallest first: the timed one has the fewest FLOPs, the rest take its ms per FLOP
    assert all(r["flops"] >= timed[0]["flops"] for r in extra)
    per_flop = timed[0]["ms"] / timed[0]["flops"]
    assert all(r["ms"] == pytest.approx(r["flops"] * per_flop) for r in extra)
    assert est["measured"] == len(est["kernels"]) - len(extra)


@I.ir_module
class LibraryCalls:
    @R.function
    def main(a: R.Tensor((64, 32), "float32"), b: R.Tensor((32, 16), "float32")):
        c = R.call_dps_packed("irviz.torch.matmul", (a, b), out_ty=R.Tensor((64, 16), "float32"))
        d = R.call_dps_packed("irviz_test_no_such_library", (c,), out_ty=R.Tensor((64, 16), "float32"))
        return d


def test_library_calls_are_timed_or_named_as_not_estimated(cache_dir):
    est = estimate_latency(LibraryCalls)
    assert [(r["name"], r["kind"], r["calls"]) for r in est["kernels"]] == [("irviz.torch.matmul", "library", 1)]
    assert est["kernels"][0]["ms"] > 0 and est["kernels"][0]["shapes"] == "64x32, 32x16"
    (missing,) = est["not_estimated"]
    assert missing["name"] == "irviz_test_no_such_library" and missing["kind"] == "library"
    assert missing["why"] and not est["complete"]



@I.ir_module
class BigAndSmall:
    @R.function
    def main(ids: R.Tensor((1, 8), "int64"), table: R.Tensor((4096, 64), "float32"),
             w: R.Tensor((256, 64), "float32"), head: R.Tensor((256, 256), "float32"),
             h1: R.Tensor((256, 128), "float32"), h2: R.Tensor((128, 256), "float32"),
             u: R.Tensor((160, 128), "float32")):
        with R.dataflow():
            e = R.exp(u)  # 80 KB in, 80 KB out: writes the most of the cheap kernels timed
            x = R.take(table, ids, axis=0)  # 8 rows of a 1 MB table
            wt = R.permute_dims(w)  # 64 KB in, 64 KB out
            y = R.matmul(x, wt)
            ht = R.permute_dims(head)  # 256 KB in, 256 KB out
            g = R.matmul(h1, h2)  # 16.8 MFLOP
            z = R.add(R.matmul(y, ht), R.matmul(y, g))
            R.output(z, e)
        return (z, e)


def test_a_kernel_too_big_to_allocate_is_extrapolated_not_timed(cache_dir, monkeypatch):
    from irviz.core.tuning import estimate as estimate_mod

    timed = []
    real_time = estimate_mod._time

    def record(mod, kind, call):
        timed.append(sum(estimate_mod._bytes(call)))
        return real_time(mod, kind, call)

    monkeypatch.setattr(estimate_mod, "_time", record)
    monkeypatch.setattr(estimate_mod, "RATE_FLOPS", 1e5)
    monkeypatch.setattr(estimate_mod, "MAX_KERNEL_BYTES", 200_000)
    est = estimate_latency(BigAndSmall)
    assert timed and max(timed) <= 200_000  # nothing bigger was given arrays to be timed
    rows = {r["shapes"]: r for r in est["kernels"]}
    wt, e = rows["256x64"], rows["160x128"]
    assert not wt["extrapolated"] and not e["extrapolated"] and wt["ms"] > 0 and e["ms"] > 0
    take, ht = rows["4096x64, 1x8"], rows["256x256"]
    assert take["extrapolated_from"] == ht["extrapolated_from"] == "bytes"
    # by the bytes it writes: a transpose at the rate of the largest transpose timed, a gather
    # (no other of its kind) at the largest cheap kernel's, the exp
    assert ht["ms"] == pytest.approx(256 * 256 * 4 * wt["ms"] / (256 * 64 * 4))
    assert take["ms"] == pytest.approx(8 * 64 * 4 * e["ms"] / (160 * 128 * 4))  # its rows only
    # the matmuls too big to allocate compute: their FLOPs at the timed matmul's rate
    mm, g, small = rows["1x8x256, 256x256"], rows["256x128, 128x256"], rows["1x8x64, 64x256"]
    assert not small["extrapolated"] and mm["calls"] == 2
    assert mm["extrapolated_from"] == g["extrapolated_from"] == "FLOPs"
    assert g["ms"] == pytest.approx(g["flops"] * small["ms"] / small["flops"])
    assert est["extrapolated"] == 4 and est["complete"]
    assert est["estimated_ms"] == pytest.approx(sum(r["total_ms"] for r in est["kernels"]) + est["vm_entry_ms"]
                                                + est["vm_other_ms"])


def test_a_kernel_too_big_with_nothing_to_extrapolate_from_is_named(cache_dir, monkeypatch):
    from irviz.core.tuning import estimate as estimate_mod

    monkeypatch.setattr(estimate_mod, "MAX_KERNEL_BYTES", 0)  # every kernel is too big to extrapolate from
    monkeypatch.setattr(estimate_mod, "KERNEL_BYTES", 0)  # and to time, even in place
    est = estimate_latency(BigAndSmall)
    assert not est["kernels"] and est["measured"] == 0 and not est["complete"]
    assert all("and none was; timed alone:" in m["why"] and "one kernel may take to time" in m["why"]
               for m in est["not_estimated"])


def test_random_operands_are_drawn_into_the_tensor_without_a_numpy_copy(monkeypatch):
    import tracemalloc

    import numpy as np

    from irviz.core.tuning import measuring

    monkeypatch.setattr(measuring, "_CHUNK_BYTES", 1 << 20)
    tracemalloc.start()
    try:
        t = measuring.random_tensor((2048, 1024), "float32", 3)  # 8 MB, drawn 1 MB at a time
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    a = t.numpy()
    assert peak < 3 << 20  # numpy's scratch (traced) stays near a chunk; the tensor is TVM's
    assert a.shape == (2048, 1024) and a.dtype == np.float32
    assert -0.1 <= a.min() < -0.09 and 0.09 < a.max() <= 0.1
    assert not np.array_equal(a[0], a[256])  # each chunk draws its own values
    b = measuring.random_tensor((64, 8), "bfloat16", 1).numpy().astype("float32")  # no DLPack view
    assert b.shape == (64, 8) and 0 < np.abs(b).max() < 1 and len(np.unique(b)) > 100  # drawn, not zeros


def test_a_tensor_of_one_row_at_a_narrow_dtype_is_drawn_in_chunks_too(monkeypatch):
    """Shaped like SAM's 1 x heads x tokens x tokens attention mask: a leading size of 1 and a
    dtype numpy draws through float64."""
    import tracemalloc

    import numpy as np

    from irviz.core.tuning import measuring

    monkeypatch.setattr(measuring, "_CHUNK_BYTES", 1 << 20)
    tracemalloc.start()
    try:
        t = measuring.random_tensor((1, 4, 1024, 1024), "float16", 5)  # 8 MB; 64 MB of float64 at once
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    a = t.numpy()
    assert peak < 4 << 20
    assert a.shape == (1, 4, 1024, 1024) and a.dtype == np.float16 and len(np.unique(a[0, 3])) > 100


@I.ir_module
class BigTranspose:
    @T.prim_func(private=True, s_tir=True)
    def transpose(a: T.Buffer((T.int64(256), T.int64(128)), "float32"),
                  b: T.Buffer((T.int64(128), T.int64(256)), "float32")):
        for i, j in T.grid(T.int64(128), T.int64(256)):
            with T.sblock("t"):
                vi, vj = T.axis.remap("SS", [i, j])
                b[vi, vj] = a[vj, vi]

    @T.prim_func(private=True, s_tir=True)
    def row_sum(a: T.Buffer((T.int64(256), T.int64(128)), "float32"),
                b: T.Buffer((T.int64(128), T.int64(256)), "float32"),
                s: T.Buffer((T.int64(256),), "float32")):
        for i, k in T.grid(T.int64(256), T.int64(128)):
            with T.sblock("s"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    s[vi] = T.float32(0)
                s[vi] = s[vi] + a[vi, vk] + b[vk, vi]

    @R.function
    def main(x: R.Tensor((256, 128), "float32")):
        cls = BigTranspose
        y = R.call_tir(cls.transpose, (x,), out_ty=R.Tensor((128, 256), "float32"))
        s = R.call_tir(cls.row_sum, (x, y), out_ty=R.Tensor((256,), "float32"))
        return s


def test_a_kernel_over_the_memory_budget_writes_over_an_operand_or_is_named(cache_dir, monkeypatch):
    from irviz.core.tuning import estimate as estimate_mod

    # 128 KB in and 128 KB out: over a 200 KB budget, so the transpose writes over its operand; the
    # row sum's operands alone (256 KB) are over it, so it is not timed
    monkeypatch.setattr(estimate_mod, "KERNEL_BYTES", 200 * 1024)
    est = estimate_latency(BigTranspose)
    (row,) = est["kernels"]
    assert row["name"] == "transpose" and row["in_place"] and row["ms"] > 0
    (missing,) = est["not_estimated"]
    assert missing["name"] == "row_sum" and "over the" in missing["why"]
    # the second estimate reads the transpose from the cache, still marked in place
    again = estimate_latency(BigTranspose)
    assert again["kernels"][0]["cached"] and again["kernels"][0]["in_place"]


def test_the_in_place_module_writes_the_output_over_the_operand():
    import numpy as np
    import tvm

    from irviz.core.backend.build import build
    from irviz.core.tuning import measuring

    lowered = before_rewrite(BigTranspose)
    sites, _ = call_sites(lowered)
    call = sites[0][2]
    assert measuring.in_place_operand(call) == 0
    small, inputs = measuring.call_tir_in_place_module(lowered, call, 0, tensors=True)
    (x,) = inputs
    before = x.numpy().copy()
    vm = relax.VirtualMachine(build(small).executable, tvm.cpu())
    out = vm["main"](x).numpy()
    after = x.numpy()
    assert out.shape == (128, 256)
    assert not np.array_equal(after, before)  # the kernel wrote into the operand's memory
    np.testing.assert_array_equal(after.reshape(-1), out.reshape(-1))  # the output is that memory


def test_the_vm_call_overhead_is_measured_once_per_cpu_and_kept(cache_dir):
    import numpy as np
    import tvm

    from irviz.core.backend.build import build
    from irviz.core.tuning import vm_overhead

    vm = relax.VirtualMachine(build(vm_overhead.chain_module(5)).executable, tvm.cpu())
    assert vm["main"](tvm.runtime.tensor(np.zeros(1, "float32"))).numpy()[0] == 5.0  # 5 calls
    rec = vm_overhead.vm_call_overhead()
    assert 0 < rec["entry_ms"] < 1.0 and 0 < rec["call_ms"] < 1.0  # ms: a call into the VM is µs, not ms
    assert vm_overhead.vm_call_overhead() == rec  # the second comes from the cache
    assert DecisionCache.shared().get(f"vm-call-overhead {vm_overhead.host_target()}")["entry_ms"] == rec["entry_ms"]


def test_each_kernel_figure_loses_the_call_into_main_which_the_total_counts_once(cache_dir, monkeypatch):
    from irviz.core.tuning import estimate as estimate_mod

    none = {"entry_ms": 0.0, "call_ms": 0.0, "instr_ms": 0.0, "call_instrs": 3.0, "base_instrs": 4.0}
    monkeypatch.setattr(estimate_mod, "vm_call_overhead", lambda fresh=False: none)
    raw = {r["name"]: r["ms"] for r in estimate_latency(TwiceThroughAFunction)["kernels"]}
    entry = raw["double"] / 2
    monkeypatch.setattr(estimate_mod, "vm_call_overhead", lambda fresh=False: {**none, "entry_ms": entry})
    est = estimate_latency(TwiceThroughAFunction)  # the kernel's raw figure from the cache
    (row,) = est["kernels"]
    assert row["cached"] and row["ms"] == pytest.approx(raw["double"] - entry)
    assert est["estimated_ms"] == pytest.approx(3 * (raw["double"] - entry) + entry)
    assert est["vm_entry_ms"] == entry


def test_without_weights_what_a_build_with_them_folds_is_left_out(cache_dir, monkeypatch):
    pytest.importorskip("transformers", reason="sample:hf_llama needs the hf extra")
    from irviz.core.passes import parse_pipeline
    from irviz.core.tuning import estimate as estimate_mod
    from irviz.core.tuning.estimate import weight_only_calls

    def opened(no_weights, pipeline="zero"):
        ws = Workspace(log=lambda line: None)
        ws.open("sample:hf_llama", no_weights=no_weights, planned=parse_pipeline(pipeline))
        ws.run_to_end()
        return ws

    with_weights, without = opened(False), opened(True)
    lowered = before_rewrite(without.step_at().mod)
    once = weight_only_calls(lowered)
    names = {c.args[0].name_hint for c in once}
    # the weights' transposes and the rotary tables computed from inv_freq; not the causal mask,
    # computed from constants alone, which FoldConstant leaves with the weights bound too
    assert any(n.startswith("transpose") for n in names) and "cumsum" not in names
    weighted = before_rewrite(with_weights.step_at().mod)
    assert weight_only_calls(weighted) == []  # no weight parameters
    est = without.estimate()
    assert est["folded"] and sum(f["calls"] for f in est["folded"]) == len(once)
    # what is left is what the build with weights runs: as many kernel calls
    assert est["sites"] == len(call_sites(weighted)[0]) == len(call_sites(lowered)[0]) - len(once)
    assert sum(r["calls"] for r in est["kernels"]) == est["sites"]
    # default_build has no FoldConstant: with the weights bound its run transposes them too
    seen = {}
    monkeypatch.setattr(estimate_mod, "estimate_latency", lambda *a, **kw: seen.update(kw) or {})
    opened(True, "default_build").estimate()
    assert seen["fold_weights"] is False


def test_what_main_runs_besides_its_kernel_calls_is_counted_in_vm_instructions(cache_dir):
    from irviz.core.frontend.inputs import bind_sizes
    from irviz.core.tuning.vm_overhead import chain_module, vm_call_overhead, vm_instructions

    one, chain = vm_instructions(chain_module(1)), vm_instructions(chain_module(9))
    assert 8 * 3 <= chain - one <= 8 * 4  # a call: its output's allocation, the kernel, a kill or two
    vm = vm_call_overhead()
    assert 3 <= vm["call_instrs"] <= 4 and 0 < vm["instr_ms"] < vm["call_ms"]
    ws = Workspace(log=lambda line: None)
    ws.open("sample:dynamic_mlp")
    est = ws.estimate()
    # symbolic sizes: main checks and computes shapes as it runs, which the sizes bound for the
    # kernels' timing would hide
    unbound = before_rewrite(ws.step_at().mod)
    assert vm_instructions(unbound) > vm_instructions(bind_sizes(unbound, est["dims"], "main"))
    assert est["vm_other_instructions"] == pytest.approx(
        vm_instructions(unbound) - vm["base_instrs"] - est["sites"] * vm["call_instrs"])
    assert est["vm_other_instructions"] > 0
    assert est["estimated_ms"] == pytest.approx(sum(r["total_ms"] for r in est["kernels"]) + est["vm_entry_ms"]
                                                + est["vm_other_instructions"] * vm["instr_ms"])


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        return int(f.read().split("VmRSS:")[1].split()[0]) / 1024


def test_the_outputs_of_kernels_timed_alone_are_not_kept_after_their_timing(cache_dir):
    """The VM's pooled allocator keeps each output size it allocated; kernels of distinct output
    sizes (as a ViT's are) must not add up in the engine."""
    from tvm import tirx

    n = 1 << 24  # 64 MB of float32 per output
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((n + 4 * 1024,), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            outs = [bb.emit(relax.op.strided_slice(x, [0], [tirx.IntImm("int64", 0)],
                                                   [tirx.IntImm("int64", n + k * 1024)]))
                    for k in range(4)]
            gv = bb.emit_output(relax.Tuple(outs))
        bb.emit_func_output(gv)
    mod = relax.transform.LegalizeOps()(bb.get())
    before = _rss_mb()
    est = estimate_latency(mod, fresh=True)
    assert est["measured"] == 4
    assert _rss_mb() - before < 128  # four 64 MB outputs were held before
