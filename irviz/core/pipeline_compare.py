"""Two pipelines on the same model, step-aligned.

    cmp = compare_pipelines(ws, ["zero", "LegalizeOps,AnnotateTIROpPattern,FuseOps,FuseTIR"])
    cmp.aligned                  # [(0, 0), (1, 1), (2, 2), (3, None), (4, 3), (5, 4)]
    pair_diff(cmp, 5, 4)         # the IR at A's step 5 against B's step 4: text and graph
    pass_diff(cmp, 4, 3)         # what FuseOps did under A against what it did under B
    pair_graphs(cmp, 5, 4)       # main at both steps laid out, its nodes marked by the graph diff
    measure(ws, cmp)             # build + run the last step of each: one row per pipeline

Both sessions start from the workspace's one import (the same IRModule object), so step 0 of A and
B are identical and any difference is the pipelines' doing. The workspace's own session is reused
for a pipeline it has already run to the end, so comparing against what is open costs one pipeline.

Steps are aligned by pass name with a longest common subsequence: the rows are the passes both ran
(in order), and the passes only one of them ran sit between them as one-sided rows (A's first).

The graph diff matches the bindings of each Relax function present on both sides by a local
signature (op or callee, the callee's structural hash, shape, dtype), in binding order: equal
signatures are the same node; a node whose op, callee *name* and type agree but whose callee's
hash differs is "changed"; the rest are only in A or only in B. Names are not used: importer and
FuseOps both name bindings lv, lv1, ..., so equal names say nothing across two pipelines.
"""
from __future__ import annotations

import difflib
import time
from dataclasses import dataclass, field

from irviz.core.backend import build as build_mod
from irviz.core.backend import run as run_mod
from irviz.core.backend import prim_run
from irviz.core.errors import IrvizError, RequestError
from irviz.core.passes import PassInvocation, parse_pipeline, pipeline_text
from irviz.core.session import Session
from irviz.core.tvm_compat import relax
from irviz.core.views import module_diff as diff_mod
from irviz.core.views import layout
from irviz.core.views.bookkeeping import without_bookkeeping
from irviz.core.views.graph import relax_digraph

__all__ = ["Comparison", "compare_pipelines", "align_steps", "pair_diff", "pass_diff", "graph_diff",
           "pair_graphs", "measure", "comparison_dict"]


@dataclass
class Comparison:
    texts: list[str]            # the pipelines as given (names or texts)
    steps: list[list]           # per pipeline: its recorded Steps (steps[0] is the import)
    errors: list                # per pipeline: the IrvizError that stopped it, or None
    aligned: list[tuple]        # [(index in A | None, index in B | None), ...]
    rows: list[dict] = field(default_factory=list)  # per pipeline: build + run of the last step

    def step(self, side: int, index) -> object:
        steps = self.steps[side]
        if index is None or not 0 <= int(index) < len(steps):
            which = "AB"[side]
            raise RequestError(f"No step {index} in pipeline {which}: it has steps 0..{len(steps) - 1}")
        return steps[int(index)]


# ---------------------------------------------------------------------------------------------
# running and aligning


