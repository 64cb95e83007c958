"""`irviz check`'s and `irviz export`'s last capture fallback: when nothing captures the whole
model, each graph that torch.compile cuts it into at its graph breaks is checked on its own
(core.workspace.each_graph does the work; this prints it and writes the export's folders)."""
from __future__ import annotations

from irviz.cli.common import finite


def check_graph_breaks(args, failure, summary: dict, log) -> None:
    """After a capture failure: check the model graph by graph.  summary gets "graph_breaks" (one
    entry per graph), "capture" and "capture_notes"; the failure is cleared when every graph
    matches torch, else it names the first graph that did not and why.  When torch.compile cannot
    split the model either, the capture error gains that line and stays."""
    from irviz.core.frontend.break_capture import used_note, with_tried_line
    from irviz.core.workspace.each_graph import check_graph, split_model

    try:
        pieces = split_model(args.model)
    except Exception as exc:
        head, sep, hint = (failure.error or "").partition("\n  hint: ")
        failure.error = with_tried_line(head, exc) + sep + hint
        return
    note = used_note(failure.error or "", len(pieces))
    log(f"note     {note}")
    summary.update(capture="graph breaks", capture_notes=[note], graph_breaks=[])
    first_bad = None
    for k, piece in enumerate(pieces, 1):
        g = check_graph(k, piece, args.pipeline, args.importer, func=args.func)
        entry = {"graph": k, "name": g.name, "ok": g.ok, "failed_stage": g.failed_stage, "error": g.error,
                 "fx_nodes": g.fx_nodes, "steps": g.steps, "max_abs_error": finite(g.max_abs_error),
                 "allclose": g.allclose}
        summary["graph_breaks"].append(entry)
        nodes = f"{entry['fx_nodes']} FX nodes, " if entry["fx_nodes"] is not None else ""
        log(f"graph    {k} of {len(pieces)}: {nodes}"
            + (f"max abs error {entry['max_abs_error']:.3g}" if entry["ok"]
               else f"FAILED at {entry['failed_stage']}: {entry['error']}"))
        if not entry["ok"] and first_bad is None:
            first_bad = entry
    if first_bad is None:
        failure.stage = failure.error = None
        summary.update(verdict=f"matches in {len(pieces)} graphs",
                       allclose=True,
                       max_abs_error=max((e["max_abs_error"] or 0.0) for e in summary["graph_breaks"]))
    else:
        failure.stage = first_bad["failed_stage"]
        failure.error = f"graph {first_bad['graph']} of {len(pieces)} (graph breaks): {first_bad['error']}"


def export_graph_breaks(args, failure) -> int:
    """`irviz export` after a capture failure: every graph of the model's graph breaks opened on
    its own, its passes applied, built and run against eager torch on that graph's inputs (unless
    --no-build), and written to OUT/graph_K/ as a whole model's export is; OUT/graphs.json lists
    the graphs and how the model was captured.  The Python code between the graphs is in none of
    them.  When torch.compile cannot split the model either, one error lists every try."""
    import json
    import os

    from irviz.core.frontend.break_capture import FALLBACK, ops_of, used_note, with_tried_line
    from irviz.core.workspace.each_graph import check_graph, split_model

    try:
        pieces = split_model(args.model)
    except Exception as exc:
        head, sep, hint = (failure.error or "").partition("\n  hint: ")
        failure.error = with_tried_line(head, exc) + sep + hint
        failure.report()
        return 1
    note = used_note(failure.error or "", len(pieces))
    print(f"note     {note}")
    print(f"export   one folder per graph ({len(pieces)} graphs); the Python code between them is "
          "not compiled and is in none of them")
    if args.target or args.latency:
        print("note     --target and --latency are for a whole model: each graph is built for the host, "
              "without a latency trace")
    entries, bad = [], 0
    for k, piece in enumerate(pieces, 1):
        folder = f"graph_{k:02d}"
        g = check_graph(k, piece, args.pipeline, args.importer, func=args.func, build=not args.no_build)
        entry = {"graph": k, "name": g.name, "folder": folder, "ops": ops_of(piece),
                 "inputs": [list(t.shape) for t in piece.example_inputs], "steps": g.steps,
                 "max_abs_error": finite(g.max_abs_error), "allclose": g.allclose,
                 "error": None if g.failed_stage == "compare" else g.error}
        if g.ws.session is not None:
            g.ws.export(os.path.join(args.out, folder))
        bad += entry["error"] is not None or entry["allclose"] is False
        what = (f"FAILED: {entry['error']}" if entry["error"] else
                f"{entry['steps']} steps" + (f", max abs error {entry['max_abs_error']:.3g} against torch"
                                            if entry["max_abs_error"] is not None else ""))
        print(f"graph    {k} of {len(pieces)}: {folder}/  {what}")
        entries.append(entry)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "graphs.json"), "w") as f:
        json.dump({"model": args.model, "capture": "graph breaks", "fallback": FALLBACK, "note": note,
                   "graphs": entries}, f, indent=1)
    print(f"wrote {args.out} ({len(pieces)} graphs: graph_01 .. graph_{len(pieces):02d}, graphs.json)")
    return 1 if bad else 0
