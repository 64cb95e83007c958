"""Intermediate buffers a learner allocates with ``T.alloc_buffer``, moved where the schedule
primitives expect them.

In TVM 0.27 a course-style ``Y = T.alloc_buffer(...)`` in a hand-written PrimFunc parses to an
``AllocBuffer`` statement in the root block's body, where TE's output has the buffer in the root
block's ``alloc_buffers``. ``cache_write`` on the block that writes such a buffer replaces the buffer
in that statement too: the result allocates ``Y_local`` twice and ``Y`` nowhere, and the next
schedule refuses it as ill-formed ("multiple nested definitions of variable Y_local"). A buffer
allocated at the top of the root block lives as long as the function either way, so moving the
statement into ``alloc_buffers`` changes nothing the kernel computes.
"""
from __future__ import annotations

from tvm import s_tir, tirx


def hoist_root_allocs(func):
    """`func` with the ``AllocBuffer`` statements directly in its root block's body moved into the
    root block's ``alloc_buffers``; `func` itself when there are none (or no root block). An
    allocation with annotations stays where it is: ``alloc_buffers`` has nowhere to keep them."""
    realize = func.body
    if not isinstance(realize, s_tir.SBlockRealize):
        return func
    root = realize.block
    body = root.body
    stmts = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    moved = [s.buffer for s in stmts if isinstance(s, tirx.AllocBuffer) and not s.annotations]
    if not moved:
        return func
    rest = [s for s in stmts if not (isinstance(s, tirx.AllocBuffer) and not s.annotations)]
    if not rest:
        return func  # buffers allocated and never used: nothing a rule schedules
    new_body = rest[0] if len(rest) == 1 else tirx.SeqStmt(rest)
    block = s_tir.SBlock(root.iter_vars, root.reads, root.writes, root.name_hint, new_body, root.init,
                         [*root.alloc_buffers, *moved], root.match_buffers, root.annotations)
    return func.with_body(s_tir.SBlockRealize(realize.iter_values, realize.predicate, block))
