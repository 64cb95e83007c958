"""`irviz check`'s last capture fallback: when nothing captures the whole model, each graph that
torch.compile cuts it into at its graph breaks is imported, run through the pipeline, built and
compared with torch on its own (see irviz.core.frontend.graph_breaks)."""
from __future__ import annotations

import logging

from irviz.cli_common import finite

FALLBACK = "graph breaks as separate subgraphs"


def check_graph_breaks(args, failure, summary: dict, log) -> None:
    """After a capture failure: check the model graph by graph.  summary gets "graph_breaks" (one
    entry per graph), "capture" and "capture_notes"; the failure is cleared when every graph
    matches torch, else it names the first graph that did not and why.  When torch.compile cannot
    split the model either, the capture error gains that line and stays."""
    from irviz.core import passes
    from irviz.core.frontend.graph_breaks import split_at_graph_breaks
    from irviz.core.frontend.model_file import load_model
    from irviz.core.workspace import Workspace

    dynamo_log = logging.getLogger("torch._dynamo")
    level = dynamo_log.level
    dynamo_log.setLevel(logging.ERROR)  # its graph-break warnings are what this is about
    try:
        pieces = split_at_graph_breaks(load_model(args.model))
    except Exception as exc:
        why = exc.user_message() if hasattr(exc, "user_message") else f"{type(exc).__name__}: {exc}"
        failure.error = f"{failure.error}\n  {FALLBACK}: {why.splitlines()[0]}"
        return
    finally:
        dynamo_log.setLevel(level)
    tried = [ln.strip() for ln in (failure.error or "").splitlines()[1:] if ln.strip()[:1].isdigit()]
    note = (f"captured with {FALLBACK} ({len(pieces)} graphs; nothing captured the whole model: "
            f"{'; '.join(tried) or (failure.error or '').splitlines()[0]})")
    log(f"note     {note}")
    summary.update(capture="graph breaks", capture_notes=[note], graph_breaks=[])
    planned = passes.parse_pipeline(args.pipeline)
    first_bad = None
    for k, piece in enumerate(pieces, 1):
        entry = {"graph": k, "name": piece.name, "ok": False, "failed_stage": None, "error": None,
                 "fx_nodes": None, "max_abs_error": None, "allclose": None}
        ws = Workspace(log=lambda _text: None)
        try:
            ws.open_loaded(piece, args.importer or "exported_program", planned=planned)
            entry["fx_nodes"] = len(ws.captured.graph.nodes)
            _, res = ws.build_run(repeats=1, func=args.func)
        except Exception as exc:
            entry["failed_stage"] = getattr(exc, "stage", None) or ws.stage or "import"
            entry["error"] = (exc.user_message() if hasattr(exc, "user_message")
                              else f"{type(exc).__name__}: {exc}").splitlines()[0]
        else:
            entry.update(max_abs_error=finite(res.max_abs_error), allclose=res.allclose,
                         ok=bool(res.allclose))
            if not res.allclose:
                entry.update(failed_stage="compare", error=f"max abs error {res.max_abs_error:.3g}")
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
