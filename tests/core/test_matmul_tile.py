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
    (13, N, "13 rows padded to a multiple of "), (197, N, "197 rows padded to a multiple of "),
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


def test_twelve_accumulator_tiles_lead_on_avx2_and_pad_rows_they_do_not_divide():
    """12 accumulators (6 rows x 2 registers) is AVX2's best tile on real-size matmuls: the rule's
    own tile, the other 12-accumulator tiles timed right after it; 64 rows are padded to 66 for
    6 x 16 and the numbers stay."""
    from irviz.core.tuning.tile_search import reduction_candidates

    cands = reduction_candidates(N, M, 8)
    assert cands[:2] == [{"vec": 16, "reg": 6}, {"vec": 32, "reg": 3}], cands
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


@pytest.mark.parametrize("lanes,registers", [(16, 32), (8, 16)], ids=["avx512", "avx2"])
@pytest.mark.parametrize("rows,cols", [(96, 1536), (96, 384), (160, 1152), (50, 384)])
def test_register_tile_keeps_both_fma_units_busy_within_the_register_file(lanes, registers, rows, cols):
    """Two FMA units of 4-cycle latency need 8 accumulators in flight: 4 rows x 1 vector left half
    of them idle on CPUs with two units. The tile takes 12 or more, and with the weight's vectors
    and one broadcast still fits the vector registers."""
    tile = S.reduction_tile_rule([rows, cols], lanes)
    vectors = tile["vec"] // lanes
    assert tile["vec"] % lanes == 0 and tile["reg"], tile
    assert 12 <= tile["reg"] * vectors and tile["reg"] * vectors + vectors + 1 <= registers, tile


def test_k_block_fills_half_the_l1_the_cpu_reports(tmp_path):
    from irviz.core.schedules import matmul_tile

    for index, (level, kind, size) in enumerate([(1, "Data", "48K"), (1, "Instruction", "32K"),
                                                 (2, "Unified", "2048K")]):
        d = tmp_path / f"index{index}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
    assert matmul_tile.cache_bytes(1, str(tmp_path)) == 48 * 1024  # the data cache, not the instructions'
    assert matmul_tile.cache_bytes(2, str(tmp_path)) == 2 * 1024 * 1024
    # a 32-float panel: 48 KB / 2 / 128 B = 192 steps; 3072 = 16 x 192
    assert matmul_tile.k_block(3072, 32, 128, l1=48 * 1024) == 192
    assert matmul_tile.k_block(2304, 32, 128, l1=32 * 1024) == 128  # 32 KB: 128 steps, a divisor of K
    assert matmul_tile.k_block(256, 32, 128, l1=32 * 1024) is None  # the whole panel fits the L1
    assert matmul_tile.k_block(127 * 16, 32, 128, l1=32 * 1024) == 16  # 2032 = 127 x 16: the largest divisor left


