"""A matmul whose epilogue transposes its result (ConvNeXt's MLP: channels-last rows written back
to a channels-first output, with a layer scale and the residual) writes each column's rows as one
vector, on both vector widths, and keeps torch's numbers. Row counts the register tile does not
divide (ViT's 197 tokens) have their epilogue computed after each tile, for the real rows only."""
from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import relax, tirx
from tvm.script import relax as R

import irviz.core.passes  # noqa: F401  (registers the built-in passes)
from irviz.core.passes.registry import apply_pass
from irviz.core.schedules import rules as S

STEPS = ["LegalizeOps", "AnnotateTIROpPattern", "CPUFuseLayoutOps", "FoldConstant", "FuseOps", "FuseTIR",
         "CPUInlineElementwise"]


def _mlp_out(side: int, k: int, channels: int, seed: int = 0):
    """[side*side, k] . [k, channels] + bias, scaled per channel, reshaped to side x side x channels,
    transposed to channels x side x side and added to a residual of that layout."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((k, channels)) / np.sqrt(k)).astype("float32")
    b, g = (rng.standard_normal(channels).astype("float32") for _ in range(2))
    bb = relax.BlockBuilder()
    x = relax.Var("x", R.Tensor((side * side, k), "float32"))
    res = relax.Var("res", R.Tensor((1, channels, side, side), "float32"))
    with bb.function("main", [x, res]):
        with bb.dataflow():
            y = bb.emit(relax.op.add(relax.op.matmul(x, relax.const(w)), relax.const(b)))
            y = bb.emit(relax.op.multiply(relax.op.reshape(y, (1, side, side, channels)), relax.const(g)))
            y = bb.emit(relax.op.permute_dims(y, [0, 3, 1, 2]))
            out = bb.emit_output(relax.op.add(res, y))
        bb.emit_func_output(out)
    return bb.get(), w, b, g


def _schedule(mod, lanes: int, target):
    for step in STEPS:
        mod = apply_pass(step, mod)
    with target.tvm:
        for make in (lambda: S.tile_reductions(lanes), lambda: S.parallel_vectorize(lanes), S.prepack_weights):
            mod = make()(mod)
    notes = [str(f.attrs[S.NOTES_ATTR]["CPUTileReductions"]) for _, f in mod.functions_items()
             if isinstance(f, tirx.PrimFunc) and f.attrs is not None and S.NOTES_ATTR in f.attrs
             and "CPUTileReductions" in f.attrs[S.NOTES_ATTR]]
    return mod, [n for n in notes if n.startswith("matmul")]


def _torch(x, res, w, b, g, side):
    import torch

    y = torch.nn.functional.linear(torch.from_numpy(x), torch.from_numpy(w.T.copy()), torch.from_numpy(b))
    y = (y.reshape(1, side, side, -1) * torch.from_numpy(g)).permute(0, 3, 1, 2)
    return (torch.from_numpy(res) + y).numpy()


def _matches_torch(mod, target, side, k, channels, w, b, g, seed):
    """Build `mod` for `target`, run it on random inputs and compare with the same MLP in torch."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((side * side, k)).astype("float32")
    res = rng.standard_normal((1, channels, side, side)).astype("float32")
    vm = relax.VirtualMachine(tvm.compile(mod, target=target.tvm), tvm.cpu())
    got = vm["main"](tvm.runtime.tensor(x), tvm.runtime.tensor(res)).numpy()
    want = _torch(x, res, w, b, g, side)
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()


@pytest.mark.parametrize("target_name", ["host", "x86-avx2"])
@pytest.mark.parametrize("lanes,side,k,channels", [(16, 8, 96, 64), (16, 8, 64, 96), (8, 6, 96, 48)],
                         ids=["16-lanes-k96", "16-lanes-n96", "8-lanes-k96"])
def test_transposing_epilogue_writes_rows_as_vectors_and_keeps_the_numbers(lanes, side, k, channels, target_name):
    from irviz.core.target import Target

    target = Target.of(None if target_name == "host" else target_name)
    if target.not_runnable_here:
        pytest.skip(target.not_runnable_here)
    mod, w, b, g = _mlp_out(side, k, channels)
    mod, notes = _schedule(mod, lanes, target)
    assert len(notes) == 1 and "epilogue block(s) fused into the write-back" in notes[0], notes
    assert "written back rows innermost" in notes[0], notes[0]
    kernel = next(f for gv, f in mod.functions_items() if gv.name_hint.endswith("_prepacked")).script()
    write_back = kernel.split('T.sblock("matmul_intermediate_local")')[0].rsplit("for ", 2)
    # the loop right around the write-back is the tile's rows, as one vector; the columns outside it
    assert "T.vectorized" in write_back[-1] and "T.vectorized" not in write_back[-2], kernel

    _matches_torch(mod, target, side, k, channels, w, b, g, seed=1)


