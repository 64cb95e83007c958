"""The peer report: Inductor's kernels with their FX nodes, code and times, beside TVM's.

    {"compiler": "inductor", "freezing", "options", "threads", "compile_seconds", "total_ms", "compiled_ms", "region_ms",
     "reliable", "reason", "timing", "profiled_timing", "kernels": [{"name", "kind", "fx_nodes", "ms", "calls",
     "code", "post_grad_nodes", "unmapped", "fx_nodes_inferred", "provenance_note"}], "by_fx_node": [...], "groups": [...],
     "summary": {...},
     "attribution", "unmapped_kernels"}

A kernel's `fx_nodes` come from Inductor's provenance; where Inductor replaced a subgraph by one op
of its own (attention by one scaled_dot_product call), provenance names only that op, and the FX
nodes between its inputs and its users are added and listed in `fx_nodes_inferred` too; so are the
ops a pattern rewrite fused into a kernel whose provenance kept only the rewrite's last node (with
freezing, a convolution with its folded batch norm, add and relu in one mkldnn call).

`total_ms` is the sum of the kernels' medians (profiled runs); `compiled_ms` the compiled model's
whole call timed alone, on the same thread count, without the profiler. Where they are more than
25% apart, or the block was competed with, `reliable` is False and `reason` says why.
"""
from __future__ import annotations

from irviz.core.backend.timing import contention
from irviz.core.peer.call_pairing import pair_conv_calls
from irviz.core.peer.inductor import PeerError, compile_inductor, compile_options
from irviz.core.peer.names import feeding_claimed, inside_inserted, pre_grad_to_fx
from irviz.core.peer.output_code import call_sequence, kernel_sources
from irviz.core.peer.profile import time_inductor
from irviz.core.peer.provenance_fix import fix_provenance
from irviz.core.peer.side_by_side import ATTRIBUTION, by_fx_node, groups, summary

__all__ = ["AGREE", "inductor_peer", "inductor_peer_for", "peer_kernels", "peer_lines"]

AGREE = 0.25  # kernels' sum against the whole call: further apart than this is not trusted


def peer_kernels(build, graph) -> tuple[list[dict], list[list]]:
    """(kernel rows without times, each graph's call sequence). A row per generated kernel (its
    calls counted) and per library call."""
    order = {n.name: i for i, n in enumerate(graph.nodes)}
    rows: dict[str, dict] = {}
    sequences, seen_lib = [], {}
    many = len(build.graphs) > 1
    for gi, g in enumerate(build.graphs):
        to_fx = pre_grad_to_fx(g.ops, graph)
        sources = kernel_sources(g.output_code)
        code_to_post = g.provenance.get("cppCodeToPost", {})
        post_to_pre = g.provenance.get("postToPre", {})
        calls = call_sequence(g.output_code)
        sequences.append(calls)
        posts = [list(code_to_post.get(c.handle, [])) if c.handle else [] for c in calls]

        def fx_index(q, post_to_pre=post_to_pre, to_fx=to_fx):
            places = [order[to_fx[p]] for p in post_to_pre.get(q, ()) if to_fx.get(p) in order]
            return max(places) if places else None

        paired = pair_conv_calls(g.output_code, calls, graph, sources)
        borrowed: dict[int, int] = {}
        notes = fix_provenance(calls, posts, fx_index, sources, settled=set(paired), borrowed=borrowed)
        for i, c in enumerate(calls):
            post = posts[i]
            pre = [p for q in post for p in post_to_pre.get(q, ())]
            fx = {to_fx[p] for p in pre if p in to_fx}
            if i in paired:  # the wrapper's data flow over Inductor's provenance, which can name the wrong call
                named, fx = fx, set(paired[i].fx_nodes)
                if not named <= fx:
                    notes[i] = (f"{paired[i].note}; Inductor's provenance named "
                                f"{', '.join(sorted(named, key=lambda n: order.get(n, 1 << 30))) or 'nothing'}")
            elif borrowed.get(i) in paired:
                fx |= set(paired[borrowed[i]].fx_nodes)
            unmapped = sorted({p for p in pre if p not in to_fx} | {q for q in post if q not in post_to_pre})
            prefix = f"graph{gi}." if many else ""
            if c.generated:
                name = prefix + c.kernel
            else:
                k = seen_lib.get(c.kernel, 0)
                seen_lib[c.kernel] = k + 1
                name = prefix + c.kernel + (f"#{k}" if k else "")
            row = rows.setdefault(name, {"name": name, "kind": "generated" if c.generated else "library",
                                         "fx_nodes": [], "ms": None, "calls": 0,
                                         "code": sources.get(c.kernel, c.line) if c.generated else c.line,
                                         "post_grad_nodes": [], "unmapped": [], "fx_nodes_inferred": [],
                                         "provenance_note": None, "fx_calls": {}})
            if i in notes:
                row["provenance_note"] = notes[i]
            row["calls"] += 1
            for n in fx:  # which call computes which node: a kernel called for two layers
                row["fx_calls"].setdefault(n, f"{gi}:{i}")
            row["fx_nodes"] = sorted(set(row["fx_nodes"]) | fx, key=lambda n: order.get(n, 1 << 30))
            row["post_grad_nodes"] += [q for q in post if q not in row["post_grad_nodes"]]
            row["unmapped"] += [u for u in unmapped if u not in row["unmapped"]]
            c.row = name
    _infer_inside(graph, rows, order)
    return list(rows.values()), sequences