def _lcs_pairs(a: list[str], b: list[str]) -> list[tuple[int, int]]:
    n, m = len(a), len(b)
    best = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            best[i][j] = best[i + 1][j + 1] + 1 if a[i] == b[j] else max(best[i + 1][j], best[i][j + 1])
    pairs, i, j = [], 0, 0
    while i < n and j < m:
        if a[i] == b[j]:
            pairs.append((i, j))
            i, j = i + 1, j + 1
        elif best[i + 1][j] >= best[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs


def align_steps(names_a: list[str], names_b: list[str]) -> list[tuple]:
    """Rows (i | None, j | None) over two lists of pass names: the common subsequence paired, the
    rest one-sided, in order (in a gap, A's passes come before B's)."""
    out: list[tuple] = []
    i = j = 0
    for pi, pj in _lcs_pairs(list(names_a), list(names_b)) + [(len(names_a), len(names_b))]:
        out += [(k, None) for k in range(i, pi)]
        out += [(None, k) for k in range(j, pj)]
        if pi < len(names_a) and pj < len(names_b):
            out.append((pi, pj))
        i, j = pi + 1, pj + 1
    return out


def _run_pipeline(ws, invocations, progress, label: str):
    """(steps, error): a fresh session from the workspace's import, every pass applied."""
    # both pipelines' passes under the workspace's target, as its own session's ran
    session = Session(ws.imported, ws.captured,
                      target=ws.session.chosen_target if ws.session is not None else None)
    session.set_pipeline(invocations)
    total = max(1, len(session.pipeline))

    def on_event(event, payload):
        if event == "applying":
            done = payload["index"] - session.n_schedule  # the learner's schedule steps are not passes
            progress(f"Pipeline {label}: {payload['pass']} ({done}/{total})", None)

    unsubscribe = session.subscribe(on_event)
    try:
        session.run_to_end()
    finally:
        unsubscribe()
    return list(session.steps), session.error


def _reusable(ws, invocations) -> bool:
    s = ws.session
    if s is None or s.pipeline or s.error is not None:
        return False
    return [(st.pass_name, st.params) for st in s.pass_steps()] == [(i.name, dict(i.params)) for i in invocations]


def compare_pipelines(ws, pipelines, progress=None) -> Comparison:
    """Run each pipeline (a name, a text, or a list of PassInvocations) on the workspace's import.
    A pipeline text that does not parse raises before anything runs; a pass that fails stops its
    pipeline there (its error is kept and reported with the rows)."""
    progress = progress or (lambda *_a, **_k: None)
    if len(pipelines) != 2:
        raise RequestError(f"compare takes two pipelines, got {len(pipelines)}",
                           "give --pipeline twice: --pipeline A --pipeline B")
    if ws.imported is None:
        raise RequestError("No model is open" if ws.import_error is None else
                           "The model did not import into Relax: there is nothing to compare",
                           "open a model first")
    parsed, texts = [], []
    for p in pipelines:
        if isinstance(p, str):
            parsed.append(parse_pipeline(p))
            texts.append(p.strip())
        else:
            invs = [PassInvocation(i.name, dict(i.params or {})) for i in p]
            parsed.append(invs)
            texts.append(pipeline_text(invs))
    steps, errors = [], []
    for k, invs in enumerate(parsed):
        if _reusable(ws, invs):
            steps.append(list(ws.session.steps))
            errors.append(None)
            continue
        st, err = _run_pipeline(ws, invs, progress, "AB"[k])
        steps.append(st)
        errors.append(err)
    aligned = align_steps([s.pass_name for s in steps[0]], [s.pass_name for s in steps[1]])
    return Comparison(texts=texts, steps=steps, errors=errors, aligned=aligned)


# ---------------------------------------------------------------------------------------------
# graph diff


def _relax_functions(mod) -> dict:
    return {gv.name_hint: f for gv, f in mod.functions.items() if isinstance(f, relax.Function)}


def _node_keys(mod, fname: str):
    """[(node id, fine key, coarse key)] of a Relax function's graph nodes, in binding order."""
    hashes = diff_mod.function_hashes(mod)
    g = relax_digraph(mod, fname)
    out = []
    for nid, d in sorted(g.nodes(data=True), key=lambda x: x[1].get("index", 0)):
        shape = d.get("shape")
        shape = repr(shape) if shape is not None else None
        callee = d.get("callee")
        kind = d.get("kind")
        who = d.get("var") if kind == "param" else None  # parameters are matched by name
        coarse = (kind, d.get("op"), callee, shape, d.get("dtype"), who)
        out.append((nid, coarse + (hashes.get(callee) if callee else None,), coarse))
    return out


def _match_function(mod_a, mod_b, fname: str) -> dict:
    ka, kb = _node_keys(mod_a, fname), _node_keys(mod_b, fname)
    only_a, only_b, changed, same = [], [], [], 0
    sm = difflib.SequenceMatcher(None, [k[1] for k in ka], [k[1] for k in kb], autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            same += i2 - i1
            continue
        # inside a gap: same op, callee name and type with another callee body -> changed
        left, right = ka[i1:i2], kb[j1:j2]
        pairs = _lcs_pairs([k[2] for k in left], [k[2] for k in right])
        pa, pb = {p[0] for p in pairs}, {p[1] for p in pairs}
        changed += [[left[x][0], right[y][0]] for x, y in pairs]
        only_a += [left[x][0] for x in range(len(left)) if x not in pa]
        only_b += [right[y][0] for y in range(len(right)) if y not in pb]
    return {"only_a": only_a, "only_b": only_b, "changed": changed, "same": same}


def graph_diff(mod_a, mod_b) -> dict:
    """Functions only in A / only in B / changed (by structural hash), and per Relax function on
    both sides its graph nodes only in A / only in B / changed (see the module docstring)."""
    ha, hb = diff_mod.function_hashes(mod_a), diff_mod.function_hashes(mod_b)
    names_a, names_b = diff_mod.function_names(mod_a), diff_mod.function_names(mod_b)
    functions = {
        "only_a": [n for n in names_a if n not in hb],
        "only_b": [n for n in names_b if n not in ha],
        "changed": [n for n in names_a if n in hb and ha[n] != hb[n]],
        "same": sum(1 for n in names_a if n in hb and ha[n] == hb[n]),
    }
    ra, rb = _relax_functions(mod_a), _relax_functions(mod_b)
    nodes = {}
    for name in names_a:
        if name in ra and name in rb and (name == "main" or ha[name] != hb[name]):
            nodes[name] = _match_function(mod_a, mod_b, name)
    return {"functions": functions, "nodes": nodes}


# ---------------------------------------------------------------------------------------------
# text diffs


def _text_diff(mod_a, mod_b) -> dict:
    return {"unified": diff_mod.unified_diff(mod_a, mod_b),
            "functions": [fd.to_dict() for fd in diff_mod.side_by_side(mod_a, mod_b)]}


def pair_diff(cmp: Comparison, a: int, b: int) -> dict:
    """The IR at A's step `a` against B's step `b`: {"a", "b", "unified", "functions", "graph"}."""
    sa, sb = cmp.step(0, a), cmp.step(1, b)
    out = {"a": sa.index, "b": sb.index, "pass_a": sa.pass_name, "pass_b": sb.pass_name}
    out.update(_text_diff(sa.mod, sb.mod))
    out["graph"] = graph_diff(sa.mod, sb.mod)
    return out


def _laid_out(mod, func: str, keep) -> dict:
    # the graph the diff matched (fused calls not expanded), without aliases and scalar constants
    # unless the diff names them: a one-sided node must not be hidden
    g, _hidden = without_bookkeeping(relax_digraph(mod, func), "relax", keep=keep)
    return layout.layout_graph(g, group_attr="group")


def pair_graphs(cmp: Comparison, a: int, b: int, func: str = "main") -> dict:
    """`func` at A's step `a` and at B's step `b`, each laid out as the Relax pane draws a graph,
    with the node diff: {"a", "b", "func", "graph_a", "graph_b", "only_a", "only_b", "changed":
    [[id in A, id in B]], "same"}."""
    sa, sb = cmp.step(0, a), cmp.step(1, b)
    missing = [w for w, st in (("A", sa), ("B", sb)) if func not in _relax_functions(st.mod)]
    if missing:
        raise RequestError(f"No Relax function {func!r} at the step of pipeline {' and '.join(missing)}",
                           "pick a row where both steps have it")
    nodes = _match_function(sa.mod, sb.mod, func)
    keep_a = nodes["only_a"] + [x for x, _ in nodes["changed"]]
    keep_b = nodes["only_b"] + [y for _, y in nodes["changed"]]
    return {"a": sa.index, "b": sb.index, "pass_a": sa.pass_name, "pass_b": sb.pass_name, "func": func,
            "graph_a": _laid_out(sa.mod, func, keep_a), "graph_b": _laid_out(sb.mod, func, keep_b),
            **nodes}


def _pass_effect(steps, index: int) -> dict:
    st, prev = steps[index], steps[index - 1]
    return {"step": index, "pass": st.pass_name, "params": dict(st.params or {}),
            **st.changes.to_dict(), "unified": diff_mod.unified_diff(prev.mod, st.mod)}


def _strip_hunk_headers(text: str) -> list[str]:
    # hunk line numbers differ whenever anything above moved: they would drown the real differences
    return [ln for ln in text.splitlines() if not ln.startswith("@@")]


def pass_diff(cmp: Comparison, a: int, b: int) -> dict:
    """Diff of diffs: what a pass did under A (step a-1 -> a) against what it did under B
    (b-1 -> b). {"a": effect, "b": effect, "same_effect", "unified": the diff of the two diffs,
    "functions": side-by-side rows of the two diffs (one pseudo-function "pass diff")}."""
    sa, sb = cmp.step(0, a), cmp.step(1, b)
    if sa.index == 0 or sb.index == 0:
        raise RequestError("step 0 is the import, not a pass: pick a row where both pipelines ran a pass")
    ea, eb = _pass_effect(cmp.steps[0], sa.index), _pass_effect(cmp.steps[1], sb.index)
    la, lb = _strip_hunk_headers(ea["unified"]), _strip_hunk_headers(eb["unified"])
    unified = "\n".join(difflib.unified_diff(la, lb, f"A/{sa.pass_name} (step {sa.index})",
                                             f"B/{sb.pass_name} (step {sb.index})", n=3, lineterm=""))
    rows, starts = diff_mod.function_rows(la, lb)
    functions = [] if la == lb else [{"name": f"{sa.pass_name}: A's diff → B's diff", "status": "changed",
                                      "rows": rows, "hunk_starts": starts}]
    return {"a": ea, "b": eb, "same_effect": la == lb,
            "unified": unified + "\n" if unified else "", "functions": functions}


# ---------------------------------------------------------------------------------------------
# measuring


def measure(ws, cmp: Comparison, repeats: int = 10, progress=None) -> list[dict]:
    """Build and run the last step of each pipeline: one row each {"pipeline", "steps", "tvm_ms",
    "max_abs_error", "kernels", "build_seconds", ...}; a failure is the row's "error"."""
    progress = progress or (lambda *_a, **_k: None)
    rows = []
    for k, steps in enumerate(cmp.steps):
        last = steps[-1]
        row = {"pipeline": cmp.texts[k], "steps": [s.pass_name for s in steps], "last_step": last.index,
               "tvm_ms": None, "torch_ms": None, "max_abs_error": None, "allclose": None,
               "kernels": None, "build_seconds": None,
               "error": cmp.errors[k].user_message() if cmp.errors[k] is not None else None}
        progress(f"Building the last step of pipeline {'AB'[k]} ({last.pass_name})", 0.1 + 0.4 * k)
        prim = prim_run.resolve_func(last.mod, "main") if ws.loaded is None else "main"
        try:
            if prim_run.is_prim_func(last.mod, prim):  # a PrimFunc-only module: its function alone
                built, res = ws._build_run_prim(last.mod, prim, repeats)
                row.update(build_seconds=round(built.seconds, 4), tvm_ms=res.tvm_ms,
                           max_abs_error=res.max_abs_error, allclose=res.allclose, kernels=1)
                rows.append(row)
                continue
            t = time.perf_counter()
            built = build_mod.build(last.mod, ws.build_target())
            row["build_seconds"] = round(getattr(built, "seconds", time.perf_counter() - t), 4)
            if ws.structure_only:  # compiled; nothing to run it with, and that is no failure
                row["structure_only"] = True
                rows.append(row)
                continue
            not_run = ws.not_run_reason()
            if not_run is not None:  # built for a target whose device is not here: no failure either
                row["not_run"] = f"built for {ws.target_name}; no such device here, not run ({not_run})"
                rows.append(row)
                continue
            progress(f"Running pipeline {'AB'[k]}", 0.3 + 0.4 * k)
            if ws.loaded is not None:
                res = run_mod.run_built(built, ws.loaded, repeats=repeats, params=ws.kept_params)
            else:
                res = ws._run_ir(built, ws._ir_inputs(last.mod, "main"), "main", repeats)
        except IrvizError as exc:
            row["error"] = (row["error"] + "; " if row["error"] else "") + exc.user_message()
            rows.append(row)
            continue
        row.update(tvm_ms=res.tvm_ms, torch_ms=res.torch_ms, max_abs_error=res.max_abs_error,
                   allclose=res.allclose, kernels=len(res.kernels))
        rows.append(row)
    cmp.rows = rows
    return rows


def comparison_dict(cmp: Comparison) -> dict:
    """What compare.json holds: {"pipelines": [row per pipeline], "aligned": [[i|null, j|null]]}."""
    rows = cmp.rows or [{"pipeline": t, "steps": [s.pass_name for s in st], "tvm_ms": None,
                         "max_abs_error": None, "kernels": None, "build_seconds": None,
                         "error": e.user_message() if e is not None else None}
                        for t, st, e in zip(cmp.texts, cmp.steps, cmp.errors)]
    changed = [[bool(s.changed) for s in st] for st in cmp.steps]
    return {"pipelines": [dict(r, changed=changed[k]) for k, r in enumerate(rows)],
            "aligned": [[i, j] for i, j in cmp.aligned]}
