"""What the `irviz` subcommands share: the model options, opening a workspace stage by stage, the
record of the stage that failed, and `--json` output.

Every command's module (check, export, compare, ...) imports this and irviz.core only;
commands.py imports them all and holds the table of subcommands.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import traceback
from typing import NamedTuple
from collections.abc import Callable

from irviz.core.errors import IrvizError
from irviz.core.frontend.ir_file import parse_dims
from irviz.core.workspace import Workspace

# irviz.core modules that load torch or TVM (passes, memory, query, ...) or numpy are imported inside
# the functions: `irviz` (the app) and `irviz samples` import this module and must start without
# paying seconds for them.


class Subcommand(NamedTuple):
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    # torch.export's deprecation chatter would bury the one line a headless command prints
    quiet_warnings: bool = True


def add_model_arguments(sp: argparse.ArgumentParser, pipelines: int = 1) -> None:
    """MODEL and the options that say how to open it and which pipeline to apply (`pipelines` > 1:
    --pipeline given that many times)."""
    sp.add_argument("model", help="FILE.py (a model or an IRModule), FILE.py:NAME, FILE.pt2 or sample:NAME")
    sp.add_argument("--pipeline", default="zero" if pipelines == 1 else None,
                    action="append" if pipelines > 1 else "store",
                    help="a named pipeline (see `irviz pipelines`) or a pipeline text: passes "
                         "separated by commas, parameters in parentheses, e.g. "
                         "'LegalizeOps,LibraryDispatch(min_macs=0),FuseOps,FuseTIR'")
    sp.add_argument("--importer", default=None, choices=["exported_program", "course"],
                    help="exported_program (TVM's importer; the default for --capture export) or "
                         "course (the course's importer; the default for --capture symbolic_trace)")
    sp.add_argument("--capture", default=None, choices=["export", "symbolic_trace"],
                    help="export (torch.export, the default) or symbolic_trace (torch.fx, as the "
                         "course's from_fx; shows call_module nodes)")
    sp.add_argument("--importer-map", metavar="FILE", action="append", default=[],
                    help="course importer maps: a Python file with call_function_map = {fn: "
                         "f(bb, node_map, node)} and/or call_module_map = {nn.Module class: "
                         "f(bb, node_map, node, nn_mod)}; implies --capture symbolic_trace")
    sp.add_argument("--passes", metavar="FILE", action="append", default=[],
                    help="Python file with extra passes: module_pass / function_pass / dataflowblock_pass "
                         "classes, Sequentials, @irviz_pass functions, IRVIZ_PASSES (or sample:NAME); "
                         "a name a built-in has is the file's, the built-in is then builtin:NAME")
    sp.add_argument("--converters", metavar="FILE",
                    help="Python file with CONVERTERS = {aten op: converter} for ops TVM cannot import")
    sp.add_argument("--dim", metavar="NAME=INT,...", default="",
                    help="values for symbolic sizes when an IR file's inputs are made up (m=1,n=128)")
    sp.add_argument("--func", default="main", metavar="NAME",
                    help="the function to build and run: an IR file's other Relax functions (e.g. "
                         "main_two_blocks) or a PrimFunc, run alone (e.g. mm); default main, or the "
                         "first PrimFunc of a module without Relax functions")
    sp.add_argument("--keep-params", action="store_true",
                    help="import with the weights as parameters of main (main(x, p_linear0_weight, "
                         "...)), written to a .npz that BindParams binds in a step of its own")
    sp.add_argument("--no-weights", action="store_true",
                    help="structure only: get_model() runs under torch.device('meta'), so no weight "
                         "is allocated (an 8B model opens in little memory); main takes the weights "
                         "as parameters with no data; passes, diffs, queries, memory and build work, "
                         "runs do not (a model built on the meta device is opened so anyway)")
    sp.add_argument("--no-cache", action="store_true",
                    help="measure the CPU decisions (library or TensorIR, conv2d tiles) again instead "
                         "of reading them from the cache; the new figures are cached")
    sp.add_argument("--verbose", action="store_true", help="print tracebacks of failures")


class Failure:
    """Where the load → … → compare chain stopped, and why (None while nothing failed)."""

    def __init__(self, verbose: bool):
        self.verbose = verbose
        self.stage: str | None = None
        self.error: str | None = None
        # stages a fallback may still rescue: their failure is printed by `report`, once settled
        self.held: set[str] = set()

    def record(self, stage: str, exc: BaseException) -> None:
        # an IrvizError knows its stage; anything else failed in the stage that was running
        self.stage = (exc.stage if isinstance(exc, IrvizError) else None) or stage
        self.error = exc.user_message() if isinstance(exc, IrvizError) else f"{type(exc).__name__}: {exc}"
        if self.stage not in self.held:
            self.report()
        if self.verbose:
            print(getattr(exc, "detail", None) or "".join(traceback.format_exception(exc)),
                  file=sys.stderr)

    def report(self) -> None:
        if self.stage is not None:
            print(f"irviz: {self.stage} failed: {self.error}", file=sys.stderr)

    def mismatch(self, error: str) -> None:
        self.stage, self.error = "compare", error
        print(f"irviz: compare failed: {error}", file=sys.stderr)


def load_pass_files(paths, log) -> None:
    """Every --passes file, before any pipeline text is read: the texts may name their passes."""
    from irviz.core import passes

    for path in paths:
        for spec in passes.load_pass_file(path):
            shadowed = passes.find_pass(passes.BUILTIN_PREFIX + spec.name)
            log(f"loaded pass {spec.name} from {spec.source or path}"
                + (f" (the built-in {shadowed.category} pass is now {shadowed.name})" if shadowed else ""))


def open_workspace(args, failure: Failure, log, other_pipelines=()):
    """Pass files → load → capture → import → every pass applied, one step each. The Workspace,
    or None when a stage failed before there was a session. `other_pipelines` (compare's B) are
    only parsed, with the pass files loaded, so that a bad one stops before the model loads."""
    from irviz.core import passes

    ws = Workspace(log=log)
    if getattr(args, "no_cache", False):
        from irviz.core.tuning.decision_cache import set_cache_enabled

        set_cache_enabled(False)
    try:
        ws.dims = parse_dims(args.dim)
        load_pass_files(args.passes, log)
        for other in other_pipelines:
            passes.parse_pipeline(other)
        if args.converters:
            ws.stage = "import"
            ws.add_converter_file(args.converters)
        if getattr(args, "out", None) and args.keep_params:
            ws.params_dir = args.out  # the weights go with the exported steps
        # the pipeline and the target are planned (and a bad one refused) before anything loads
        ws.open(args.model, args.importer, planned=args.pipeline, target=getattr(args, "target", None),
                capture=args.capture, importer_maps=args.importer_map, keep_params=args.keep_params,
                no_weights=getattr(args, "no_weights", False))
    except Exception as exc:
        failure.record(ws.stage or "load", exc)
        return None
    if ws.session.schedule_error is not None:  # the steps before the failing primitive stay
        failure.record("pipeline", ws.session.schedule_error)
        return ws
    try:
        ws.run_to_end()
    except Exception as exc:
        failure.record("pipeline", exc)
    return ws


def add_target_argument(sp: argparse.ArgumentParser, default: str | None = None,
                        help_more: str = "") -> None:
    sp.add_argument("--target", default=default, metavar="T",
                    help="a target as `irviz targets` lists it (host, x86-avx2, aarch64, cuda "
                         "-arch=sm_86, ...) or a TVM target as JSON; the passes run under it (the "
                         "CPU schedules need a CPU target, the gpu pipeline a GPU one)" + help_more)


def add_peer_freezing_argument(sp: argparse.ArgumentParser) -> None:
    # a flag of its own, not a second peer name: freezing is an Inductor option (its config's name),
    # the compiler stays "inductor" in the JSON, and further options would not multiply the names
    sp.add_argument("--peer-freezing", action="store_true",
                    help="with --peer inductor: compile with Inductor's freezing=True (the weights "
                         "constants, folded and prepacked for mkldnn), as torch.compile for inference "
                         "is usually run")


def peer_arguments_ok(args) -> bool:
    """--peer-freezing without --peer is an error that says so (exit 2), not a silent no-op."""
    if getattr(args, "peer_freezing", False) and not getattr(args, "peer", None):
        print("irviz: --peer-freezing is an option of the peer compiler: add --peer inductor", file=sys.stderr)
        return False
    return True


def finite(x):
    return x if isinstance(x, (int, float)) and math.isfinite(x) else None


def log_for(args):
    """With `--json -` stdout carries only the JSON, so the log goes to stderr."""
    return (lambda msg: print(msg, file=sys.stderr)) if getattr(args, "json", None) == "-" else print


def with_json_stdout(args, run: Callable) -> int:
    """`run(out)` with `out` the real stdout; with `--json -`, whatever else is printed (the opened
    file's own prints included) goes to stderr with the log."""
    if getattr(args, "json", None) == "-":
        real_stdout = sys.stdout
        with contextlib.redirect_stdout(sys.stderr):
            return run(real_stdout)
    return run(sys.stdout)


def write_json(path: str | None, data: dict, out=None) -> None:
    """`--json PATH`: the summary to PATH, or to `out` (stdout) for '-'; nothing without one."""
    if not path:
        return
    text = json.dumps(data, indent=2)
    if path == "-":
        print(text, file=out or sys.stdout)
    else:
        with open(path, "w") as f:
            f.write(text + "\n")
