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

from irviz import cli_bisect, cli_check, cli_code, cli_compare, cli_tune, snapshot
from irviz.cli_common import Subcommand
from irviz.core.frontend.samples import list_samples


def _add_gui_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", nargs="?", help="a model to open (as `irviz check` takes it)")
    p.add_argument("--pipeline", default="zero",
                   help="the pipeline planned for MODEL: a named pipeline or a pipeline text (default zero)")
    p.add_argument("--no-weights", action="store_true",
                   help="open MODEL structure only (as `irviz check --no-weights`)")


def _run_gui(args) -> int:
    # Qt is imported only here, so the headless commands never pay for it
    from irviz.ui.app import run_app

    return run_app(args.model, pipeline=args.pipeline, no_weights=getattr(args, "no_weights", False))


def _no_arguments(p: argparse.ArgumentParser) -> None:
    pass


def _run_samples(args) -> int:
    for name, description in list_samples():
        print(f"{name}\t{description}")
    return 0


def _add_passes_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--passes", metavar="FILE", action="append", default=[],
                   help="also list the passes of this pass file (as check --passes loads them)")


def _run_passes(args) -> int:
    from irviz.cli_common import load_pass_files
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


def _run_pipelines(args) -> int:
    from irviz.core.passes import PIPELINES  # loads TVM: only for this command

    for name, (description, invocations) in PIPELINES.items():
        print(f"{name}\t{description}: {' → '.join(i.name for i in invocations)}")
    return 0


COMMANDS: dict[str, Subcommand] = {
    "gui": Subcommand("start the app (the default: `irviz [MODEL]`)", _add_gui_arguments, _run_gui,
                      quiet_warnings=False),
    "check": Subcommand(cli_check.CHECK_HELP, cli_check.add_check_arguments, cli_check.run_check),
    "export": Subcommand(cli_check.EXPORT_HELP, cli_check.add_export_arguments, cli_check.run_export),
    "compare": Subcommand(cli_compare.COMPARE_HELP, cli_compare.add_compare_arguments,
                          cli_compare.run_compare),
    "query": Subcommand(cli_compare.QUERY_HELP, cli_compare.add_query_arguments, cli_compare.run_query),
    "bisect": Subcommand(cli_bisect.BISECT_HELP, cli_bisect.add_bisect_arguments, cli_bisect.run_bisect),
    "code": Subcommand(cli_code.CODE_HELP, cli_code.add_code_arguments, cli_code.run_code),
    "targets": Subcommand(cli_code.TARGETS_HELP, cli_code.add_targets_arguments, cli_code.run_targets),
    "tune": Subcommand(cli_tune.TUNE_HELP, cli_tune.add_tune_arguments, cli_tune.run_tune),
    "samples": Subcommand("list sample models (use as sample:NAME)", _no_arguments, _run_samples),
    "passes": Subcommand("list passes (built-in, and a pass file's with --passes FILE)",
                         _add_passes_arguments, _run_passes),
    "pipelines": Subcommand("list named pipelines", _no_arguments, _run_pipelines),
    "snapshot": Subcommand(snapshot.HELP, snapshot.add_arguments, snapshot.run, quiet_warnings=False),
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
