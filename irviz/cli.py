"""`irviz` command line: the app, and the headless checks scripts and CI use.

    irviz [MODEL]                          start the app (on MODEL)
    irviz check MODEL [--pipeline NAME] [--json PATH|-]
    irviz export MODEL --pipeline NAME --out DIR [--latency]
    irviz samples | passes | pipelines
    irviz snapshot MODEL --steps N --out FILE.png

Imports are local to each command: the GUI path must not load torch or TVM, and `irviz samples`
should answer without paying for them either.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import traceback
import warnings

COMMANDS = ("check", "export", "samples", "passes", "pipelines", "snapshot", "gui")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="irviz", description="See what TVM does to a PyTorch model.")
    sub = p.add_subparsers(dest="command")

    g = sub.add_parser("gui", help="start the app (the default)")
    g.add_argument("model", nargs="?")

    def model_args(sp):
        sp.add_argument("model", help="FILE.py (a model or an IRModule), FILE.py:NAME, FILE.pt2 or sample:NAME")
        sp.add_argument("--pipeline", default="zero", help="named pipeline (see `irviz pipelines`)")
        sp.add_argument("--importer", default="exported_program",
                        choices=["exported_program", "course"])
        sp.add_argument("--passes", metavar="FILE", action="append", default=[],
                        help="Python file with extra passes (IRVIZ_PASSES or @irviz_pass)")
        sp.add_argument("--converters", metavar="FILE",
                        help="Python file with CONVERTERS = {aten op: converter} for ops TVM cannot import")
        sp.add_argument("--dim", metavar="NAME=INT,...", default="",
                        help="values for symbolic sizes when an IR file's inputs are made up (m=1,n=128)")
        sp.add_argument("--verbose", action="store_true", help="print tracebacks of failures")

    c = sub.add_parser("check", help="load, import, run a pipeline pass by pass, build, run, compare")
    model_args(c)
    c.add_argument("--json", metavar="PATH", help="write a JSON summary to PATH ('-' = stdout)")
    c.add_argument("--repeats", type=int, default=10, help="timed runs for the medians")

    e = sub.add_parser("export", help="write step scripts, parameters, diffs, steps.json, report.html")
    model_args(e)
    e.add_argument("--out", required=True, metavar="DIR")
    e.add_argument("--no-build", action="store_true", help="skip build+run in the report")
    e.add_argument("--latency", action="store_true",
                   help="build and time every step; report.html gets a latency-per-step chart")
    e.add_argument("--repeats", type=int, default=10, help="timed runs per step for --latency")

    sub.add_parser("samples", help="list sample models (use as sample:NAME)")
    sub.add_parser("passes", help="list passes")
    sub.add_parser("pipelines", help="list named pipelines")

    # listed for --help; `main` hands its arguments to irviz.snapshot before parsing
    sub.add_parser("snapshot", help="render the main window after N steps to a PNG "
                                    "(irviz snapshot MODEL --steps N --out FILE.png; --help for more)")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0] not in COMMANDS and argv[0] not in ("-h", "--help")):
        argv = ["gui", *argv]
    if argv[0] == "snapshot":  # irviz.snapshot owns its options (--theme, --select, --build-run, ...)
        from irviz.snapshot import main as snapshot_main

        return snapshot_main(argv[1:])
    args = _parser().parse_args(argv)
    if args.command != "gui":
        # torch.export's deprecation chatter would bury the one line a user needs.
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\..*")
    handler = {
        "gui": _cmd_gui, "check": _cmd_check, "export": _cmd_export, "samples": _cmd_samples,
        "passes": _cmd_passes, "pipelines": _cmd_pipelines,
    }[args.command]
    return handler(args)


def _cmd_gui(args) -> int:
    from irviz.ui.app import run_app

    return run_app(args.model)


def _cmd_samples(args) -> int:
    from irviz.core.frontend.samples import list_samples

    for name, description in list_samples():
        print(f"{name}\t{description}")
    return 0


def _cmd_passes(args) -> int:
    from irviz.core.passes import list_passes

    for spec in list_passes():
        params = ", ".join(f"{p.name}={p.default!r}" for p in spec.params)
        print(f"{spec.name}\t[{spec.category}] {spec.description}" + (f" ({params})" if params else ""))
    return 0


def _cmd_pipelines(args) -> int:
    from irviz.core.passes import PIPELINES

    for name, (description, invocations) in PIPELINES.items():
        print(f"{name}\t{description}: {' → '.join(i.name for i in invocations)}")
    return 0


class _Failure:
    """Where the load → … → compare chain stopped, and why (None while nothing failed)."""

    def __init__(self, verbose: bool):
        self.verbose = verbose
        self.stage: str | None = None
        self.error: str | None = None

    def record(self, stage: str, exc: BaseException) -> None:
        from irviz.core.errors import IrvizError

        # an IrvizError knows its stage; anything else failed in the stage that was running
        self.stage = (exc.stage if isinstance(exc, IrvizError) else None) or stage
        self.error = exc.user_message() if isinstance(exc, IrvizError) else f"{type(exc).__name__}: {exc}"
        print(f"irviz: {self.stage} failed: {self.error}", file=sys.stderr)
        if self.verbose:
            print(getattr(exc, "detail", None) or "".join(traceback.format_exception(exc)),
                  file=sys.stderr)

    def mismatch(self, error: str) -> None:
        self.stage, self.error = "compare", error
        print(f"irviz: compare failed: {error}", file=sys.stderr)


def _open_workspace(args, failure: _Failure, log):
    """Pass files → load → capture → import → every pass applied, one step each. The Workspace,
    or None when a stage failed before there was a session."""
    from irviz.core import passes
    from irviz.core.workspace import Workspace

    ws = Workspace(log=log)
    try:
        from irviz.core.frontend.ir_file import parse_dims

        ws.dims = parse_dims(args.dim)
        for path in args.passes:
            for spec in passes.load_pass_file(path):
                log(f"loaded pass {spec.name} from {path}")
        pipeline = passes.get_pipeline(args.pipeline)
    except Exception as exc:  # an unknown pipeline is a usage error: stop before loading anything
        failure.record("pipeline", exc)
        return None
    try:
        if args.converters:
            ws.stage = "import"
            ws.add_converter_file(args.converters)
        ws.open(args.model, args.importer, planned=pipeline)
    except Exception as exc:
        failure.record(ws.stage or "load", exc)
        return None
    try:
        ws.run_to_end()
    except Exception as exc:
        failure.record("pipeline", exc)
    return ws


def _finite(x):
    return x if isinstance(x, (int, float)) and math.isfinite(x) else None


def _check_alt_sizes(ws, args, failure: _Failure, summary: dict, log) -> None:
    """A model file with get_alt_inputs(): run the same model on those sizes and compare with
    torch. Adds summary["alt_sizes"] = [{shapes, max_abs_error, allclose}]; a mismatch fails
    `compare`."""
    alt = ws.loaded.alt_inputs if ws.loaded is not None else None
    if alt is None:
        return
    summary["alt_sizes"] = []
    try:
        _, res = ws.build_run(repeats=max(1, min(args.repeats, 3)), inputs=alt)
    except Exception as exc:
        failure.record(ws.stage, exc)
        return
    shapes = [list(t.shape) for t in alt if hasattr(t, "shape")]
    summary["alt_sizes"].append({"shapes": shapes, "max_abs_error": _finite(res.max_abs_error),
                                 "allclose": res.allclose})
    log(f"run      other sizes {shapes}: max abs error {res.max_abs_error:.3g}"
        f"{'' if res.allclose else '  DIFFERS'}")
    if not res.allclose:
        failure.mismatch(f"outputs differ from PyTorch on the other input sizes {shapes}: "
                         f"max abs error {res.max_abs_error:.3g}")


def _cmd_check(args) -> int:
    quiet = args.json == "-"
    log = (lambda msg: print(msg, file=sys.stderr)) if quiet else print
    failure = _Failure(args.verbose)
    summary = {"ok": False, "failed_stage": None, "error": None, "model": args.model,
               "pipeline": args.pipeline, "importer": args.importer, "steps": [],
               "max_abs_error": None, "max_rel_error": None, "allclose": None,
               "tvm_ms": None, "torch_ms": None, "threads": None, "build_seconds": None,
               "reference": None, "verdict": None, "not_comparable": None}
    ws = _open_workspace(args, failure, log)
    if ws is not None and failure.stage is None:
        try:
            built, res = ws.build_run(repeats=args.repeats)
        except Exception as exc:
            failure.record(ws.stage, exc)
        else:
            summary.update(build_seconds=round(built.seconds, 4),
                           max_abs_error=_finite(res.max_abs_error),
                           max_rel_error=_finite(res.max_rel_error), allclose=res.allclose,
                           tvm_ms=round(res.tvm_ms, 4), torch_ms=_finite(round(res.torch_ms, 4)),
                           threads=res.threads)
            # "torch" rather than "PyTorch": the JSON's values are short identifiers
            summary["reference"] = {"PyTorch": "torch", None: "none"}.get(ws.reference_name, ws.reference_name)
            if res.allclose is None:
                log(f"run      tvm {res.tvm_ms:.3f} ms  ({res.threads} threads)  "
                    "no reference to compare with")
            else:
                log(f"run      tvm {res.tvm_ms:.3f} ms  torch {res.torch_ms:.3f} ms  "
                    f"({res.threads} threads)  max abs error {res.max_abs_error:.3g}")
            summary.update(verdict=res.verdict, not_comparable=res.not_comparable)
            if res.allclose is False and res.not_comparable:
                # differs by nature (random op, order-dependent writes): not a compiler bug, no pass
                failure.mismatch(f"not comparable: {res.not_comparable} (outputs differ from "
                                 f"{ws.reference_name}: max abs error {res.max_abs_error:.3g})")
            elif res.allclose is False:
                failure.mismatch(f"outputs differ from {ws.reference_name}: max abs error {res.max_abs_error:.3g}, "
                                 f"max rel error {res.max_rel_error:.3g}")
            else:
                _check_alt_sizes(ws, args, failure, summary, log)
    if ws is not None:
        summary["steps"] = [{"pass": s.pass_name, "changed": s.changed, "seconds": round(s.seconds, 6)}
                            for s in ws.session.steps[1:]]
    summary.update(failed_stage=failure.stage, error=failure.error, ok=failure.stage is None)
    if args.json:
        text = json.dumps(summary, indent=2)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w") as f:
                f.write(text + "\n")
    if not quiet:
        print("OK" if summary["ok"] else f"NOT COMPARABLE: {summary['not_comparable']}"
              if summary.get("verdict") == "not comparable" and failure.stage == "compare"
              else f"FAILED at {summary['failed_stage']}")
    return 0 if summary["ok"] else 1


def _cmd_export(args) -> int:
    failure = _Failure(args.verbose)
    ws = _open_workspace(args, failure, print)
    if ws is None:
        return 1
    if failure.stage is None and not args.no_build:
        try:
            ws.build_run()
        except Exception as exc:  # the trace is still worth exporting; the report says why
            failure.record("build", exc)
    if args.latency:
        ws.progress = lambda text, fraction=None, **_: print(text) if fraction < 1 else None
        trace = ws.latency_trace(repeats=args.repeats)
        ws.progress = lambda *_, **__: None
        for e in trace:
            what = (f"tvm {e['tvm_ms']:.3f} ms  torch {e['torch_ms']:.3f} ms"
                    if e["ok"] and e.get("torch_ms") is not None else
                    f"tvm {e['tvm_ms']:.3f} ms" if e["ok"] else f"not built: {e['error']}")
            print(f"  {e['step']:2d} {e['pass']:28} {what}")
    try:
        out = ws.export(args.out)
    except Exception as exc:
        failure.record("export", exc)
        return 1
    print(f"wrote {out}")
    return 0 if failure.stage is None else 1


if __name__ == "__main__":
    raise SystemExit(main())