def _infer_inside(graph, rows: dict[str, dict], order: dict[str, int]) -> None:
    """Add the FX nodes inside an op Inductor inserted (names.inside_inserted) to its kernel, then
    those a rewrite fused into a kernel whose provenance names only its last node
    (names.feeding_claimed)."""
    claims: dict[str, set[str]] = {}
    for r in rows.values():
        for n in r["fx_nodes"]:
            claims.setdefault(n, set()).add(r["name"])
    inserting = {r["name"] for r in rows.values() if r["unmapped"]}  # it computes a node Inductor made
    for n, k in inside_inserted(graph, claims, inserting).items():
        rows[k]["fx_nodes_inferred"].append(n)
        claims.setdefault(n, set()).add(k)
    for n, ks in feeding_claimed(graph, claims).items():
        for k in ks:
            rows[k]["fx_nodes_inferred"].append(n)
    for r in rows.values():
        if r["fx_nodes_inferred"]:
            r["fx_nodes_inferred"].sort(key=lambda n: order.get(n, 1 << 30))
            r["fx_nodes"] = sorted(set(r["fx_nodes"]) | set(r["fx_nodes_inferred"]), key=lambda n: order.get(n, 1 << 30))


def _fill_times(rows: list[dict], sequences, call_ms) -> list[str]:
    """Each row's ms: the sum of its calls' medians; names of rows with a call not timed."""
    by_name = {r["name"]: r for r in rows}
    untimed = []
    for calls, times in zip(sequences, call_ms):
        for c, ms in zip(calls, times):
            r = by_name[c.row]
            if ms is None:
                r["_untimed"] = True
                untimed.append(r["name"])
            else:
                r["ms"] = (r["ms"] or 0.0) + ms
    for r in rows:
        if r.pop("_untimed", False):
            r["ms"] = None
        elif r["ms"] is not None:
            r["ms"] = round(r["ms"], 5)
    return sorted(set(untimed))


