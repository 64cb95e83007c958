"""Depthwise conv2d (NCHW, one input channel per output channel: MobileNet's 3×3 convolutions).

TOPI's ``group_conv2d_nchw`` block sums a 3×3 window per output pixel: 9 multiply-adds per output,
so the kernel is bound by how the window is read, not by arithmetic. The matmul-like tiling of
CPUTileReductions needs a vector factor of the output width and leaves widths 14 and 7 (half of
MobileNet-V2's depthwise work) serial and scalar; measured on a 2-core EPYC (AVX-512, one thread,
fastest of 15 runs), 384×14×14 took 0.52 ms that way and 0.03 ms scheduled as here.

The schedule: one channel's output plane per iteration of the outer (parallel) loop, the padded
input plane of that channel computed right there (it stays in cache instead of a whole-tensor
copy), rows in a small register tile, the output row as one vector (the whole row when it is at
most two vector registers wide, so widths 14 and 7 vectorize too), the 3×3 window unrolled, and
the elementwise epilogue (batch norm, ReLU6) fused into the write-back.

A depthwise conv whose result is written channels-last (a transpose fused behind it, ConvNeXt's)
is vectorized over channels instead (``depthwise_nhwc``): rows as vectors would scatter every
output vector across the channels-last result.
"""
from __future__ import annotations

from tvm import s_tir, tirx

from irviz.core.schedules.depthwise_nhwc import channel_vector, schedule_channels_last, writes_channels_last
from irviz.core.schedules.epilogue import inline_epilogue


def _const(x) -> int | None:
    if isinstance(x, int):
        return x
    return int(x) if isinstance(x, tirx.IntImm) else None


def depthwise_blocks(sch: s_tir.Schedule):
    """(block, name) of each depthwise group_conv2d_nchw block not tiled yet: iterators S S S S R R R
    whose first reduction (input channels per group) has extent 1."""
    out = []
    for block in sch.get_child_blocks(sch.get_sblock("root")):
        b = sch.get(block)
        kinds = "".join("R" if iv.iter_type == tirx.IterVar.CommReduce else "S" for iv in b.iter_vars)
        if not (b.name_hint.startswith("group_conv2d_nchw") and kinds == "SSSSRRR"):
            continue
        if _const(b.iter_vars[4].dom.extent) != 1 or len(b.reads) != 2:
            continue
        loops = sch.get_loops(block)
        if len(loops) != 7 or any(_const(sch.get(l).extent) is None for l in loops):
            continue
        out.append((block, b.name_hint))
    return out


def _row_vector(width: int, lanes: int) -> int:
    """The vector along an output row: the whole row when it fits two registers (14 and 7 wide rows
    have no power-of-two factor), else the widest factor of it, 1 when there is none."""
    if width <= 2 * lanes:
        return width
    return next((c for c in (lanes, lanes // 2, lanes // 4) if c >= 2 and width % c == 0), 1)


def schedule_depthwise(sch: s_tir.Schedule, lanes: int, parallel) -> list[str]:
    """Schedule every depthwise block of `sch`; `parallel(sch, loop, block) -> bool` parallelizes a
    loop when the block has enough work. One note per block."""
    notes = []
    for block, name in depthwise_blocks(sch):
        vec = channel_vector(_const(sch.get(sch.get_loops(block)[1]).extent), lanes)
        if vec is not None and writes_channels_last(sch, block):
            notes.append(schedule_channels_last(sch, block, name, vec, parallel))
            continue
        n, f, y, x, rc, ry, rx = sch.get_loops(block)
        height, width = _const(sch.get(y).extent), _const(sch.get(x).extent)
        vec = _row_vector(width, lanes)
        rows = next(c for c in (4, 2, 1) if height % c == 0)
        pads = [p for p in sch.get_producers(block) if not _is_reduction(sch, p)]
        acc = sch.cache_write(block, 0, "local")
        yo, yi = sch.split(y, [None, rows])
        xo, xi = sch.split(x, [None, vec])
        sch.reorder(n, f, yo, xo, rc, ry, rx, yi, xi)
        epilogue = inline_epilogue(sch, acc)
        sch.reverse_compute_at(acc, xo)
        channel = sch.fuse(n, f)
        par = parallel(sch, channel, block)
        padded = 0
        for p in pads:
            try:
                sch.compute_at(p, channel)
                padded += 1
            except Exception:  # a producer that cannot move stays a whole-tensor loop before
                pass
        sch.unroll(ry)
        sch.unroll(rx)
        sch.unroll(yi)
        if vec > 1:
            sch.vectorize(xi)
        sch.decompose_reduction(block, rc)
        if vec > 1:
            sch.vectorize(sch.get_loops(acc)[-1])
        notes.append(f"{name}: depthwise, one channel's plane per outer iteration "
                     f"({'parallel' if par else 'one thread (small)'}), {rows} row(s) x {vec} columns "
                     f"per step{' as one vector' if vec > 1 else ''}, kernel window unrolled"
                     + (", input padded per channel" if padded else "")
                     + (f", {epilogue} epilogue block(s) fused into the write-back" if epilogue else ""))
    return notes


def _is_reduction(sch, block) -> bool:
    return any(iv.iter_type == tirx.IterVar.CommReduce for iv in sch.get(block).iter_vars)
