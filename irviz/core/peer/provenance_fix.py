"""Where Inductor's provenance is wrong or names no op, mended from the wrapper's own dataflow.

Library convolutions are paired with their FX convolutions by the wrapper's data flow and shapes
first (call_pairing.py); what follows mends the calls that pairing leaves (other library calls,
generated kernels).

Two library calls given one post-grad node:

A post-grad node is lowered to one library call, yet with freezing Inductor's provenance can give
two mkldnn convolutions the same node (on a small ResNet stage, the stem's convolution got the last
block's node): one of them is wrong. The call kept is the one whose neighbours in the wrapper (its
calls run in a topological order) compute the FX nodes nearest the node's place in the FX graph.
The other takes the post-grad nodes of the generated kernel that wrote its first input, when no
library call claims those: that kernel is the copy of the convolution's input into Inductor's
layout, and Inductor ties it to the convolution's node. Where neither holds, the call keeps no
node and shows as unmapped rather than as a wrong one.

A generated kernel whose provenance names only a graph input (with freezing, the copy of a
convolution's bias into a buffer the mkldnn call takes) computes no op of its own: it is given the
FX nodes of the first call that reads what it writes, as the layout copies of a convolution's input
are by Inductor itself.

    notes = fix_provenance(calls, posts, fx_index, sources)  # posts[i]: call i's post-grad nodes
"""
from __future__ import annotations

import re

from irviz.core.peer.output_code import KernelCall

__all__ = ["fix_provenance", "written_buffers"]

_PARAMS = re.compile(r'extern "C"\s+void\s+kernel\((.*?)\)', re.S)
_ARG = re.compile(r"\b(buf\d+|arg\d+_\d+)\b")


def written_buffers(call: KernelCall, source: str) -> set[str]:
    """The buffers a call writes: a library call's result; a generated kernel's arguments at its
    non-const pointer parameters (out_ptr, in_out_ptr)."""
    if not call.generated:
        m = re.match(r"\s*(buf\d+)\s*=", call.line)
        return {m.group(1)} if m else set()
    m = _PARAMS.search(source or "")
    inner = call.line[call.line.find("(") + 1:call.line.rfind(")")]
    if m is None or not inner:
        return set()
    params = [p.strip() for p in m.group(1).split(",")]
    args = [a.strip() for a in inner.split(",")]
    return {a for p, a in zip(params, args) if "*" in p and not p.startswith("const") and _ARG.fullmatch(a)}


def _first_input(call: KernelCall) -> str | None:
    inner = call.line[call.line.find("(") + 1:]
    m = _ARG.match(inner.strip())
    return m.group(1) if m else None


def _place(i: int, posts: list[list[str]], fx_index) -> tuple[float | None, float | None]:
    """The FX places of the nearest calls before and after call i that map to FX nodes."""
    def at(j):
        xs = [fx_index(q) for q in posts[j]]
        xs = [x for x in xs if x is not None]
        return max(xs) if xs else None

    before = next((x for j in range(i - 1, -1, -1) if (x := at(j)) is not None), None)
    after = next((x for j in range(i + 1, len(posts)) if (x := at(j)) is not None), None)
    return before, after


def fix_provenance(calls: list[KernelCall], posts: list[list[str]], fx_index,
                     sources: dict[str, str], settled=frozenset(), borrowed: dict[int, int] | None = None
                     ) -> dict[int, str]:
    """Rewrite `posts` (per call, its post-grad nodes) where library calls share one or a generated
    kernel's name no op; `fx_index`:
    post-grad node -> its place in the FX graph (None unknown). `settled`: calls whose FX nodes
    are known otherwise (call_pairing), left alone; a generated kernel that writes for one of them
    is recorded in `borrowed` ({kernel: call}) instead of taking its post-grad nodes. Returns
    {call index: what was done}, for the kernel rows to say."""
    notes: dict[int, str] = {}
    claimants: dict[str, list[int]] = {}
    for i, c in enumerate(calls):
        if not c.generated and i not in settled:
            for q in posts[i]:
                claimants.setdefault(q, []).append(i)
    for q, idx in claimants.items():
        if len(idx) < 2 or fx_index(q) is None:
            continue
        here = fx_index(q)

        def distance(i, here=here):
            before, after = _place(i, posts, fx_index)
            return sum(abs(here - x) for x in (before, after) if x is not None)

        keep = min(idx, key=distance)
        for i in idx:
            if i != keep:
                posts[i] = [p for p in posts[i] if p != q]
                notes[i] = (f"Inductor's provenance gave {q} to this call and to {calls[keep].kernel} too; "
                            f"kept for the latter, whose neighbours compute the FX nodes around it")
    library_posts = {q for i, c in enumerate(calls) if not c.generated for q in posts[i]}
    for i in sorted(notes):
        if posts[i]:
            continue
        wanted = _first_input(calls[i])
        writer = next((j for j in range(i - 1, -1, -1)
                       if wanted and wanted in written_buffers(calls[j], sources.get(calls[j].kernel, ""))), None)
        if (writer is not None and calls[writer].generated and posts[writer]
                and not set(posts[writer]) & library_posts):
            posts[i] = list(posts[writer])
            notes[i] += (f"; this call's nodes are those of {calls[writer].kernel}, which writes its input "
                         f"{wanted} (the input's copy into Inductor's layout)")
        else:
            notes[i] += "; no other provenance found: unmapped"
    for i, c in enumerate(calls):
        if not c.generated or any(fx_index(q) is not None for q in posts[i]):
            continue
        outs = written_buffers(c, sources.get(c.kernel, ""))
        reader = next((j for j in range(i + 1, len(calls)) if outs & _read(calls[j])), None)
        if reader is not None and (reader in settled or any(fx_index(q) is not None for q in posts[reader])):
            notes[i] = (f"Inductor's provenance names {', '.join(posts[i]) or 'nothing'} (no op of the FX graph): "
                        f"this kernel writes {', '.join(sorted(outs & _read(calls[reader])))} for "
                        f"{calls[reader].kernel}, whose FX nodes it is given")
            if reader in settled and borrowed is not None:
                borrowed[i] = reader
            else:
                posts[i] = posts[i] + [q for q in posts[reader] if q not in posts[i]]
    return notes


def _read(call: KernelCall) -> set[str]:
    """The buffers and inputs named among a call's arguments."""
    return set(_ARG.findall(call.line[call.line.find("(") + 1:]))
