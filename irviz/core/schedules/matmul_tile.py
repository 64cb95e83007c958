"""What a tiled matmul needs besides its loop order: the weight in vector-wide panels, and the tile
accumulated in registers with its epilogue computed as the tile is written back.

Without panels, each step of the reduction reads one vector from a different row of a K x N
weight, N floats apart (12 KB for BERT's 768 x 3072): the reads walk the cache a line per step.
Packed N/v x K x v, a tile's weight is one contiguous stream. Without a local accumulator the
result goes to a whole-tensor buffer, and the bias add after it is a second pass over memory.
"""
from __future__ import annotations

from tvm import tirx

from irviz.core.schedules.epilogue import inline_epilogue
from irviz.core.schedules.prepack import PREPROC_ATTR


def _weight_read(sch, block) -> int | None:
    """Index of the read B[k, n] of `block` (k its only reduction iter, n its innermost spatial
    one) when B is a 2-D parameter of the kernel: the weight a linear layer brings."""
    b = sch.get(block)
    spatial = [iv.var for iv in b.iter_vars if iv.iter_type == tirx.IterVar.DataPar]
    reduce = [iv.var for iv in b.iter_vars if iv.iter_type == tirx.IterVar.CommReduce]
    if len(reduce) != 1 or not spatial:
        return None
    params = list(sch.mod["main"].params)
    for i, read in enumerate(b.reads):
        region = read.region
        if (len(region) == 2 and region[0].min.same_as(reduce[0]) and region[1].min.same_as(spatial[-1])
                and any(read.source.same_as(p) for p in params)):
            return i
    return None


def pack_weight(sch, block, vec: int) -> bool:
    """The weight read of `block` re-laid-out K x N -> N/vec x K x vec by a preproc block, which
    CPUPrepackWeights moves out and folds on a constant weight at compile time. Whether it did."""
    index = _weight_read(sch, block)
    if index is None:
        return False
    packed = sch.cache_read(block, index, "global")
    sch.transform_layout(block, ("read", index), lambda k, n: (n // vec, k, n % vec))
    sch.annotate(packed, PREPROC_ATTR, 1)
    return True


def accumulate_locally(sch, block, tile_loop, epilogue: bool = True) -> int:
    """`block`'s result accumulated in a local buffer of one tile (registers, once unrolled),
    written back under `tile_loop`, with its elementwise epilogue unless `epilogue` is False (padded
    rows: the epilogue writes the real output, which has no padding rows to write); how many
    epilogue blocks."""
    acc = sch.cache_write(block, 0, "local")
    epilogue = inline_epilogue(sch, acc) if epilogue else 0
    sch.reverse_compute_at(acc, tile_loop)
    return epilogue


def needs_padding(extent: int | None, factor: int | None) -> bool:
    """Whether a loop of `extent` is padded up to a multiple of `factor` (a register tile, a
    vector): a prime like ViT's 197 tokens otherwise leaves one row per tile and scalar columns."""
    return bool(extent and factor and factor > 1 and extent % factor and extent > factor)


def pad_tile(sch, block, factors: dict[int, int]) -> tuple[list, list]:
    """Pad `block`'s iters {index: factor} up to multiples of their factors (TVM's pad_einsum: the
    inputs copied with zeros, the extra outputs dropped after); its new spatial and reduction loops."""
    kinds = [iv.iter_type for iv in sch.get(block).iter_vars]
    padding = [factors.get(i, 1) for i in range(len(kinds))]
    sch.pad_einsum(block, padding)
    for consumer in sch.get_consumers(block):  # the copy that drops the extra outputs reads in place
        try:
            sch.compute_inline(consumer)
        except Exception:  # kept as a copy: correct, one more pass over the output
            pass
    loops = sch.get_loops(block)
    n_spatial = sum(1 for k in kinds if k == tirx.IterVar.DataPar)
    return list(loops[:n_spatial]), list(loops[n_spatial:])
