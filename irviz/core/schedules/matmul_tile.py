"""What a tiled matmul needs besides its loop order: the weight in vector-wide panels, a register
tile sized from the vector registers, the reduction blocked for the L1 cache, and the tile
accumulated in registers with its epilogue computed as the tile is written back.

Without panels, each step of the reduction reads one vector from a different row of a K x N
weight, N floats apart (12 KB for BERT's 768 x 3072): the reads walk the cache a line per step.
Packed N/v x K x v, a tile's weight is one contiguous stream. Without a local accumulator the
result goes to a whole-tensor buffer, and the bias add after it is a second pass over memory.

The register tile keeps the FMA units busy: each unit finishes one FMA per cycle with a latency of
about 4 cycles, so two units need 8 independent accumulators in flight, better a few more; one
vector register holds a row's slice of the tile, the weight's vectors and a broadcast of the
input take the rest. AVX-512's 32 registers take 8 rows x 2 vectors (16 accumulators; 4 x 1,
the rule's tile before, keeps at most half of two 512-bit units busy), AVX2's 16 take 6 x 2 or
4 x 3 (12). K-blocking: the loop over the reduction is split so that a weight panel's slice
(kc x the panel's width) stays in half the L1 data cache while every row tile of the panel reads
it, and the panel's rows are accumulated in a local buffer across the slices.
"""
from __future__ import annotations

import functools
from pathlib import Path

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


def accumulate_locally(sch, block, tile_loop, epilogue: bool = True, lanes: int = 0, said: list | None = None) -> int:
    """`block`'s result accumulated in a local buffer of one tile (registers, once unrolled),
    written back under `tile_loop`, with its elementwise epilogue unless `epilogue` is False (padded
    rows: the epilogue writes the real output, which has no padding rows to write, and is computed
    after the write-back under the same loop instead), the write-back
    `lanes` wide (0: scalar), or its rows as vectors where the epilogue transposes them into the
    output's innermost dimension (appended to `said`); how many epilogue blocks."""
    acc = sch.cache_write(block, 0, "local")
    fused = inline_epilogue(sch, acc) if epilogue else 0
    sch.reverse_compute_at(acc, tile_loop)
    if lanes:
        _write_back(sch, acc, lanes, said)
    if lanes and not epilogue:
        after = _epilogue_at(sch, acc, tile_loop, lanes, said)
        if after and said is not None:
            said.append(f"{after} epilogue block(s) computed for the real rows after each tile")
    return fused


def _write_back(sch, block, lanes: int, said: list | None) -> None:
    if rows_innermost(sch, block):
        _rows_inside(sch, block, lanes)
        if said is not None and not any(s.startswith("written back rows") for s in said):
            said.append("written back rows innermost (the epilogue transposes them)")
    else:
        _vectorize_innermost(sch, block, lanes)


def _epilogue_at(sch, acc, tile_loop, lanes: int, said: list | None) -> int:
    """Padded rows: the epilogue cannot be the write-back (it writes the real rows only), so it
    goes under the tile loop instead, reading the tile while it is still in the L1 cache and
    running on the tile's thread; left alone it is a pass of its own over the whole output after
    the matmul, on one thread when its loop is small. How many epilogue blocks moved (0: none)."""
    consumers = sch.get_consumers(acc)
    if len(consumers) != 1 or _is_reduction(sch, consumers[0]):
        return 0
    first = consumers[0]
    if not _reads_tile_by_own_iters(sch, first, sch.get(acc).writes[0].source):
        # a reshape between them (rows back to an image's height and width): the tile's rows
        # cover no box of the consumer's iterations, and the region TVM derives for it is wrong
        return 0
    more = inline_epilogue(sch, first)
    try:
        sch.reverse_compute_at(first, tile_loop)
    except Exception:  # an index the tile's region does not map onto: a pass of its own, as before
        return 0
    _write_back(sch, first, lanes, said)
    return 1 + more


