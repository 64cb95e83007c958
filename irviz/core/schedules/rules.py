"""CPU schedule rules for the TensorIR that remains after lowering, one pass per rule.

Each rule is its own module pass so a user can step through them and see each one's effect as a
TensorIR diff. A rule that cannot apply to a function leaves it unchanged and records why in the
function's `irviz.schedule_notes` attribute (shown in the TensorIR view), so nothing is skipped
silently. Rules work on `tvm.s_tir.Schedule` and dlight's normal form (one loop per block iter).

The rules, in the order the `tir-cpu` / `fast-cpu` pipelines run them:

- CPUTileConv2d: conv2d blocks → blocks of v output channels as one vector (v: the target's float32
  lanes, 16 with AVX-512, 8 with AVX2, 4 with NEON, or the tile CPUTuneConv2d measured) over a weight
  re-laid-out O/v·I·H·W·v (a `layout_rewrite_preproc` block), a register tile of up to 14
  output columns accumulated in a local buffer, kernel window unrolled, parallel outer loops,
  elementwise epilogue (bias, relu, ...) fused into the write-back. Depthwise conv2d blocks → one
  channel's plane per outer iteration, output rows as vectors, window unrolled (``depthwise``);
  one whose result is written channels-last → vectors over channels, a register tile of output
  pixels, contiguous stores (``depthwise_nhwc``).
- CPUInlineElementwise: chains of elementwise blocks into one loop nest.
- CPUTileReductions: matmul-like reductions tiled (vector-wide inner loop, a few rows in registers,
  or the tile CPUTuneReductions measured), a weight parameter packed into vector-wide panels, the
  tile accumulated locally with its epilogue in the write-back, extents with no small factor padded
  (``matmul_tile``);
  pooling-like reductions (one input, window ≤ 64) with the padding inlined and the window unrolled.
- CPUParallelVectorize: the remaining spatial loop nests: innermost loop vectorized, outer ones
  fused and parallel.
- CPUPrepackWeights (Relax level, ``prepack``): the weight re-layouts move out of the kernels and
  are folded on the constant weights at compile time.

Kernels with fewer than PARALLEL_MIN_WORK loop iterations stay on one thread.
"""
from __future__ import annotations

import contextlib
import contextvars

import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.s_tir.dlight.analysis import normalize_prim_func

from irviz.core.schedules.allocs import hoist_root_allocs
from irviz.core.schedules.depthwise import depthwise_blocks, schedule_depthwise
from irviz.core.schedules.epilogue import inline_epilogue
from irviz.core.schedules.matmul_tile import register_tile, tile_matmul
from irviz.core.schedules.prepack import PREPROC_ATTR, prepack_weights  # noqa: F401 - the rule's pass
from irviz.core.schedules.zero_init import zero_blocks_as_init
from irviz.core.target import vector_lanes

# Raised when a rule changes what it makes of a kernel: part of the decision cache's key, so library-
# or-TensorIR choices and tiles measured with older rules are measured again
RULES_VERSION = 13

NOTES_ATTR = "irviz.schedule_notes"
DONE_ATTR = "irviz.scheduled"


def _const(x) -> int | None:
    if isinstance(x, int):
        return x
    return int(x) if isinstance(x, tirx.IntImm) else None


def _pick_factor(extent: int | None, choices=(16, 8, 4)) -> int | None:
    if extent is None:
        return None
    return next((c for c in choices if extent % c == 0 and extent >= c), None)


