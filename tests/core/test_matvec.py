"""CPUMatVec and CPUTuneMatVec: a one-row matmul against a weight (a decode step's) reads the weight
packed once in panels, accumulates in registers, and computes what numpy does."""
from __future__ import annotations

import json

import numpy as np
import pytest
import tvm
from tvm import relax, s_tir

from irviz.core.backend.build import build
from irviz.core.passes.registry import PassInvocation, apply_pass
from irviz.core.schedules import matvec as mv
from irviz.core.tuning import decision_cache
from irviz.core.views.decisions import TUNE_NOTE_ATTR

FUSE = ("LegalizeOps", "AnnotateTIROpPattern", "FoldConstant", "FuseOps", "FuseTIR", "CPUInlineElementwise")
AFTER = ("CPUTileReductions", "CPUParallelVectorize", "CPUPrepackWeights")


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("IRVIZ_CACHE_DIR", str(tmp_path))
    decision_cache.set_cache_enabled(True)
    yield tmp_path


def _linear(rows: int, k: int, n: int, seed: int = 3):
    """relu(x @ w + b) with w and b constants: (module, x, w, b)."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((k, n)).astype("float32")
    b = rng.standard_normal((n,)).astype("float32")
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((rows, k), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.add(relax.op.matmul(x, relax.const(w)), relax.const(b)))
            o = bb.emit_output(relax.op.nn.relu(y))
        bb.emit_func_output(o)
    return bb.get(), rng.standard_normal((rows, k)).astype("float32"), w, b


def _apply(mod, steps, **params):
    for name in steps:
        mod = apply_pass(PassInvocation(name, params.get(name, {})), mod)
    return mod


def _run(mod, x):
    vm = relax.VirtualMachine(build(mod).executable, tvm.cpu())
    return vm["main"](tvm.runtime.tensor(x)).numpy()


@pytest.mark.parametrize("lanes", [8, 16])  # AVX2's and AVX-512's float32 lanes; both run on any x86-64 host
def test_a_one_row_matmul_streams_its_weight_in_panels_and_matches_numpy(lanes):
    K, N = 96, 8 * lanes * 4
    mod, x, w, b = _linear(1, K, N)
    out = _apply(_apply(mod, FUSE), ("CPUMatVec", *AFTER), CPUMatVec={"lanes": lanes})
    name, kernel = next((gv.name_hint, f) for gv, f in out.functions.items() if gv.name_hint.endswith("_prepacked"))
    notes = dict(kernel.attrs["irviz.schedule_notes"])
    nb = 4 * lanes
    assert f"weight packed to N/{nb},K,{nb}" in notes["CPUMatVec"], notes
    assert "epilogue" in notes["CPUMatVec"]
    assert "CPUMatVec" in [str(d) for d in kernel.attrs["irviz.scheduled"]]
    # the weight the kernel reads is the packed one, folded on the constant at compile time
    shapes = [tuple(int(d) for d in p.ty.shape) for p in kernel.params]
    assert (N // nb, K, nb) in shapes
    # no zero pass over the output: the reduction starts from zeros in its local accumulator
    sch = s_tir.Schedule(kernel)
    init = sch.get(sch.get_sblock("matmul_init"))
    assert init.writes[0].source.scope() == "local"
    ref = np.maximum(x.astype(np.float64) @ w + b, 0)
    got = _run(out, x)
    assert np.max(np.abs(got - ref)) <= 1e-5 * max(1.0, float(np.max(np.abs(ref))))


def test_the_vector_width_comes_from_the_target():
    mod, *_ = _linear(1, 64, 256)
    fused = _apply(mod, FUSE)
    for mcpu, lanes in (("haswell", 8), ("skylake-avx512", 16)):
        with tvm.target.Target({"kind": "llvm", "mcpu": mcpu}):
            out = mv.matvec()(fused)
        kernel = next(f for gv, f in out.functions.items() if "matmul" in gv.name_hint)
        assert f"{lanes} lanes" in dict(kernel.attrs["irviz.schedule_notes"])["CPUMatVec"]


def test_a_matmul_of_several_rows_is_left_to_the_matmul_tiles():
    mod, x, w, b = _linear(4, 64, 256)
    out = _apply(_apply(mod, FUSE), ("CPUMatVec",), CPUMatVec={"lanes": 8})
    kernel = next(f for gv, f in out.functions.items() if "matmul" in gv.name_hint)
    assert "CPUMatVec" not in [str(d) for d in (kernel.attrs.get("irviz.scheduled") or [])]
    assert "CPUMatVec" not in dict(kernel.attrs.get("irviz.schedule_notes") or {})


def test_the_panel_width_is_measured_on_this_machine_and_cached(cache_dir):
    mod, x, w, b = _linear(1, 256, 512)
    fused = _apply(mod, FUSE)
    tuned = _apply(fused, ("CPUTuneMatVec",), CPUTuneMatVec={"lanes": 8})
    kernel = next(f for gv, f in tuned.functions.items() if "matmul" in gv.name_hint)
    record = json.loads(str(kernel.attrs[TUNE_NOTE_ATTR]))
    timed = [c for c in record["candidates"] if "ms" in c]
    assert record["kind"] == "matvec_tile" and len(timed) >= 3
    choice = {str(k): int(v) for k, v in kernel.attrs[mv.MATVEC_ATTR].items()}
    assert choice == record["choice"]
    fastest = min(timed, key=lambda c: c["ms"])
    rule = record["candidates"][0]
    # the rule's tile unless another beats it by more than the noise allowance
    assert choice["nb"] == (rule["nb"] if rule["ms"] <= fastest["ms"] * 1.1 else fastest["nb"])
    assert decision_cache.DecisionCache.shared().get(record["workload"]) is not None
    out = _apply(tuned, ("CPUMatVec", *AFTER), CPUMatVec={"lanes": 8})
    kernel = next(f for gv, f in out.functions.items() if gv.name_hint.endswith("_prepacked"))
    assert "(tile measured)" in dict(kernel.attrs["irviz.schedule_notes"])["CPUMatVec"]
    ref = np.maximum(x.astype(np.float64) @ w + b, 0)
    assert np.max(np.abs(_run(out, x) - ref)) <= 1e-5 * max(1.0, float(np.max(np.abs(ref))))


def test_panel_widths_another_program_packs_with_are_read_by_weight_name_and_bad_ones_named():
    from irviz.core.tuning import matvec_search

    assert matvec_search.parse_panels("p_lm_head_weight=64, p_q_weight=32") == {"p_lm_head_weight": 64, "p_q_weight": 32}
    for bad in ("p_lm_head_weight", "p_lm_head_weight=wide", "p_q_weight=0"):
        with pytest.raises(ValueError, match="weight=width"):
            matvec_search.tune_matvec(lanes=16, panels=bad)