def _reads_tile_by_own_iters(sch, block, buffer) -> bool:
    """Whether every read of `buffer` by `block` indexes it with `block`'s own iterators, one each."""
    b = sch.get(block)
    own = [iv.var for iv in b.iter_vars]
    reads = [r for r in b.reads if r.source.same_as(buffer)]
    return bool(reads) and all(
        isinstance(rg.extent, (int, tirx.IntImm)) and int(rg.extent) == 1 and any(rg.min.same_as(v) for v in own)
        for r in reads for rg in r.region)


def _is_reduction(sch, block) -> bool:
    return any(iv.iter_type == tirx.IterVar.CommReduce for iv in sch.get(block).iter_vars)


def rows_innermost(sch, block) -> bool:
    """Whether the write-back `block` stores its rows, not its columns, along the output's innermost
    dimension: an epilogue that transposes (ConvNeXt's MLP written back to NCHW, channels outermost).
    Its columns as vectors are then scatters to addresses a whole plane apart, and the residual it
    adds is read by gathers."""
    b = sch.get(block)
    spatial = [iv.var for iv in b.iter_vars if iv.iter_type == tirx.IterVar.DataPar]
    if len(spatial) < 2 or len(b.writes) != 1:
        return False
    inner = b.writes[0].region[-1].min
    used = tirx.analysis.undefined_vars(inner, [])
    return (any(v.same_as(spatial[-2]) for v in used)
            and not any(v.same_as(spatial[-1]) for v in used))


def _rows_inside(sch, block, lanes: int) -> None:
    """The write-back of a transposing epilogue column by column, the rows innermost: each column's
    rows are consecutive in the output, so they are vector stores (and vector reads of the
    residual) instead of a scatter and a gather across planes. Rows as one vector of up to `lanes`
    (a register tile's), or `lanes` at a time (a panel's rows, when the reduction is blocked); fewer
    than 4 unrolled."""
    loops = sch.get_loops(block)
    if len(loops) < 2:
        return
    rows, cols = loops[-2], loops[-1]
    sch.reorder(cols, rows)
    extent = _const(sch.get(rows).extent)
    if not extent:
        return
    if 4 <= extent <= lanes:
        sch.vectorize(rows)
    elif extent > lanes and extent % lanes == 0:
        sch.vectorize(sch.split(rows, [None, lanes])[1])
    elif extent < 4:
        sch.unroll(rows)


def _vectorize_innermost(sch, block, lanes: int) -> None:
    """The innermost loop of `block` as vectors of `lanes` (or the whole loop, when shorter): a
    scalar write-back of a 8 x 32 tile is 256 stores and bias adds against its 16 FMAs a step."""
    inner = sch.get_loops(block)[-1]
    extent = sch.get(inner).extent
    extent = int(extent) if isinstance(extent, (int, tirx.IntImm)) else None
    if not extent:
        return
    if extent > lanes and extent % lanes == 0:
        inner = sch.split(inner, [None, lanes])[1]
    elif extent > lanes:
        return
    sch.vectorize(inner)


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


# Register tiles (rows, vectors of the vector width) by float32 lanes, in order of preference. 16
# lanes means 32 registers (AVX-512): 16 accumulators, two of the weight's vectors and a broadcast
# leave room; 8 lanes (AVX2) means 16 registers, of which 12 accumulate. Fewer than FULL_TILE
# accumulators leave two FMA units idle part of the time (4-cycle latency: 8 in flight at least).
REGISTER_TILES = {16: ((8, 2), (4, 4), (6, 2), (4, 2), (8, 1)), 8: ((6, 2), (4, 3), (4, 2), (6, 1))}
NARROW_TILES = ((4, 2), (4, 1), (2, 2))  # SSE, NEON: a tile that fits 16 registers, 8 accumulators
FULL_TILE = 12
PAD_WASTE = 0.05  # padded work up to this share counts as a fit (ViT's 197 rows in 6-row tiles: 0.5%)