@pytest.mark.parametrize("target_name", ["host", "x86-avx2"])
@pytest.mark.parametrize("lanes,channels", [(16, 1024), (8, 768)], ids=["16-lanes", "8-lanes"])
def test_transposing_epilogue_of_a_blocked_reduction_writes_a_panels_rows_in_vectors(monkeypatch, lanes, channels,
                                                                                     target_name):
    """Enough panels to split over the threads and a long reduction: the reduction is blocked and a
    panel's rows are written back together, the rows in vectors of the vector width, not one
    vector as long as the panel."""
    from irviz.core.schedules import matmul_tile
    from irviz.core.target import Target

    target = Target.of(None if target_name == "host" else target_name)
    if target.not_runnable_here:
        pytest.skip(target.not_runnable_here)
    monkeypatch.setattr(matmul_tile, "_cache_sizes", lambda sysfs: {1: 32 * 1024, 2: 1024 * 1024})
    side, k = 8, 2048
    mod, w, b, g = _mlp_out(side, k, channels, seed=4)
    mod, notes = _schedule(mod, lanes, target)
    assert len(notes) == 1 and "reduction blocked by" in notes[0], notes
    assert "written back rows innermost" in notes[0], notes[0]
    kernel = next(f for gv, f in mod.functions_items() if gv.name_hint.endswith("_prepacked")).script()
    write_back = kernel.split('T.sblock("matmul_intermediate_local")')[0].rsplit("for ", 1)[-1]
    assert f"T.vectorized(T.int64({lanes}))" in write_back, kernel

    _matches_torch(mod, target, side, k, channels, w, b, g, seed=6)


@pytest.mark.parametrize("target_name", ["host", "x86-avx2"])
@pytest.mark.parametrize("lanes", [16, 8])
def test_rows_the_tile_does_not_divide_keep_the_numbers_with_a_transposing_epilogue(lanes, target_name):
    """7 x 7 = 49 rows: padded to the register tile, the transposed write-back of the real rows only."""
    from irviz.core.target import Target

    target = Target.of(None if target_name == "host" else target_name)
    if target.not_runnable_here:
        pytest.skip(target.not_runnable_here)
    side, k, channels = 7, 96, 2 * 3 * lanes
    mod, w, b, g = _mlp_out(side, k, channels, seed=2)
    mod, notes = _schedule(mod, lanes, target)
    assert len(notes) == 1 and "49 rows padded to a multiple of" in notes[0], notes
    _matches_torch(mod, target, side, k, channels, w, b, g, seed=3)


def _mlp_in(tokens: int, k: int, hidden: int, seed: int = 0):
    """gelu([tokens, k] . [k, hidden] + bias) + a residual: a ViT MLP's first half, scaled down."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((k, hidden)) / np.sqrt(k)).astype("float32")
    b = rng.standard_normal(hidden).astype("float32")
    bb = relax.BlockBuilder()
    x = relax.Var("x", R.Tensor((tokens, k), "float32"))
    res = relax.Var("res", R.Tensor((tokens, hidden), "float32"))
    with bb.function("main", [x, res]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.gelu(relax.op.add(relax.op.matmul(x, relax.const(w)), relax.const(b))))
            out = bb.emit_output(relax.op.add(y, res))
        bb.emit_func_output(out)
    return bb.get(), w, b


@pytest.mark.parametrize("target_name", ["host", "x86-avx2"])
@pytest.mark.parametrize("lanes,tokens,k", [(16, 37, 96), (16, 37, 2048), (8, 37, 96), (8, 37, 2048)],
                         ids=["16-lanes", "16-lanes-k-blocked", "8-lanes", "8-lanes-k-blocked"])
def test_padded_rows_compute_their_epilogue_after_each_tile(monkeypatch, lanes, tokens, k, target_name):
    """37 rows (a prime, as ViT's 197) padded to the register tile: the gelu and the residual are
    computed under the tile's loop, not as a pass of their own over the output afterwards."""
    import torch

    from irviz.core.schedules import matmul_tile
    from irviz.core.target import Target

    target = Target.of(None if target_name == "host" else target_name)
    if target.not_runnable_here:
        pytest.skip(target.not_runnable_here)
    monkeypatch.setattr(matmul_tile, "_cache_sizes", lambda sysfs: {1: 32 * 1024, 2: 1024 * 1024})
    hidden = 768  # panels enough to split over the threads: the reduction is blocked where K is long
    mod, w, b = _mlp_in(tokens, k, hidden)
    mod, notes = _schedule(mod, lanes, target)
    assert len(notes) == 1 and f"{tokens} rows padded to a multiple of" in notes[0], notes
    assert ("reduction blocked by" in notes[0]) == (k == 2048), notes[0]
    assert "epilogue block(s) computed for the real rows after each tile" in notes[0], notes[0]
    kernel = next(f for gv, f in mod.functions_items() if gv.name_hint.endswith("_prepacked"))
    root = kernel.body.block.body  # the kernel's top-level loops: the pad copy, then the tiles
    assert len(root.seq) == 2, kernel.script()

    rng = np.random.default_rng(5)
    x = rng.standard_normal((tokens, k)).astype("float32")
    res = rng.standard_normal((tokens, hidden)).astype("float32")
    vm = relax.VirtualMachine(tvm.compile(mod, target=target.tvm), tvm.cpu())
    got = vm["main"](tvm.runtime.tensor(x), tvm.runtime.tensor(res)).numpy()
    y = torch.nn.functional.linear(torch.from_numpy(x), torch.from_numpy(w.T.copy()), torch.from_numpy(b))
    want = (torch.nn.functional.gelu(y) + torch.from_numpy(res)).numpy()
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()
