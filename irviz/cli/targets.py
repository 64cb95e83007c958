"""`irviz targets`: the targets by name, as TVM target dicts, and whether this machine can build
for each."""
from __future__ import annotations

import argparse
import json

from irviz.cli.common import write_json

TARGETS_HELP = "list the targets by name, their TVM target dicts, and which this machine builds for"


def add_targets_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", metavar="PATH", help="write the list as JSON to PATH ('-' = stdout)")


def run_targets(args) -> int:
    from irviz.core.target import NAMED_TARGETS, target_unavailable

    rows = []
    for name, t in NAMED_TARGETS.items():
        spec = t.as_dict()
        rows.append({"name": name, "description": t.description, "target": spec,
                     "unavailable": target_unavailable(spec)})
    if args.json:
        write_json(args.json, {"targets": rows})
        if args.json == "-":
            return 0
    for r in rows:
        state = "yes" if r["unavailable"] is None else f"no: {r['unavailable']}"
        print(f"{r['name']:11} {json.dumps(r['target'])}\n{'':11} {r['description']}; builds here: {state}")
    return 0