def register_tile(rows: int | None, cols: int | None, lanes: int) -> tuple[int, int] | None:
    """(rows, columns) of the register tile for a rows x cols output and `lanes`-wide vectors: a
    tile that fits (padding at most PAD_WASTE of the work) before one that does not, one with
    FULL_TILE accumulators before a smaller one, then the least padding, then the order of the
    table. A tile is padded onto an extent more than twice its size only. None when none fits
    (fewer columns than two vectors, fewer than two rows)."""
    if not cols or not rows or rows < 2:
        return None
    best = None
    for i, (r, v) in enumerate(REGISTER_TILES.get(lanes, NARROW_TILES)):
        c = v * lanes
        if not (rows % r == 0 or rows > 2 * r) or not (cols % c == 0 or cols > 2 * c):
            continue
        waste = (-(-rows // r) * r) * (-(-cols // c) * c) / (rows * cols) - 1
        key = (waste > PAD_WASTE, r * v < FULL_TILE, round(waste, 4), i)
        if best is None or key < best[0]:
            best = (key, (r, c))
    return best[1] if best else None


def cache_bytes(level: int, sysfs: str = "/sys/devices/system/cpu/cpu0/cache") -> int | None:
    """Bytes of the data (or unified) cache of `level` this CPU reports, None where it does not."""
    return _cache_sizes(sysfs).get(level)


@functools.lru_cache(maxsize=4)
def _cache_sizes(sysfs: str) -> dict[int, int]:
    sizes: dict[int, int] = {}
    for d in sorted(Path(sysfs).glob("index*")):
        try:
            level = int((d / "level").read_text())
            kind = (d / "type").read_text().strip()
            text = (d / "size").read_text().strip().upper()
        except (OSError, ValueError):
            continue
        if kind == "Instruction" or not text:
            continue
        mult = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}.get(text[-1], 1)
        try:
            sizes[level] = int(text.rstrip("KMG")) * mult
        except ValueError:
            continue
    return sizes


FEW_PANELS = 16  # fewer weight panels than this are not split over the threads alone
DEFAULT_L1 = 32 * 1024  # where the CPU reports no cache sizes: the smallest L1d of x86 cores since 2011


def few_panels(panels: int | None) -> bool:
    """Whether `panels` weight panels are too few (or an odd count) to split evenly over the
    threads: the row tiles join the parallel loop, and the reduction is not blocked."""
    return panels is None or panels < FEW_PANELS or panels % 2 == 1


def k_block(K: int | None, panel: int, rows: int | None, l1: int | None = None) -> int | None:
    """The reduction's block for a `panel`-float-wide weight panel: the largest divisor of K (a
    multiple of 16, for whole cache lines of the panel) whose slice of the panel fills at most half
    the L1 data cache, the other half left to the input rows and the accumulators; None where K
    needs no blocking (its whole panel fits the L1) or has no such divisor, or the panel's accumulators
    (rows x panel floats, a local buffer) would not fit half the L2."""
    l1 = l1 or cache_bytes(1) or DEFAULT_L1
    if not K or not rows:
        return None
    limit = l1 // 2 // (4 * panel)
    if K <= 2 * limit or limit < 16:
        return None
    l2 = cache_bytes(2) or 8 * l1
    if rows * panel * 4 > l2 // 2:
        return None
    return next((kc for kc in range(limit - limit % 16, 15, -16) if K % kc == 0), None)


def tile_matmul(sch, name: str, block, s_loops: list, r_loops: list, s_ext: list, tile: dict, lanes: int,
                parallel, measured: bool = False) -> str:
    """Tile matmul-like `block` (spatial loops `s_loops` of extents `s_ext`, reductions `r_loops`)
    by `tile` ({"vec": columns, "reg": rows or None, "kc": the reduction's block, 0 for none, absent
    for the L1's}): extents the tile does not divide padded, a weight parameter packed into panels,
    the panels parallel (`parallel(sch, loop, block) -> bool`, which may keep a small kernel on one
    thread), the reduction blocked for the L1 when the weight is packed, the tile in registers
    with its epilogue in a vectorized write-back. What it did, as a note."""
    vec, reg = tile["vec"], tile.get("reg")
    pads = {i: f for i, f in ((len(s_ext) - 1, vec), (len(s_ext) - 2, reg))
            if i >= 0 and needs_padding(s_ext[i], f)}
    padded = ", ".join(f"{s_ext[i]} {'columns' if i == len(s_ext) - 1 else 'rows'} padded to a multiple "
                       f"of {f}" for i, f in sorted(pads.items(), reverse=True))
    if pads:
        s_loops, r_loops = pad_tile(sch, block, pads)
    packed = pack_weight(sch, block, vec)
    so, si = sch.split(s_loops[-1], [None, vec])
    # several vectors of columns as unrolled one-register vectors: LLVM splits a 24-wide vector
    # (AVX2's 3 x 8) into shuffles and spills of its accumulators
    sv = []
    if vec > lanes and vec % lanes == 0:
        sv = list(sch.split(si, [None, lanes]))
        si = sv.pop()
    tiles, kc, few = [], None, False
    if len(s_loops) >= 2 and reg:
        to, ti = sch.split(s_loops[-2], [None, reg])
        # a weight panel outside the row tiles: it stays in cache while every row tile reads it
        outer_s = [*s_loops[:-2], so, to] if packed and not __import__("os").environ.get("ROWS_OUT") else [*s_loops[:-2], to, so]
        tiles = [ti]
        panels = _const(sch.get(so).extent)
        # too few panels (or an odd count) to split evenly over the threads: the row tiles join
        # the parallel loop, and each keeps its tile in registers over the whole reduction
        few = packed and few_panels(panels)
        if packed and len(r_loops) == 1 and not few:
            rows = _const(sch.get(to).extent) * reg if _const(sch.get(to).extent) else None
            kc = tile["kc"] if "kc" in tile else k_block(_const(sch.get(r_loops[0]).extent), vec, rows)
    elif len(s_loops) >= 2:
        outer_s = [*s_loops[:-1], so]
    else:
        outer_s = [so]
    said: list[str] = []
    if kc and _const(sch.get(r_loops[0]).extent) % kc == 0:
        # the panel's slice of kc steps stays in L1 while each row tile reads it; the panel's rows
        # accumulate across the slices in a local buffer
        ko, ki = sch.split(r_loops[0], [None, kc])
        sch.reorder(*outer_s[:-1], ko, outer_s[-1], ki, *tiles, *sv, si)
        epilogue = accumulate_locally(sch, block, outer_s[-2], epilogue=not pads, lanes=lanes, said=said)
        first_reduction = ko
    else:
        kc = None
        sch.reorder(*outer_s, *r_loops, *tiles, *sv, si)
        epilogue = accumulate_locally(sch, block, outer_s[-1], epilogue=not pads, lanes=lanes, said=said)
        first_reduction = r_loops[0]
    sch.vectorize(si)
    for t in (*tiles, *sv):
        sch.unroll(t)
    # the row tiles stay inside each thread's panels, unless there are none (a single output row)
    together = outer_s if few or len(outer_s) == 1 else outer_s[:-1]
    par = sch.fuse(*together) if len(together) > 1 else together[0]
    par = parallel(sch, par, block)
    sch.decompose_reduction(block, first_reduction)
    shown = "x".join(str(x) for x in ([_const(sch.get(tiles[0]).extent)] if tiles else []) + [vec])
    return (f"{name}: tiled {shown}{' (tile measured)' if measured else ''}, vectorized, "
            f"accumulated in registers, "
            f"{('parallel over panels and rows' if few else 'parallel') if par else 'one thread (small)'}"
            + (f", weight packed to N/{vec},K,{vec}" if packed else "")
            + (f", reduction blocked by {kc} for the L1" if kc else "")
            + (f", {padded}" if padded else "")
            + (f", {epilogue} epilogue block(s) fused into the write-back" if epilogue else "")
            + "".join(f", {s}" for s in said))


def _const(x) -> int | None:
    if isinstance(x, int):
        return x
    return int(x) if isinstance(x, tirx.IntImm) else None