def vector_choices(lanes: int) -> tuple[int, ...]:
    """Vector factors to try, widest first: one register of float32, then half, then a quarter, none
    narrower than 4 (SSE's width, below which a vector loop gains nothing over scalar code)."""
    return tuple(c for c in (lanes, lanes // 2, lanes // 4) if c >= 4) or (lanes,)


def target_lanes(lanes: int = 0) -> int:
    """`lanes` if given, else the float32 lanes of the current target (the host outside one)."""
    if lanes:
        return int(lanes)
    return vector_lanes(tvm.target.Target.current(allow_none=True))


TILE_ATTR = "irviz.conv_tile"  # {"vec": v, "reg": r} chosen by CPUTuneConv2d for CPUTileConv2d
REDUCTION_TILE_ATTR = "irviz.reduction_tile"  # {"vec": v, "reg": r} chosen by CPUTuneReductions


# Below this many loop iterations (~1M: tens of µs of work) a kernel runs on one thread: waking the
# thread pool saves a few µs at best, and on a loaded machine a parallel launch can wait a whole
# time slice for a descheduled worker (measured: the GPT sample's 16×64×256 matmuls, parallel,
# took the model from 0.3 ms to 10 ms while other jobs ran on the second core).
PARALLEL_MIN_WORK = 1 << 20


def _work(sch, block) -> int:
    """Loop iterations of `block` (all its loops, spatial and reduction)."""
    n = 1
    for l in sch.get_loops(block):
        e = _const(sch.get(l).extent)
        n *= e if e is not None else 1 << 10  # symbolic: assume large
    return n


def _parallel(sch, loop, block) -> bool:
    """Parallelize `loop` when `block` has enough work for it; say whether it did."""
    if _work(sch, block) < PARALLEL_MIN_WORK:
        return False
    sch.parallel(loop)
    return True


def _with_note(func, rule: str, note: str | None):
    """Record what `rule` did (or why it did nothing) on the function."""
    if note is None:
        return func
    # ASCII only: TVM's printer/parser round trip changes non-ASCII strings (export checks it)
    note = note.encode("ascii", "replace").decode("ascii")
    attrs = func.attrs
    old = dict(attrs[NOTES_ATTR]) if attrs is not None and NOTES_ATTR in attrs else {}
    old[rule] = note
    return func.with_attr(NOTES_ATTR, tvm.runtime.convert(old))


def _mark_done(func, rule: str):
    attrs = func.attrs
    done = list(attrs[DONE_ATTR]) if attrs is not None and DONE_ATTR in attrs else []
    if rule not in [str(d) for d in done]:
        done.append(rule)
    return func.with_attr(DONE_ATTR, tvm.runtime.convert([str(d) for d in done]))


def _already(func, rule: str) -> bool:
    return func.attrs is not None and DONE_ATTR in func.attrs and rule in [str(d) for d in func.attrs[DONE_ATTR]]


_AUTHORED: contextvars.ContextVar[dict | None] = contextvars.ContextVar("irviz_authored", default=None)


@contextlib.contextmanager
def authored(names: dict[str, str]):
    """While a pass runs: {function name: whose schedule it is} for the functions the learner
    scheduled (an IR file's schedule()); the rules leave those as they are."""
    token = _AUTHORED.set(dict(names or {}))
    try:
        yield
    finally:
        _AUTHORED.reset(token)


def user_scheduled(func, name: str | None = None) -> str | None:
    """Why `func` (named `name` in its module) looks scheduled by someone other than irviz's
    rules, or None.  A function the learner's schedule() changed is theirs whatever its loops.

    Lowering (TE, TOPI, LegalizeOps, FuseTIR) leaves serial loops, each block iterator bound to one
    loop variable (or a constant).  A rule of ours that changes loops marks the function
    (DONE_ATTR), so an unmarked function with a parallel/vectorized/unrolled loop, or a block
    bound to split or fused loops (``vj = j0 * 4 + j1``), was scheduled by its author."""
    theirs = (_AUTHORED.get() or {}).get(name) if name is not None else None
    if theirs is not None:
        return theirs
    if func.attrs is not None and DONE_ATTR in func.attrs:
        return None
    # TVM 0.27's Python has no TIR statement visitor: walk the statement fields by hand
    stack = [func.body]
    while stack:
        node = stack.pop()
        if isinstance(node, tirx.For) and node.kind != tirx.ForKind.SERIAL:
            return f"loop {node.loop_var.name} is {tirx.ForKind(node.kind).name.lower()}"
        if isinstance(node, s_tir.SBlockRealize):
            for iv, value in zip(node.block.iter_vars, node.iter_values):
                if not isinstance(value, (tirx.Var, tirx.IntImm)):
                    return (f"block {node.block.name_hint}'s {iv.var.name} is bound to {value}: "
                            "split or fused loops")
            node = node.block
        if isinstance(node, tirx.SeqStmt):
            stack.extend(node.seq)
            continue
        for field in ("body", "init", "then_case", "else_case"):
            child = getattr(node, field, None)
            if isinstance(child, tirx.Stmt):
                stack.append(child)
    return None


def _per_function(rule: str, apply, prepare=None):
    """Module pass that runs `apply(sch) -> note|None` on every PrimFunc (on a copy); `apply` may
    take the function as a second argument, and `prepare(func) -> (func, note|None)` rewrites the
    function first.  The function is tagged DONE_ATTR only when the rule changed it: a note alone
    is not a schedule."""

    @tvm.ir.transform.module_pass(opt_level=0, name=rule)
    def _pass(mod, ctx):
        updates = {}
        for gv, func in mod.functions.items():
            if not isinstance(func, tirx.PrimFunc) or _already(func, rule):
                continue
            if func.attrs is not None and "tirx.is_scheduled" in func.attrs:
                updates[gv] = _with_note(func, rule, "skipped: already scheduled (dlight)")
                continue
            theirs = user_scheduled(func, gv.name_hint)
            if theirs is not None:
                # the author's schedule stays as written, and is not credited to this rule
                updates[gv] = _with_note(func, rule, f"skipped: already scheduled by its author "
                                                     f"({theirs})")
                continue
            hoisted = hoist_root_allocs(func)
            try:
                work, prepared = prepare(hoisted) if prepare else (hoisted, None)
                sch = s_tir.Schedule(work)
                note = apply(sch, func)
                note = "; ".join(n for n in (prepared, note) if n) or None
                new = sch.mod["main"]
            except Exception as exc:  # a rule that cannot apply leaves the function as it was
                note, new = f"not applied: {_first_line(exc)}", func
            # a rule that changed nothing leaves the learner's allocations as they wrote them
            transformed = not tvm_ffi.structural_equal(new, hoisted) and new is not func
            new = new if transformed else func
            new = _with_note(new, rule, note)
            updates[gv] = _mark_done(new, rule) if transformed else new
        return with_functions(mod, updates)

    return _pass


def with_functions(mod, updates: dict):
    """A copy of `mod` with the functions in `updates` ({GlobalVar: function}) replaced; `mod`
    itself when there are none."""
    if not updates:
        return mod
    out = tvm.IRModule(dict(mod.functions), attrs=mod.attrs)
    for gv, func in updates.items():
        out[gv] = func
    return out


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    msg = next((l for l in text if "Error" in l or "error" in l), text[0] if text else type(exc).__name__)
    return msg[:200]


# ---------------------------------------------------------------- rule: inline elementwise chains
def _inline(sch: s_tir.Schedule) -> str | None:
    """Inline spatial producer blocks into their consumers (bn's subtract/divide/multiply/add → one
    loop), keeping producers of reductions (e.g. padding) as their own block."""
    if _scheduled_loops(sch):
        return "skipped: already scheduled by an earlier rule"
    blocks = normalize_prim_func(sch)
    if blocks is None:
        return "not applied: function is not in dlight's normal form"
    inlined = 0
    for info in blocks[:-1]:
        if info.is_reduction():
            continue
        block = info.block_rv
        consumers = sch.get_consumers(block)
        if not consumers or any(_is_reduction(sch, c) for c in consumers):
            continue
        try:
            sch.compute_inline(block)
            inlined += 1
        except Exception:  # a block that can't be inlined stays; that is fine
            continue
    return f"inlined {inlined} block(s)" if inlined else "nothing to inline"


def _scheduled_loops(sch) -> bool:
    """Whether some loop of the function is already parallel/vectorized/unrolled."""
    for block in sch.get_child_blocks(sch.get_sblock("root")):
        if any(sch.get(l).kind != tirx.ForKind.SERIAL for l in sch.get_loops(block)):
            return True
    return False


def _is_reduction(sch, block) -> bool:
    return any(iv.iter_type == tirx.IterVar.CommReduce for iv in sch.get(block).iter_vars)


# ------------------------------------------------------------------------ rule: blocked conv2d


def _reg_tile(width: int) -> int:
    """Register tile along the output width: a divisor of it, at most 14 accumulators."""
    return next((c for c in (14, 8, 7, 16, 12, 6, 5, 4, 3, 2) if width % c == 0), 1)


def _conv_blocks(sch: s_tir.Schedule):
    """(block, name) of every NCHW/OIHW conv2d reduction block (TOPI's conv2d_nchw: S S S S R R R)."""
    out = []
    for block in sch.get_child_blocks(sch.get_sblock("root")):
        b = sch.get(block)
        kinds = "".join("R" if iv.iter_type == tirx.IterVar.CommReduce else "S" for iv in b.iter_vars)
        # SSSSRRR, or SSSRRR once dlight's normal form dropped the unit batch loop
        if b.name_hint.startswith("conv2d_nchw") and kinds in ("SSSSRRR", "SSSRRR"):
            out.append((block, b.name_hint))
    return out


def conv_tile_of(func) -> dict | None:
    """The tile CPUTuneConv2d measured best for `func`, if any."""
    if func is None or func.attrs is None or TILE_ATTR not in func.attrs:
        return None
    return {str(k): int(v) for k, v in func.attrs[TILE_ATTR].items()}


def _tile_conv2d(sch: s_tir.Schedule, lanes: int, tile: dict | None = None) -> str | None:
    """conv2d (NCHW, OIHW) → output channels in vector-wide blocks (the weight re-laid-out to
    O/v·I·H·W·v by a `layout_rewrite_preproc` block, so one vector load reads v output channels),
    a register tile of output columns accumulated in a local buffer, kernel window unrolled,
    outer loops parallel, the elementwise epilogue fused into the write-back."""
    convs = _conv_blocks(sch)
    if not convs and not depthwise_blocks(sch):
        return None  # no conv2d here: nothing to say
    done = []
    for conv, name in convs:
        loops = sch.get_loops(conv)
        if len(loops) != len(sch.get(conv).iter_vars):
            done.append(f"{name}: already tiled")
            continue
        n, (f, y, x, rc, ry, rx) = loops[:-6], loops[-6:]
        F, W = _const(sch.get(f).extent), _const(sch.get(x).extent)
        choices = vector_choices(lanes)
        vec = tile["vec"] if tile and F is not None and F % tile["vec"] == 0 else _pick_factor(F, choices)
        if vec is None or W is None:
            why = (f"{F} output channels have no vector factor ({'/'.join(map(str, choices))})" if vec is None
                   else "output width is not a constant")
            done.append(f"{name}: {why}; left to CPUTileReductions")
            continue
        reads = sch.get(conv).reads
        if len(reads) != 2 or len(reads[1].region) != 4:
            done.append(f"{name}: unexpected reads; left to CPUTileReductions")
            continue
        if not any(reads[1].source.same_as(p) for p in sch.mod["main"].params):
            # the weight is computed inside this kernel: no layout-free parameter to prepack
            done.append(f"{name}: weight is not a parameter of the kernel; left to CPUTileReductions")
            continue
        reg = tile["reg"] if tile and W % tile["reg"] == 0 else _reg_tile(W)
        copies = _inline_copies(sch, conv)
        # weight: O I H W -> O/v I H W v (a preproc block; CPUPrepackWeights moves it out of the
        # function and folds it on the constant weights at compile time)
        packed = sch.cache_read(conv, 1, "global")
        sch.transform_layout(conv, ("read", 1), lambda o, i, h, w: (o // vec, i, h, w, o % vec))  # noqa: B023 - applied here, in this iteration
        sch.annotate(packed, PREPROC_ATTR, 1)
        fo, fi = sch.split(f, [None, vec])
        xo, xi = sch.split(x, [None, reg])
        sch.reorder(*n, fo, y, xo, rc, ry, rx, xi, fi)
        # accumulate reg×vec outputs in a local buffer laid out so the vector is contiguous
        acc = sch.cache_write(conv, 0, "local")
        sch.transform_layout(conv, ("write", 0), lambda a, b, c, d: (a, c, b // vec, d, b % vec))  # noqa: B023 - applied here, in this iteration
        epilogue = inline_epilogue(sch, acc)
        sch.reverse_compute_at(acc, xo)
        sch.unroll(ry)
        sch.unroll(rx)
        sch.unroll(xi)
        sch.vectorize(fi)
        par = _parallel(sch, sch.fuse(*n, fo, y), conv)
        sch.decompose_reduction(conv, rc)
        done.append(f"{name}: {vec} output channels per vector (weight packed to O/{vec},I,H,W,{vec}; "
                    f"{lanes} float32 lanes{', tile measured' if tile else ''}), "
                    f"{reg} columns in registers, kernel window unrolled, "
                    + ("parallel" if par else "one thread (small)")
                    + (f", {epilogue} epilogue block(s) fused into the write-back" if epilogue else "")
                    + (", unpadded input read in place" if copies else ""))
    done += schedule_depthwise(sch, lanes, _parallel)
    return "; ".join(done)


def _inline_copies(sch, block) -> int:
    """Inline the producers of `block` that only copy (TOPI's pad_temp of a convolution without
    padding, e.g. every 1x1 one): a whole-tensor copy on one thread before the convolution
    otherwise. A producer that pads (if_then_else) stays: its zeros would be a branch in the
    innermost loop."""
    inlined = 0
    for prod in sch.get_producers(block):
        body = sch.get(prod).body
        if isinstance(body, tirx.BufferStore) and isinstance(body.value, tvm.ir.TensorLoad):
            try:
                sch.compute_inline(prod)
                inlined += 1
            except Exception:  # cannot be inlined: the copy stays, which is correct, only slower
                pass
    return inlined


# ------------------------------------------------------------ rule: tile reductions (matmul/conv)
def reduction_kind(sch, info) -> str:
    """How CPUTileReductions treats a reduction block: "tile" (matmul-like), "window" (pooling-like:
    one input, a window of at most 64), or why it leaves the block alone."""
    kinds = "".join(i.kind for i in info.iters)
    if "O" in kinds or "R" not in kinds or kinds.index("R") != kinds.count("S") or not kinds.startswith("S"):
        return f"loop order {kinds} not S...SR...R"
    r_ext = [_const(i.dom) for i in info.iters if i.kind == "R"]
    if len(sch.get(info.block_rv).reads) == 1 and all(e is not None for e in r_ext) and _prod(r_ext) <= 64:
        return "window"
    return "tile"


def reduction_tile_rule(s_ext: list, lanes: int) -> dict:
    """The rule's tile for a matmul-like block with spatial extents `s_ext`: the columns along the
    innermost spatial loop (one or more vectors), the register tile's rows along the one before it
    (None: no factor), sized from the vector registers (``matmul_tile.register_tile``)."""
    if len(s_ext) >= 2 and (fit := register_tile(s_ext[-2], s_ext[-1], lanes)) is not None:
        return {"vec": fit[1], "reg": fit[0]}
    reg = None
    if len(s_ext) >= 2:
        # no small factor (a prime such as 197): 4, and the rows padded to a multiple of it
        reg = _pick_factor(s_ext[-2], (4, 2)) or (4 if s_ext[-2] and s_ext[-2] > 8 else None)
    vec = _pick_factor(s_ext[-1], vector_choices(lanes))
    if vec is None and s_ext[-1] and s_ext[-1] > 2 * lanes:
        vec = lanes  # the columns padded to a multiple of it
    return {"vec": vec, "reg": reg}


def reduction_tile_of(func) -> dict | None:
    """The tile CPUTuneReductions measured best for `func`, if any."""
    if func is None or func.attrs is None or REDUCTION_TILE_ATTR not in func.attrs:
        return None
    return {str(k): int(v) for k, v in func.attrs[REDUCTION_TILE_ATTR].items()}


def _tile_reductions(sch: s_tir.Schedule, lanes: int, tile: dict | None = None) -> str | None:
    """S…S R…R blocks: split the innermost spatial loop by the vector width and a second spatial loop
    by a small register tile (the rule's, or the one `tile` measured), move both inside the
    reduction loops, vectorize, unroll, parallelize the outer spatial loops, then split off the init
    (vectorize before decompose_reduction)."""
    blocks = normalize_prim_func(sch)
    if blocks is None:
        if _scheduled_loops(sch):
            return "skipped: already scheduled by an earlier rule"
        return "not applied: function is not in dlight's normal form"
    done = []
    for info in blocks:
        if not info.is_reduction():
            if "R" in info.dom_kind() and sch.get(info.block_rv).init is None:
                done.append(f"{info.name}: left untiled, a reduction without T.init (its zeros come from "
                            "another block); write them in `with T.init():` to have it tiled")
            continue
        how = reduction_kind(sch, info)
        if how not in ("tile", "window"):
            done.append(f"{info.name}: {how}")
            continue
        s_loops = [i.loop_rv for i in info.iters if i.kind == "S"]
        r_loops = [i.loop_rv for i in info.iters if i.kind == "R"]
        s_ext = [_const(i.dom) for i in info.iters if i.kind == "S"]
        block = info.block_rv
        if how == "window":
            done.append(_window_reduction(sch, info.name, block, s_loops, r_loops))
            continue
        rule = reduction_tile_rule(s_ext, lanes)
        measured = bool(tile and s_ext[-1] and (s_ext[-1] % tile["vec"] == 0 or s_ext[-1] > tile["vec"])
                        and (tile["reg"] == 1 or (len(s_ext) >= 2 and s_ext[-2] and s_ext[-2] >= tile["reg"])))
        if measured:
            rule = {**tile, "reg": tile["reg"] if tile["reg"] > 1 else None}
        vec = rule["vec"]
        if vec is None:
            outer = sch.fuse(*s_loops) if len(s_loops) > 1 else s_loops[0]
            par = _parallel(sch, outer, block)
            sch.decompose_reduction(block, r_loops[0])
            done.append(f"{info.name}: {'parallel only' if par else 'left serial'} "
                        f"(inner extent {s_ext[-1]} has no vector factor)")
            continue
        done.append(tile_matmul(sch, info.name, block, s_loops, r_loops, s_ext, rule, lanes, _parallel, measured))
    return "; ".join(done) if done else None


def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


def _window_reduction(sch, name, block, s_loops, r_loops) -> str:
    """Pooling-like reductions (one input, a small window): inline the padding into the window
    reads, parallelize the outer spatial loops, keep the window innermost and unrolled (its
    running max/sum stays in a register)."""
    inlined = 0
    for prod in sch.get_producers(block):
        if not _is_reduction(sch, prod):
            try:
                sch.compute_inline(prod)
                inlined += 1
            except Exception:  # keep a producer that cannot be inlined
                pass
    outer = sch.fuse(*s_loops[:-1]) if len(s_loops) > 2 else s_loops[0]
    par = _parallel(sch, outer, block)
    for r in r_loops:
        sch.unroll(r)
    sch.decompose_reduction(block, r_loops[0])
    return (f"{name}: window reduction, window unrolled innermost"
            + (", padding inlined" if inlined else "") + (", parallel" if par else ", one thread (small)"))


# ------------------------------------------------------- rule: parallelize + vectorize spatial blocks
def _parallel_vectorize(sch: s_tir.Schedule, lanes: int) -> str | None:
    """Spatial blocks: vectorize the innermost loop by the vector width or half or a quarter (kept apart, so the vector reads stay
    contiguous: no div/mod gathers from fusing rows of odd width), fuse and parallelize the loops
    outside it — unless the block is too small to be worth waking the thread pool."""
    vectorized = parallel = serial = 0
    # not dlight's normal form: blocks tiled by the reduction rule are no longer in it
    for block in sch.get_child_blocks(sch.get_sblock("root")):
        if _is_reduction(sch, block):
            continue
        loops = sch.get_loops(block)
        if not loops or any(sch.get(l).kind != tirx.ForKind.SERIAL for l in loops):
            continue  # already scheduled by another rule
        if len(sch.get_child_blocks(loops[0])) > 1:
            continue  # placed inside another block's loops by an earlier rule
        inner = loops[-1]
        extent = _const(sch.get(inner).extent)
        vec = _pick_factor(extent, vector_choices(lanes))
        outer = list(loops[:-1])
        if vec:
            if extent > vec:
                io, ii = sch.split(inner, [None, vec])
                outer.append(io)
            else:
                ii = inner
            sch.vectorize(ii)
            vectorized += 1
        elif not outer:
            outer = [inner]
        if outer:
            fused = sch.fuse(*outer) if len(outer) > 1 else outer[0]
            ext = _const(sch.get(fused).extent)
            if (ext is None or ext > 1) and _parallel(sch, fused, block):
                parallel += 1
            else:
                serial += 1
        else:
            serial += 1
    if not (vectorized or parallel or serial):
        return "no spatial block left"
    return (f"{vectorized} spatial block(s) vectorized, {parallel} parallel, "
            f"{serial} on one thread (small)")


def inline_elementwise():
    return _per_function("CPUInlineElementwise", lambda sch, func: _inline(sch))


def tile_reductions(lanes: int = 0):
    n = target_lanes(lanes)
    return _per_function("CPUTileReductions", lambda sch, func: _tile_reductions(sch, n, reduction_tile_of(func)),
                         _zeros_as_init)


def _zeros_as_init(func):
    func, folded = zero_blocks_as_init(func)
    return func, "; ".join(f"{zero}: its zeros are now {red}'s T.init" for zero, red in folded) or None


def parallel_vectorize(lanes: int = 0):
    n = target_lanes(lanes)
    return _per_function("CPUParallelVectorize", lambda sch, func: _parallel_vectorize(sch, n))


def tile_conv2d(lanes: int = 0):
    n = target_lanes(lanes)
    return _per_function("CPUTileConv2d", lambda sch, func: _tile_conv2d(sch, n, conv_tile_of(func)))
