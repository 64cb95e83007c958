"""`irviz gui [MODEL]` (and `irviz MODEL`): the app, Qt imported only here so that the headless
commands never pay for it."""
from __future__ import annotations

import argparse

HELP = "start the app (the default: `irviz [MODEL]`)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", nargs="?", help="a model to open (as `irviz check` takes it)")
    p.add_argument("--pipeline", default="zero",
                   help="the pipeline planned for MODEL: a named pipeline or a pipeline text (default zero)")
    p.add_argument("--no-weights", action="store_true",
                   help="open MODEL structure only (as `irviz check --no-weights`)")


def run(args) -> int:
    # Qt is imported only here, so the headless commands never pay for it
    from irviz.ui.app import run_app

    return run_app(args.model, pipeline=args.pipeline, no_weights=getattr(args, "no_weights", False))
