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
    p.add_argument("--generate", action="store_true",
                   help="open MODEL, a causal LM, for generation: its prefill and decode programs over a "
                        "static KV cache (as `irviz generate` takes it), to step both and Generate tokens")
    p.add_argument("--tokens", type=int, default=16, metavar="N",
                   help="with --generate: the tokens to generate (default 16)")


def run(args) -> int:
    # Qt is imported only here, so the headless commands never pay for it
    from irviz.ui.app import run_app

    return run_app(args.model, pipeline=args.pipeline, no_weights=getattr(args, "no_weights", False),
                   generate=getattr(args, "generate", False), tokens=getattr(args, "tokens", 16))