def _linear_k(rows: int, k: int, cols: int):
    rng = np.random.default_rng(3)
    w, b = rng.standard_normal((k, cols)).astype("float32"), rng.standard_normal(cols).astype("float32")
    bb = relax.BlockBuilder()
    x = relax.Var("x", R.Tensor((rows, k), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.add(relax.op.matmul(x, relax.const(w)), relax.const(b)))
        bb.emit_func_output(out)
    return bb.get(), w, b


@pytest.mark.parametrize("target_name", ["host", "x86-avx2"])
@pytest.mark.parametrize("lanes,tile", [(16, "8x32"), (8, "4x24")], ids=["16-lanes", "8-lanes"])
def test_blocked_tiles_keep_the_numbers_of_torch_on_both_vector_widths(monkeypatch, lanes, tile, target_name):
    """A linear layer shaped like a transformer's projection, scaled down: the register tile of
    the vector width, the reduction blocked for a 32 KB L1 (the panel's rows accumulated across the
    blocks), bias in a vectorized write-back; within 1e-5 of torch for code built for this CPU and
    for AVX2."""
    import torch

    from irviz.core.schedules import matmul_tile
    from irviz.core.target import Target

    target = Target.of(None if target_name == "host" else target_name)
    if target.not_runnable_here:
        pytest.skip(target.not_runnable_here)
    monkeypatch.setattr(matmul_tile, "_cache_sizes", lambda sysfs: {1: 32 * 1024, 2: 1024 * 1024})
    rows, k, cols = 40, 1024, 576
    mod, w, b = _linear_k(rows, k, cols)
    for step in STEPS[:5]:
        mod = apply_pass(step, mod)
    with target.tvm:
        for make in (lambda: S.tile_reductions(lanes), lambda: S.parallel_vectorize(lanes), S.prepack_weights):
            mod = make()(mod)
    (note,) = [n for n in _notes(mod).values() if n.startswith("matmul")]
    assert f"tiled {tile}" in note and "reduction blocked by 128 for the L1" in note, note
    kernel = next(f for gv, f in mod.functions_items() if gv.name_hint.endswith("_prepacked")).script()
    assert "T.vectorized" in kernel.split('T.sblock("matmul_intermediate_local")')[0].rsplit("for ", 3)[-3], kernel

    x = np.random.default_rng(4).standard_normal((rows, k)).astype("float32")
    vm = relax.VirtualMachine(tvm.compile(mod, target=target.tvm), tvm.cpu())
    got = vm["main"](tvm.runtime.tensor(x)).numpy()
    want = torch.nn.functional.linear(torch.from_numpy(x), torch.from_numpy(w.T.copy()), torch.from_numpy(b)).numpy()
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()


def test_tile_search_times_the_rule_tile_without_k_blocking_too():
    """Whether blocking the reduction pays is the CPU's to say: the rule's tile is timed with and
    without it, where the rule would block it."""
    from irviz.core.tuning.tile_search import reduction_candidates

    cands = reduction_candidates(1024, 64, 16, 2048)
    assert cands[0] == {"vec": 32, "reg": 8} and cands[1] == {"vec": 32, "reg": 8, "kc": 0}, cands
    assert all("kc" not in c for c in reduction_candidates(1024, 64, 16, 64))  # nothing to block
    assert all("kc" not in c for c in reduction_candidates(1024, 1, 16, 2048))  # one row: no row tiles
    # 12 panels of 32 (or ConvNeXt's 3 of 96 columns) are too few to split over the threads: the
    # rule blocks nothing there, and "kc": 0 would be the rule's own tile built and timed twice
    assert all("kc" not in c for c in reduction_candidates(384, 64, 16, 2048))
    assert all("kc" not in c for c in reduction_candidates(96, 3136, 16, 2048))


def test_few_weight_panels_share_the_threads_with_the_row_tiles():
    """Three panels over two threads is two panels' time on one of them: with fewer than 16 (or an
    odd count) the row tiles join the parallel loop; the numbers stay."""
    mod, w, b = _linear_k(64, 512, 96)
    for step in STEPS[:5]:
        mod = apply_pass(step, mod)
    for make in (lambda: S.tile_reductions(16), lambda: S.parallel_vectorize(16), S.prepack_weights):
        mod = make()(mod)
    (note,) = [n for n in _notes(mod).values() if n.startswith("matmul")]
    assert "tiled 8x32" in note and "parallel over panels and rows" in note and "blocked" not in note, note
    kernel = next(f for gv, f in mod.functions_items() if gv.name_hint.endswith("_prepacked")).script()
    assert "T.parallel(T.int64(24))" in kernel, kernel  # 3 panels x 8 row tiles
    x = np.random.default_rng(5).standard_normal((64, 512)).astype("float32")
    vm = relax.VirtualMachine(tvm.compile(mod, target=tvm.target.Target.from_device(tvm.cpu())), tvm.cpu())
    want = x.astype("float64") @ w + b
    assert np.abs(vm["main"](tvm.runtime.tensor(x)).numpy() - want).max() <= 1e-5 * np.abs(want).max()
