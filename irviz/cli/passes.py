"""`irviz passes`: the passes, built-in and a pass file's, with their parameters."""
from __future__ import annotations

import argparse
import sys

HELP = "list passes (built-in, and a pass file's with --passes FILE)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--passes", metavar="FILE", action="append", default=[],
                   help="also list the passes of this pass file (as check --passes loads them)")


def run(args) -> int:
    from irviz.cli.common import load_pass_files
    from irviz.core.errors import IrvizError
    from irviz.core.passes import list_passes  # loads TVM: only for this command

    try:
        load_pass_files(args.passes, lambda _msg: None)
    except IrvizError as exc:
        print(f"irviz: pipeline failed: {exc.user_message()}", file=sys.stderr)
        return 2
    for spec in list_passes():
        params = ", ".join(f"{p.name}={p.default!r}" for p in spec.params)
        origin = f"user: {spec.source}" if spec.category == "user" else spec.category
        print(f"{spec.name}\t[{origin}] {spec.description}" + (f" ({params})" if params else ""))
    return 0
