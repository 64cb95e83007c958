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
import time
import traceback
import warnings

COMMANDS = ("check", "export", "samples", "passes", "pipelines", "snapshot", "gui")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="irviz", description="See what TVM does to a PyTorch model.")
    sub = p.add_subparsers(dest="command")

    g = sub.add_parser("gui", help="start the app (the default)")
    g.add_argument("model", nargs="?")

    def model_args(sp):
        sp.add_argument("model", help="FILE.py, FILE.py:FACTORY, FILE.pt2 or sample:NAME")
        sp.add_argument("--pipeline", default="zero", help="named pipeline (see `irviz pipelines`)")
        sp.add_argument("--importer", default="exported_program",
                        choices=["exported_program", "course"])
        sp.add_argument("--passes", metavar="FILE", action="append", default=[],
                        help="Python file with extra passes (IRVIZ_PASSES or @irviz_pass)")
        sp.add_argument("--converters", metavar="FILE",
                        help="Python file with CONVERTERS = {aten op: converter} for ops TVM cannot import")
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
    from irviz.core.passes.registry import list_passes

    for spec in list_passes():
        params = ", ".join(f"{p.name}={p.default!r}" for p in spec.params)
        print(f"{spec.name}\t[{spec.category}] {spec.description}" + (f" ({params})" if params else ""))
    return 0


def _cmd_pipelines(args) -> int:
    from irviz.core.passes.registry import PIPELINES

    for name, (description, invocations) in PIPELINES.items():
        print(f"{name}\t{description}: {' → '.join(i.name for i in invocations)}")
    return 0


class _Stage:
    """Runs the load → … → compare chain, remembering where it stopped and why."""

    def __init__(self, verbose: bool):
        self.verbose = verbose
        self.failed_stage: str | None = None
        self.error: str | None = None

    def fail(self, stage: str, exc: BaseException) -> None:
        from irviz.core.errors import IrvizError

        self.failed_stage = getattr(exc, "stage", None) if isinstance(exc, IrvizError) else None
        self.failed_stage = self.failed_stage or stage
        self.error = exc.user_message() if isinstance(exc, IrvizError) else f"{type(exc).__name__}: {exc}"
        print(f"irviz: {self.failed_stage} failed: {self.error}", file=sys.stderr)
        detail = getattr(exc, "detail", None) or "".join(traceback.format_exception(exc))
        if self.verbose:
            print(detail, file=sys.stderr)


def _open_session(args, stage: _Stage, log):
    """load → capture → import → Session with the pipeline planned. None when a stage failed."""
    from irviz.core.frontend import capture as capture_mod
    from irviz.core.frontend import importer as importer_mod
    from irviz.core.frontend import model_file
    from irviz.core.passes import registry as passes
    from irviz.core.session import Session

    try:
        for path in args.passes:
            for spec in passes.load_pass_file(path):
                log(f"loaded pass {spec.name} from {path}")
        pipeline = passes.get_pipeline(args.pipeline)
    except Exception as exc:  # an unknown pipeline is a usage error, but it stops before load
        stage.fail("pipeline", exc)
        return None, None
    t = time.perf_counter()
    try:
        loaded = model_file.load_model(args.model)
    except Exception as exc:
        stage.fail("load", exc)
        return None, None
    log(f"load     {time.perf_counter() - t:7.2f} s  {loaded.name}")
    try:
        captured = capture_mod.capture(loaded)
    except Exception as exc:
        stage.fail("capture", exc)
        return loaded, None
    log(f"capture  {captured.seconds:7.2f} s  {len(captured.graph.nodes)} FX nodes")
    try:
        convert_map = None
        if args.converters:
            from irviz.core.frontend.converters import load_converter_file

            convert_map = load_converter_file(args.converters)
        imported = importer_mod.import_model(captured, importer=args.importer,
                                             custom_convert_map=convert_map)
    except Exception as exc:
        stage.fail("import", exc)
        return loaded, None
    log(f"import   {imported.seconds:7.2f} s  ({imported.importer})")
    session = Session(imported, captured)
    session.set_pipeline(pipeline)
    return loaded, session


def _run_pipeline(session, stage: _Stage, log) -> bool:
    while session.pipeline_remaining():
        step = session.step_forward()
        if step is None:
            stage.fail("pipeline", session.error)
            return False
        log(f"  {step.index:2d} {step.pass_name:28} {step.seconds:7.3f} s  "
            f"{'changed' if step.changed else 'no change'}")
    return True


def _finite(x):
    return x if isinstance(x, (int, float)) and math.isfinite(x) else None


def _shapes(tensors) -> list:
    return [list(t.shape) for t in tensors if hasattr(t, "shape")]


