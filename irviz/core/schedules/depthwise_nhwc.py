"""A depthwise conv2d whose result is written channels-last (ConvNeXt's 7×7: NCHW convolution, then
a transpose to NHWC for the LayerNorm and the MLP, fused into one kernel).

Scheduled as rows of output pixels per channel plane (``depthwise``), every output vector is
scattered to the NHWC result one float at a time, C floats apart; with the per-channel padded
copy and rows of 14 or 7 floats, ConvNeXt-T's 384×14×14 kernel ran at 4% of the FMA peak.

Here the vector runs over channels instead, so the write-back is contiguous:

* the padded input of a block of `vec` channels is re-laid-out once into a (H+2p)×(W+2p)×vec tile
  (channels innermost; one vector load then reads `vec` channels of one input pixel);
* the weight is packed to C/vec·KH·KW·vec (a ``layout_rewrite_preproc`` block: CPUPrepackWeights
  moves it out of the kernel and folds it on the constant weight at compile time);
* a register tile of `cols` output pixels × `vec` channels accumulates the KH×KW window, unrolled,
  so a loaded input vector serves up to KW outputs of the tile and each weight vector `cols`;
* the tile is written back, with its elementwise epilogue (bias, the transpose), as `cols`
  contiguous vector stores; the channel blocks are the parallel loop.
"""
from __future__ import annotations

from tvm import s_tir, tirx

from irviz.core.schedules.epilogue import inline_epilogue
from irviz.core.schedules.prepack import PREPROC_ATTR

MAX_COLS = 8  # output pixels per register tile: 8 accumulators leave registers for the window


def _const(x) -> int | None:
    if isinstance(x, int):
        return x
    return int(x) if isinstance(x, tirx.IntImm) else None


def channel_vector(channels: int, lanes: int) -> int | None:
    """The widest vector of `lanes`, `lanes`/2, `lanes`/4 (at least 4) that divides `channels`;
    None when there is none (those channels stay with the row schedule)."""
    return next((c for c in (lanes, lanes // 2, lanes // 4) if c >= 4 and channels % c == 0), None)


def columns(width: int) -> int:
    """Output pixels per register tile: the largest divisor of the row width up to MAX_COLS
    (7 for ConvNeXt's rows of 56, 28, 14 and 7)."""
    return next(c for c in range(min(MAX_COLS, width), 0, -1) if width % c == 0)


def writes_channels_last(sch: s_tir.Schedule, block) -> bool:
    """Whether the kernel's result of depthwise `block` (N C H W) is stored with the channel as its
    innermost index, once the elementwise epilogue is fused into the write-back: probed on a copy
    of the schedule, so `sch` is left as it was."""
    probe = s_tir.Schedule(sch.mod)
    conv = probe.get_sblock(sch.get(block).name_hint)
    acc = probe.cache_write(conv, 0, "local")
    inline_epilogue(probe, acc)
    consumers = probe.get_consumers(acc)
    if consumers:  # an epilogue that did not fuse: the layout of the result is not this kernel's to pick
        return False
    writeback = probe.get(acc)
    store = writeback.body
    if not isinstance(store, tirx.BufferStore) or len(store.indices) != 4:
        return False
    channel = writeback.iter_vars[1].var
    last = store.indices[-1]
    return isinstance(last, tirx.Var) and last.same_as(channel) and not any(
        isinstance(i, tirx.Var) and i.same_as(channel) for i in store.indices[:-1])


def schedule_channels_last(sch: s_tir.Schedule, block, name: str, vec: int, parallel) -> str:
    """Schedule depthwise `block` (loops n f y x rc ry rx, its result stored channels-last) with
    `vec` channels per vector; the note that says what was done."""
    n, f, y, x, rc, ry, rx = sch.get_loops(block)
    width = _const(sch.get(x).extent)
    cols = columns(width)
    pads = [p for p in sch.get_producers(block)
            if not any(iv.iter_type == tirx.IterVar.CommReduce for iv in sch.get(p).iter_vars)]
    packed = sch.cache_read(block, 1, "global")
    sch.transform_layout(block, ("read", 1), lambda o, i, h, w: (o // vec, i, h, w, o % vec))
    sch.annotate(packed, PREPROC_ATTR, 1)
    # the padded input, channels innermost in blocks of vec
    padded = len(pads) == 1 and sch.get(block).reads[0].source.same_as(sch.get(pads[0]).writes[0].source)
    if padded:
        sch.transform_layout(block, ("read", 0), lambda b, c, h, w: (b, c // vec, h, w, c % vec))
    acc = sch.cache_write(block, 0, "local")
    sch.transform_layout(block, ("write", 0), lambda b, c, h, w: (b, h, w, c))
    fo, fi = sch.split(f, [None, vec])
    xo, xi = sch.split(x, [None, cols])
    sch.reorder(n, fo, y, xo, rc, ry, rx, xi, fi)
    epilogue = inline_epilogue(sch, acc)
    sch.reverse_compute_at(acc, xo)
    *_, wc, wx = sch.get_loops(acc)  # the write-back: (channels, columns) -> columns, then channels
    sch.reorder(wx, wc)
    sch.vectorize(wc)
    block_loop = sch.fuse(n, fo)
    if padded:
        sch.compute_at(pads[0], block_loop)
        *_, pc, ph, pw = sch.get_loops(pads[0])
        sch.reorder(ph, pw, pc)
        sch.vectorize(pc)
    par = parallel(sch, block_loop, block)
    sch.unroll(ry)
    sch.unroll(rx)
    sch.unroll(xi)
    sch.vectorize(fi)
    init = sch.decompose_reduction(block, rc)
    sch.vectorize(sch.get_loops(init)[-1])
    return (f"{name}: depthwise, written channels-last: {vec} channels per vector ({'parallel' if par else 'one thread (small)'} "
            f"over blocks of them), {cols} output pixels x {vec} channels in registers, kernel window unrolled, "
            f"weight packed to C/{vec},KH,KW,{vec}"
            + (f", input padded per channel block as H,W,{vec}" if padded else "")
            + (f", {epilogue} epilogue block(s) fused into the write-back as contiguous stores" if epilogue else ""))