def inductor_peer(captured, *, threads: int = 1, repeats: int = 10, tvm_kernels: list[dict] | None = None,
                  tvm_fx: dict[str, list[str]] | None = None, progress=None, freezing: bool = False,
                  tvm_calls: dict[str, dict[str, str]] | None = None, peak_gflops: float | None = None) -> dict:
    """Compile `captured` (a frontend Captured) with Inductor (`freezing`: Inductor's freezing=True,
    the weights constants), time it on `threads` threads, and put it beside `tvm_kernels` (dicts
    with "name", "ms"), whose FX nodes `tvm_fx` gives (and `tvm_calls`, which call computes each). A group
    whose time on a side implies more than the FMA peak (`peak_gflops`, measured on `threads` when
    not given) is marked unsure (plausible.py). A model Inductor cannot compile or run:
    {"compiler": "inductor", "freezing", "options", "error": why}."""
    say = progress or (lambda *a, **k: None)
    graph = captured.graph
    mode = {"freezing": bool(freezing), "options": compile_options(freezing)}
    say(f"Compiling with torch.compile (inductor{', freezing' if freezing else ''})", 0.1)
    try:
        build = compile_inductor(captured, threads, freezing=freezing)
        rows, sequences = peer_kernels(build, graph)
        say("Timing Inductor's kernels", 0.6)
        times = time_inductor(build, sequences, repeats)
    except PeerError as exc:
        return {"compiler": "inductor", **mode, "error": str(exc)}
    except Exception as exc:  # a run of the compiled model failing is the peer's failure, not the check's
        return {"compiler": "inductor", **mode,
                "error": f"the compiled model failed to run: {type(exc).__name__}: {exc}"[:500]}
    untimed = _fill_times(rows, sequences, times.call_ms)
    total = sum(r["ms"] for r in rows if r["ms"] is not None)
    compiled = times.compiled.median_ms
    reasons = []
    for what, t in (("the compiled call", times.compiled), ("the profiled calls", times.profiled)):
        why = contention(t, build.threads)
        if why:
            reasons.append(f"{what} {'was' if what.endswith('call') else 'were'} competed with: {why}")
    if untimed:
        reasons.append(f"no profiler event for {', '.join(untimed[:5])}")
    apart = abs(total - compiled) / compiled if compiled > 0 else 0.0
    if apart > AGREE:
        reasons.append(f"the kernels add up to {total:.3f} ms, the compiled call alone takes {compiled:.3f} ms "
                       f"({apart:.0%} apart): time outside the kernels (Dynamo's guards, the Python "
                       "wrapper) or the profiler's own cost is large at this size")
    tvm = [dict(k, fx_nodes=list((tvm_fx or {}).get(k["name"], ())), fx_calls=dict((tvm_calls or {}).get(k["name"], {})))
           for k in (tvm_kernels or ())]
    peak = _peak(build.threads) if peak_gflops is None else {"gflops": peak_gflops, "source": "given"}
    side = by_fx_node(graph, tvm, rows, peak.get("gflops"))
    return {"compiler": "inductor", "freezing": bool(freezing), "options": build.options, "error": None,
            "threads": build.threads,
            "compile_seconds": round(build.seconds, 3), "graphs": len(build.graphs),
            "total_ms": round(total, 5), "compiled_ms": round(compiled, 5),
            "region_ms": None if times.region_ms is None else round(times.region_ms, 5),
            "runs": times.runs, "timing": times.compiled.as_dict(), "profiled_timing": times.profiled.as_dict(),
            "reliable": not reasons, "reason": "; ".join(reasons) or None,
            "kernels": rows, "unmapped_kernels": [r["name"] for r in rows if not r["fx_nodes"]],
            "by_fx_node": side, "groups": groups(side), "summary": summary(side), "attribution": ATTRIBUTION,
            "peak_gflops": peak.get("gflops"), "peak_source": peak.get("source"),
            "tvm_kernels": tvm}


def _peak(threads: int) -> dict:
    """The measured FMA peak for the plausibility of the groups' times; without it, no group is held
    against it, and the report says why."""
    from irviz.core.backend.machine_peak import compute_peak  # compiles a TVM kernel: only when a peer runs

    try:
        p = compute_peak(threads)
        return {"gflops": p["gflops"], "source": p["source"]}
    except Exception as exc:  # the peak is a check on the figures, not a figure: the report stands without it
        return {"gflops": None, "source": f"not measured ({type(exc).__name__}: {exc}); no group's rate was checked"}


