"""`irviz query MODEL PATTERN`: a pattern of calls (conv2d -> add -> relu) counted in the Relax
graph at every step (the work is in core.views.query)."""
from __future__ import annotations

import argparse

from irviz.cli.common import Failure, add_model_arguments, log_for, open_workspace, write_json

QUERY_HELP = "count a pattern (conv2d -> add -> relu, linear0 -> env.relu) in the Relax graph at every step"


def add_query_arguments(p: argparse.ArgumentParser) -> None:
    add_model_arguments(p)
    p.add_argument("pattern", help="op, function or extern function names (globs too) joined by '->', "
                                   "'*' for any call, constraints in parentheses: "
                                   "'matmul(dtype=float32) -> * -> softmax', 'conv2d(shape=[1,64,56,56]) -> add', "
                                   "'linear0 -> env.relu', 'fused_* -> fused_*'")
    p.add_argument("--json", metavar="PATH", help="write the matches per step as JSON to PATH ('-' = stdout)")


def run_query(args) -> int:
    from irviz.core.views import graph_query as query

    failure = Failure(args.verbose)
    log = log_for(args)
    try:  # a malformed pattern is a usage error: say where before paying for the model
        query.parse(args.pattern)
    except Exception as exc:
        failure.record("query", exc)
        return 2
    ws = open_workspace(args, failure, log)
    if ws is None or ws.session is None:
        return 1
    try:
        found = query.query_steps(ws.session.steps, args.pattern)
    except Exception as exc:
        failure.record("query", exc)
        return 2
    for row in found["steps"]:
        shown = "; ".join(" -> ".join(b) for b in row["bindings"][:3])
        more = f" (+{row['matches'] - 3} more)" if row["matches"] > 3 else ""
        log(f"  {row['index']:2d} {row['pass']:28} {row['matches']:4d}  {shown}{more}")
    write_json(args.json, found)
    return 1 if failure.stage is not None else 0
