"""The matmul rule packs a linear layer's weight into vector-wide panels (folded at compile time),
accumulates each tile locally and computes the bias add as the tile is written back."""
from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import relax, tirx
from tvm.script import relax as R

import irviz.core.passes  # noqa: F401  (registers the built-in passes)
from irviz.core.schedules import rules as S
from irviz.core.passes.registry import apply_pass

STEPS = ["LegalizeOps", "AnnotateTIROpPattern", "FoldConstant", "FuseOps", "FuseTIR", "CPUTileReductions",
         "CPUParallelVectorize", "CPUPrepackWeights"]
M, K, N = 64, 96, 128


def _linear(weight_is_constant: bool, M: int = M, N: int = N):
    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((K, N)).astype("float32"), rng.standard_normal(N).astype("float32")
    bb = relax.BlockBuilder()
    x = relax.Var("x", R.Tensor((M, K), "float32"))
    params = [x] if weight_is_constant else [x, relax.Var("w", R.Tensor((K, N), "float32"))]
    weight = relax.const(w) if weight_is_constant else params[1]
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(relax.op.add(relax.op.matmul(x, weight), relax.const(b)))
        bb.emit_func_output(out)
    return bb.get(), w, b


def _notes(mod) -> dict[str, str]:
    out = {}
    for gv, f in mod.functions_items():
        if isinstance(f, tirx.PrimFunc) and f.attrs is not None and S.NOTES_ATTR in f.attrs:
            out[gv.name_hint] = str(f.attrs[S.NOTES_ATTR].get("CPUTileReductions", ""))
    return out


@pytest.mark.parametrize("constant", [True, False], ids=["constant-weight", "weight-as-input"])
def test_weight_packed_tile_accumulated_locally_bias_fused(constant):
    mod, w, b = _linear(constant)
    for step in STEPS:
        mod = apply_pass(step, mod)
    notes = [n for n in _notes(mod).values() if n.startswith("matmul")]
    assert len(notes) == 1, _notes(mod)  # the split-off re-layout does not claim the matmul's notes
    assert "weight packed to N/" in notes[0] and "accumulated in registers" in notes[0], notes[0]
    assert "1 epilogue block(s) fused into the write-back" in notes[0], notes[0]
    names = [gv.name_hint for gv in mod.get_global_vars()]
    # a constant weight is packed at compile time: no packing kernel is left to run
    assert any(n.endswith("_prepacked") for n in names), names
    assert any(n.endswith("_weight_prepack") for n in names) == (not constant), names
    kernel = next(f for gv, f in mod.functions_items() if gv.name_hint.endswith("_prepacked"))
    # no whole-size intermediate in memory that the bias add reads back: only the local accumulator
    allocs = [line for line in kernel.script().splitlines() if "T.sblock_alloc_buffer((T.int64(64), T.int64(128))" in line]
    assert allocs and all('scope="local"' in line for line in allocs), allocs
    if not constant:
        prepack = next(f for gv, f in mod.functions_items() if gv.name_hint.endswith("_weight_prepack"))
        assert "runs on every call" in str(prepack.attrs[S.NOTES_ATTR]["CPUPrepackWeights"])

    x = np.random.default_rng(1).standard_normal((M, K)).astype("float32")
    vm = relax.VirtualMachine(tvm.compile(mod, target=tvm.target.Target.from_device(tvm.cpu())), tvm.cpu())
    args = [tvm.runtime.tensor(x)] + ([] if constant else [tvm.runtime.tensor(w)])
    got = vm["main"](*args).numpy()
    np.testing.assert_allclose(got, x @ w + b, rtol=1e-5, atol=1e-4)


def _assert_matches(mod, w, b, rows: int):
    """The built module (constant weight) gives x @ w + b."""
    x = np.random.default_rng(1).standard_normal((rows, K)).astype("float32")
    vm = relax.VirtualMachine(tvm.compile(mod, target=tvm.target.Target.from_device(tvm.cpu())), tvm.cpu())
    np.testing.assert_allclose(vm["main"](tvm.runtime.tensor(x)).numpy(), x @ w + b, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("rows,cols,said", [
    (13, N, "13 rows padded to a multiple of 4"), (197, N, "197 rows padded to a multiple of 4"),
    (M, 197, "197 columns padded to a multiple of "),
])
def test_extents_with_no_small_factor_are_padded_and_keep_the_numbers(rows, cols, said):
    """ViT's 197 tokens: without padding the register tile is one row, and 197 columns are scalar."""
    mod, w, b = _linear(True, M=rows, N=cols)
    for step in STEPS:
        mod = apply_pass(step, mod)
    (note,) = [n for n in _notes(mod).values() if n.startswith("matmul")]
    assert said in note and "vectorized" in note, note
    _assert_matches(mod, w, b, rows)


def test_twelve_accumulator_tiles_come_after_the_rules_on_avx2_and_pad_rows_they_do_not_divide():
    """12 accumulators (6 rows x 2 registers) is AVX2's best tile on real-size matmuls, so those
    tiles are timed right after the rule's own; 64 rows are padded to 66 for 6 x 16 and the
    numbers stay."""
    from irviz.core.tuning.tile_search import reduction_candidates

    cands = reduction_candidates(N, M, 8)
    assert cands[1:3] == [{"vec": 32, "reg": 3}, {"vec": 16, "reg": 6}], cands
    mod, w, b = _linear(True)
    for step in STEPS[:5]:
        mod = apply_pass(step, mod)
    gv = next(gv for gv, f in mod.functions_items() if isinstance(f, tirx.PrimFunc))
    mod[gv] = mod[gv].with_attr(S.REDUCTION_TILE_ATTR, {"vec": 16, "reg": 6})
    for step in STEPS[5:]:
        mod = apply_pass(step, mod)
    (note,) = [n for n in _notes(mod).values() if n.startswith("matmul")]
    assert "64 rows padded to a multiple of 6" in note and "6x16" in note, note
    _assert_matches(mod, w, b, M)