def _check_alt_sizes(built, loaded, session, args, stage: _Stage, summary: dict, log) -> None:
    """A model file with get_alt_inputs(): run the same build on those sizes and compare with torch.
    Adds summary["alt_sizes"] = [{shapes, max_abs_error, allclose}]; a mismatch fails `compare`."""
    from irviz.core.backend import build as build_mod

    try:
        alt = build_mod.alt_inputs(loaded)
    except Exception as exc:  # noqa: BLE001
        stage.fail("run", exc)
        return
    if alt is None:
        return
    summary["alt_sizes"] = []
    kwargs = {}
    params = getattr(getattr(session, "imported", None), "params", None)
    if params:
        kwargs["params"] = params
    try:
        res = build_mod.run_and_compare(built, loaded, repeats=max(1, min(args.repeats, 3)),
                                        inputs=alt, **kwargs)
    except Exception as exc:
        stage.fail("run", exc)
        return
    shapes = _shapes(alt)
    summary["alt_sizes"].append({"shapes": shapes, "max_abs_error": _finite(res.max_abs_error),
                                 "allclose": res.allclose})
    log(f"run      other sizes {shapes}: max abs error {res.max_abs_error:.3g}"
        f"{'' if res.allclose else '  DIFFERS'}")
    if not res.allclose:
        stage.failed_stage = "compare"
        stage.error = (f"outputs differ from PyTorch on the other input sizes {shapes}: "
                       f"max abs error {res.max_abs_error:.3g}")
        print(f"irviz: compare failed: {stage.error}", file=sys.stderr)


def _cmd_check(args) -> int:
    quiet = args.json == "-"
    log = (lambda msg: print(msg, file=sys.stderr)) if quiet else print
    stage = _Stage(args.verbose)
    summary = {"ok": False, "failed_stage": None, "error": None, "model": args.model,
               "pipeline": args.pipeline, "importer": args.importer, "steps": [],
               "max_abs_error": None, "max_rel_error": None, "allclose": None,
               "tvm_ms": None, "torch_ms": None, "threads": None, "build_seconds": None}
    loaded, session = _open_session(args, stage, log)
    if session is not None and _run_pipeline(session, stage, log):
        from irviz.core.backend import build as build_mod

        try:
            built = build_mod.build(session.module())
            summary["build_seconds"] = round(built.seconds, 4)
            log(f"build    {built.seconds:7.2f} s  ({built.target})")
        except Exception as exc:
            stage.fail("build", exc)
            built = None
        if built is not None:
            try:
                res = build_mod.run_and_compare(built, loaded, repeats=args.repeats)
                summary.update(max_abs_error=_finite(res.max_abs_error),
                               max_rel_error=_finite(res.max_rel_error), allclose=res.allclose,
                               tvm_ms=round(res.tvm_ms, 4), torch_ms=round(res.torch_ms, 4),
                               threads=res.threads)
                log(f"run      tvm {res.tvm_ms:.3f} ms  torch {res.torch_ms:.3f} ms  "
                    f"({res.threads} threads)  max abs error {res.max_abs_error:.3g}")
                if not res.allclose:
                    stage.failed_stage = "compare"
                    stage.error = (f"outputs differ from PyTorch: max abs error {res.max_abs_error:.3g}, "
                                   f"max rel error {res.max_rel_error:.3g}")
                    print(f"irviz: compare failed: {stage.error}", file=sys.stderr)
            except Exception as exc:
                stage.fail("run", exc)
            if stage.failed_stage is None:
                _check_alt_sizes(built, loaded, session, args, stage, summary, log)
    if session is not None:
        summary["steps"] = [{"pass": s.pass_name, "changed": s.changed, "seconds": round(s.seconds, 6)}
                            for s in session.steps[1:]]
    summary["failed_stage"] = stage.failed_stage
    summary["error"] = stage.error
    summary["ok"] = stage.failed_stage is None
    if args.json:
        text = json.dumps(summary, indent=2)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w") as f:
                f.write(text + "\n")
    if not quiet:
        print("OK" if summary["ok"] else f"FAILED at {summary['failed_stage']}")
    return 0 if summary["ok"] else 1


def _cmd_export(args) -> int:
    stage = _Stage(args.verbose)
    loaded, session = _open_session(args, stage, print)
    if session is None:
        return 1
    pipeline_ok = _run_pipeline(session, stage, print)
    run_results = None
    if pipeline_ok and not args.no_build:
        from irviz.core.backend import build as build_mod

        try:
            built = build_mod.build(session.module())
            run_results = build_mod.run_and_compare(built, loaded)
        except Exception as exc:  # the trace is still worth exporting; the report says why
            stage.fail("build", exc)
    latency = None
    if args.latency:
        from irviz.core.backend.latency import latency_trace

        latency = latency_trace(session, loaded, repeats=args.repeats,
                                progress=lambda text, f: print(text) if f < 1 else None)
        for e in latency:
            what = (f"tvm {e['tvm_ms']:.3f} ms  torch {e['torch_ms']:.3f} ms"
                    if e["ok"] and e.get("torch_ms") is not None else
                    f"tvm {e['tvm_ms']:.3f} ms" if e["ok"] else f"not built: {e['error']}")
            print(f"  {e['step']:2d} {e['pass']:28} {what}")
    from irviz.core.export.trace import export_trace

    try:
        out = export_trace(session, args.out, run_result=run_results, latency=latency)
    except Exception as exc:
        stage.fail("export", exc)
        return 1
    print(f"wrote {out}")
    return 0 if stage.failed_stage is None else 1


if __name__ == "__main__":
    raise SystemExit(main())
