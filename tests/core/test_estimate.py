"""Estimated latency without running: each distinct kernel timed alone at its shapes, times its
calls; cached per CPU; symbolic sizes at the example inputs' (or --dim) values."""
from __future__ import annotations

import json

import pytest
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

from irviz.cli import main
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
    assert r["total_ms"] == pytest.approx(3 * r["ms"]) and est["estimated_ms"] == pytest.approx(r["total_ms"])
    assert est["measured"] == 1 and est["complete"] and not notes


def test_a_structure_only_model_is_estimated_and_the_second_estimate_reads_the_cache(cache_dir):
    ws = Workspace(log=lambda line: None)
    ws.open("sample:mlp", no_weights=True)
    assert ws.structure_only
    est = ws.estimate()
    lowered_sites = _call_tir_sites(before_rewrite(ws.step_at().mod))
    assert sum(r["calls"] for r in est["kernels"]) == lowered_sites == est["sites"]
    assert est["complete"] and est["measured"] == len(est["kernels"]) and est["cached"] == 0
    assert est["estimated_ms"] == pytest.approx(sum(r["total_ms"] for r in est["kernels"]))
    assert sum(r["share"] for r in est["kernels"]) == pytest.approx(1.0)
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
    assert est["estimated_ms"] == pytest.approx(sum(r["total_ms"] for r in est["kernels"]))


def test_a_kernel_too_big_with_nothing_to_extrapolate_from_is_named(cache_dir, monkeypatch):
    from irviz.core.tuning import estimate as estimate_mod

    monkeypatch.setattr(estimate_mod, "MAX_KERNEL_BYTES", 0)  # every kernel is too big
    est = estimate_latency(BigAndSmall)
    assert not est["kernels"] and est["measured"] == 0 and not est["complete"]
    assert all("more than a kernel is given to be timed" in m["why"] for m in est["not_estimated"])
