"""A reduction whose zeros a learner writes in a block of its own, given them as its ``T.init``.

TVM sees a reduction (something to tile) only in a block with an init: ``Y[i, j] = Y[i, j] + ...``
after a separate ``Y[i, j] = 0`` loop nest is, to dlight and ``decompose_reduction``, a block it
cannot schedule. When the zero block comes right before the reduction, writes a constant to the
whole buffer and nothing else, and the reduction updates each element of that buffer at its
spatial indices, the two compute the same as one block whose init writes that constant.
"""
from __future__ import annotations

from tvm import s_tir, tirx


def _nest(stmt):
    """(loops, realize) of a perfect loop nest around one block, or None."""
    loops = []
    while isinstance(stmt, tirx.For):
        loops.append(stmt)
        stmt = stmt.body
    return (loops, stmt) if isinstance(stmt, s_tir.SBlockRealize) else None


def _const(x):
    return int(x) if isinstance(x, tirx.IntImm) else None


def _zero_fill(nest):
    """(buffer, value) when `nest` writes a constant to every element of one buffer, its indices
    the block's iterators bound to the loops in order; else None."""
    loops, realize = nest
    block = realize.block
    store = block.body
    if (block.init is not None or block.alloc_buffers or block.match_buffers or len(block.writes) != 1
            or not isinstance(store, tirx.BufferStore)
            or not isinstance(store.value, (tirx.FloatImm, tirx.IntImm))
            or len(loops) != len(block.iter_vars) or _const(realize.predicate) != 1):
        return None
    shape = [_const(d) for d in store.buffer.shape]
    for loop, iv, value, index, extent in zip(loops, block.iter_vars, realize.iter_values, store.indices,
                                              shape):
        if (iv.iter_type != tirx.IterVar.DataPar or not value.same_as(loop.loop_var)
                or not index.same_as(iv.var) or _const(loop.min) != 0 or _const(iv.dom.min) != 0
                or extent is None or _const(loop.extent) != extent or _const(iv.dom.extent) != extent):
            return None
    if len(store.indices) != len(shape):
        return None
    return store.buffer, store.value


def _with_init(nest, buffer, value):
    """The reduction nest with `value` as its init when its block updates `buffer` at its spatial
    iterators (in order, over the whole buffer); else None."""
    loops, realize = nest
    block = realize.block
    store = block.body
    if block.init is not None or not isinstance(store, tirx.BufferStore) or not store.buffer.same_as(buffer):
        return None
    spatial = [iv for iv in block.iter_vars if iv.iter_type == tirx.IterVar.DataPar]
    reduce = [iv for iv in block.iter_vars if iv.iter_type == tirx.IterVar.CommReduce]
    if not reduce or len(spatial) + len(reduce) != len(block.iter_vars) or len(spatial) != len(store.indices):
        return None
    if any((_const(iv.dom.extent) or 0) < 1 for iv in reduce):
        return None  # no iteration: the init would never run
    for iv, index, extent in zip(spatial, store.indices, buffer.shape):
        if not index.same_as(iv.var) or _const(iv.dom.min) != 0 or _const(iv.dom.extent) != _const(extent):
            return None
    init = tirx.BufferStore(buffer, value, list(store.indices))
    # as the parser writes a block with an init: the running sum is not one of its reads
    reads = [r for r in block.reads if not r.source.same_as(buffer)]
    new_block = s_tir.SBlock(block.iter_vars, reads, block.writes, block.name_hint, block.body, init,
                             block.alloc_buffers, block.match_buffers, block.annotations)
    stmt = s_tir.SBlockRealize(realize.iter_values, realize.predicate, new_block)
    for loop in reversed(loops):
        stmt = tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, stmt, loop.thread_binding,
                        loop.annotations)
    return stmt


def zero_blocks_as_init(func):
    """(`func` with each zero block that directly precedes its reduction folded into the reduction's
    init, [(zero block, reduction block) names]). Only the root block's top-level statements are
    looked at: that is where a course-style kernel has them."""
    realize = func.body
    if not isinstance(realize, s_tir.SBlockRealize) or not isinstance(realize.block.body, tirx.SeqStmt):
        return func, []
    stmts = list(realize.block.body.seq)
    out, folded, i = [], [], 0
    while i < len(stmts):
        first, second = _nest(stmts[i]), _nest(stmts[i + 1]) if i + 1 < len(stmts) else None
        fill = _zero_fill(first) if first and second else None
        merged = _with_init(second, *fill) if fill else None
        if merged is None:
            out.append(stmts[i])
            i += 1
            continue
        out.append(merged)
        folded.append((first[1].block.name_hint, second[1].block.name_hint))
        i += 2
    if not folded:
        return func, []
    root = realize.block
    body = out[0] if len(out) == 1 else tirx.SeqStmt(out)
    block = s_tir.SBlock(root.iter_vars, root.reads, root.writes, root.name_hint, body, root.init,
                         root.alloc_buffers, root.match_buffers, root.annotations)
    return func.with_body(s_tir.SBlockRealize(realize.iter_values, realize.predicate, block)), folded