def peer_lines(report: dict, most: int = 10) -> list[str]:
    """The report as `irviz check` prints it: totals, then the FX nodes where the two differ most."""
    what = "inductor, freezing" if report.get("freezing") else "inductor"
    if report.get("error"):
        return [f"peer     {what}: not compiled: {report['error']}"]
    out = [f"peer     {what}: {len(report['kernels'])} kernels add up to {report['total_ms']:.3f} ms; "
           f"compiled model alone {report['compiled_ms']:.3f} ms ({report['threads']} threads, "
           f"compiled in {report['compile_seconds']:.1f} s)"]
    if not report["reliable"]:
        out.append(f"peer     unreliable: {report['reason']}")
    out += [f"peer     provenance of {k['name']}: {k['provenance_note']}" for k in report["kernels"]
            if k.get("provenance_note")]
    s = report["summary"]
    out.append(f"peer     TVM slower on nodes worth {s['tvm_loses_ms']:.3f} ms, faster on {s['tvm_wins_ms']:.3f} ms "
               f"({ATTRIBUTION})")
    # per group of FX nodes computed by whole kernels on both sides (side_by_side)
    out.append(f"  {'FX nodes':34} {'TVM kernels':30} {'ms':>8}  {'Inductor kernels':34} {'ms':>8}  faster")
    for g in s["most_different"][:most]:
        nodes = g["fx_nodes"]
        what = nodes[0] if len(nodes) == 1 else f"{nodes[0]}..{nodes[-1]} ({len(nodes)})"
        out.append(f"  {what[:34]:34} {'+'.join(g['tvm_kernels'])[:30]:30} {_f(g['tvm_ms'])}  "
                   f"{'+'.join(g['inductor_kernels'])[:34]:34} {_f(g['inductor_ms'])}  {g['faster']}")
    for g in s.get("unsure") or ():  # left out of the verdicts above, but shown
        nodes = g["fx_nodes"]
        what = nodes[0] if len(nodes) == 1 else f"{nodes[0]}..{nodes[-1]} ({len(nodes)})"
        out.append(f"? {what[:34]:34} {'+'.join(g['tvm_kernels'])[:30]:30} {_f(g['tvm_ms'])}  "
                   f"{'+'.join(g['inductor_kernels'])[:34]:34} {_f(g['inductor_ms'])}  unsure")
        out.append(f"peer     unsure {what}: {g['unsure']}")
    return out


def _f(x) -> str:
    return f"{'-':>8}" if x is None else f"{x:8.3f}"


def inductor_peer_for(ws, step=None, repeats: int = 10, progress=None, freezing: bool = False) -> dict:
    """The peer report for a workspace's model beside the TVM run of `step` (the cursor by
    default), if that step was run; without a run, Inductor's side alone on TVM's thread count.
    The report carries the step it was put beside ("step"), so a later step reads it as stale."""
    from irviz.core.backend.run import tvm_threads

    if ws.captured is None:
        return {"compiler": "inductor", "freezing": bool(freezing), "options": compile_options(freezing),
                "error": "no PyTorch model captured to compile", "step": None}
    st = ws.step_at(step)
    run = ws.runs.get(st.index)
    res = run[1] if run is not None and run[0] is st else None
    tvm = [{"name": k.name, "ms": k.ms, "calls": k.calls} for k in (getattr(res, "kernels", None) or ())]
    from irviz.core.peer.side_by_side import kernel_fx_calls, kernel_fx_nodes

    try:
        fx = kernel_fx_nodes(st, ws.captured.graph) if tvm else {}
        calls = kernel_fx_calls(st, ws.captured.graph) if tvm else {}
    except Exception:  # a step provenance cannot follow: TVM's side without FX nodes
        fx, calls = {}, {}
    threads = getattr(res, "threads", None) or tvm_threads() or 1
    report = inductor_peer(ws.captured, threads=threads, repeats=repeats, tvm_kernels=tvm, tvm_fx=fx,
                           progress=progress, freezing=freezing, tvm_calls=calls)
    report["step"] = st.index
    report["tvm_ran"] = res is not None
    return report
