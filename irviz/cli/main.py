"""`irviz` command line: the app, and the headless checks scripts and CI use.

`COMMANDS` below is the one table of subcommands: `irviz --help` lists it, the parser is built from
it, and a first word that is neither one of them nor a model (an existing file, FILE.py:NAME,
sample:NAME) is an error, never a model name.
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings

from irviz.cli import (
    bisect,
    check,
    code,
    compare,
    corpus,
    export,
    generate,
    gui,
    passes,
    pipelines,
    query,
    samples,
    snapshot,
    targets,
    tune,
)
from irviz.cli.common import Subcommand


COMMANDS: dict[str, Subcommand] = {
    "gui": Subcommand(gui.HELP, gui.add_arguments, gui.run, quiet_warnings=False),
    "check": Subcommand(check.CHECK_HELP, check.add_check_arguments, check.run_check),
    "export": Subcommand(export.EXPORT_HELP, export.add_export_arguments, export.run_export),
    "compare": Subcommand(compare.COMPARE_HELP, compare.add_compare_arguments, compare.run_compare),
    "query": Subcommand(query.QUERY_HELP, query.add_query_arguments, query.run_query),
    "bisect": Subcommand(bisect.BISECT_HELP, bisect.add_bisect_arguments, bisect.run_bisect),
    "code": Subcommand(code.CODE_HELP, code.add_code_arguments, code.run_code),
    "targets": Subcommand(targets.TARGETS_HELP, targets.add_targets_arguments, targets.run_targets),
    "tune": Subcommand(tune.TUNE_HELP, tune.add_tune_arguments, tune.run_tune),
    "samples": Subcommand(samples.HELP, samples.add_arguments, samples.run),
    "passes": Subcommand(passes.HELP, passes.add_arguments, passes.run),
    "pipelines": Subcommand(pipelines.HELP, pipelines.add_arguments, pipelines.run),
    "snapshot": Subcommand(snapshot.HELP, snapshot.add_arguments, snapshot.run, quiet_warnings=False),
    "generate": Subcommand(generate.HELP, generate.add_arguments, generate.run),
    "corpus": Subcommand(corpus.HELP, corpus.add_arguments, corpus.run),
}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="irviz", description="See what TVM does to a PyTorch model.",
                                epilog="`irviz MODEL` is `irviz gui MODEL`; `irviz COMMAND --help` "
                                       "says more about a command.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name, command in COMMANDS.items():
        command.add_arguments(sub.add_parser(name, help=command.help, description=command.help))
    return p


def is_model_spec(word: str) -> bool:
    """What `irviz WORD` may open in the app: an existing file, FILE:NAME of one, or sample:NAME."""
    if word.startswith("sample:") or os.path.exists(word):
        return True
    head, sep, _ = word.rpartition(":")
    return bool(sep and head and os.path.isfile(head))


def unknown_command(word: str) -> int:
    print(f"irviz: {word!r} is not a command, an existing model file or sample:NAME\n"
          f"commands: {', '.join(COMMANDS)} (irviz --help says more)", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        argv = ["gui"]
    elif argv[0] not in COMMANDS and argv[0] not in ("-h", "--help"):
        if not argv[0].startswith("-") and not is_model_spec(argv[0]):
            return unknown_command(argv[0])
        argv = ["gui", *argv]
    args = parser().parse_args(argv)
    command = COMMANDS[args.command]
    if command.quiet_warnings:
        # torch.export's deprecation chatter would bury the one line a user needs.
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\..*")
    return command.run(args)


if __name__ == "__main__":
    raise SystemExit(main())
