"""`irviz` command line: the app, and the headless checks scripts and CI use.

    irviz [MODEL]                          start the app (on MODEL)
    irviz check MODEL [--pipeline NAME|TEXT] [--keep-params] [--json PATH|-] [--intermediates]
    irviz export MODEL --pipeline NAME|TEXT --out DIR [--keep-params] [--latency]
    irviz compare MODEL --pipeline A --pipeline B --out DIR
    irviz query MODEL --pipeline NAME|TEXT "PATTERN" [--json PATH|-]
    irviz bisect MODEL --pipeline NAME|TEXT [--atol A --rtol R] [--out DIR] [--json PATH|-]
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

COMMANDS = ("check", "export", "bisect", "compare", "query", "samples", "passes", "pipelines",
            "snapshot", "gui")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="irviz", description="See what TVM does to a PyTorch model.")
    sub = p.add_subparsers(dest="command")

    g = sub.add_parser("gui", help="start the app (the default)")
    g.add_argument("model", nargs="?")

    def model_args(sp, pipelines: int = 1):
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
                        help="Python file with extra passes (IRVIZ_PASSES or @irviz_pass)")
        sp.add_argument("--converters", metavar="FILE",
                        help="Python file with CONVERTERS = {aten op: converter} for ops TVM cannot import")
        sp.add_argument("--dim", metavar="NAME=INT,...", default="",
                        help="values for symbolic sizes when an IR file's inputs are made up (m=1,n=128)")
        sp.add_argument("--func", default="main", metavar="NAME",
                        help="the Relax function to build and run (an IR file's other functions, e.g. "
                             "main_two_blocks); default main")
        sp.add_argument("--keep-params", action="store_true",
                        help="import with the weights as parameters of main (main(x, p_linear0_weight, "
                             "...)), written to a .npz that BindParams binds in a step of its own")
        sp.add_argument("--no-cache", action="store_true",
                        help="measure the CPU decisions (library or TensorIR, conv2d tiles) again instead "
                             "of reading them from the cache; the new figures are cached")
        sp.add_argument("--verbose", action="store_true", help="print tracebacks of failures")

    c = sub.add_parser("check", help="load, import, run a pipeline pass by pass, build, run, compare")
    model_args(c)
    c.add_argument("--json", metavar="PATH", help="write a JSON summary to PATH ('-' = stdout)")
    c.add_argument("--repeats", type=int, default=10, help="timed runs for the medians")
    c.add_argument("--intermediates", action="store_true",
                   help="compare every FX node with its Relax binding at the last step; print the "
                        "first divergence and the worst nodes")
    c.add_argument("--atol", type=float, default=None,
                   help="with --intermediates: one absolute tolerance for every node (default: per dtype)")
    c.add_argument("--rtol", type=float, default=None,
                   help="with --intermediates: one relative tolerance for every node (default: per dtype)")

    e = sub.add_parser("export", help="write step scripts, parameters, diffs, steps.json, report.html")
    model_args(e)
    e.add_argument("--out", required=True, metavar="DIR")
    e.add_argument("--no-build", action="store_true", help="skip build+run in the report")
    e.add_argument("--latency", action="store_true",
                   help="build and time every step; report.html gets a latency-per-step chart")
    e.add_argument("--repeats", type=int, default=10, help="timed runs per step for --latency")

    cm = sub.add_parser("compare", help="run two pipelines on the same model, steps aligned by pass name; "
                                        "write compare.html and compare.json")
    model_args(cm, pipelines=2)
    cm.add_argument("--out", required=True, metavar="DIR")
    cm.add_argument("--no-build", action="store_true", help="skip building and running the last steps")
    cm.add_argument("--repeats", type=int, default=10, help="timed runs of each pipeline's last step")
    q = sub.add_parser("query", help="count a pattern (conv2d -> add -> relu) in the Relax graph at every step")
    model_args(q)
    q.add_argument("pattern", help="op names joined by '->', '*' for any op, constraints in parentheses: "
                                   "'matmul(dtype=float32) -> * -> softmax', 'conv2d(shape=[1,64,56,56]) -> add'")
    q.add_argument("--json", metavar="PATH", help="write the matches per step as JSON to PATH ('-' = stdout)")
    b = sub.add_parser("bisect", help="find the first pass whose build gives wrong numbers, or fails "
                                      "to build or run; exit 0: every step matches, 1: found one")
    model_args(b)
    b.add_argument("--atol", type=float, default=None,
                   help="absolute tolerance (default: 1e-4 x max(1, max |expected|) per output)")
    b.add_argument("--rtol", type=float, default=None, help="relative tolerance (default 1e-4)")
    b.add_argument("--out", metavar="DIR", help="write the repro folder of the bad pass here")
    b.add_argument("--json", metavar="PATH", help="write the result as JSON to PATH ('-' = stdout)")

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
        "gui": _cmd_gui, "check": _cmd_check, "export": _cmd_export, "compare": _cmd_compare,
        "query": _cmd_query,
        "samples": _cmd_samples,
        "bisect": _cmd_bisect,
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
    if getattr(args, "no_cache", False):
        from irviz.core.tuning.decision_cache import set_cache_enabled

        set_cache_enabled(False)
    try:
        from irviz.core.frontend.ir_file import parse_dims

        ws.dims = parse_dims(args.dim)
        for path in args.passes:
            for spec in passes.load_pass_file(path):
                log(f"loaded pass {spec.name} from {path}")
        pipeline = passes.parse_pipeline(args.pipeline)
    except Exception as exc:  # an unknown pipeline is a usage error: stop before loading anything
        failure.record("pipeline", exc)
        return None
    try:
        if args.converters:
            ws.stage = "import"
            ws.add_converter_file(args.converters)
        if getattr(args, "out", None) and args.keep_params:
            ws.params_dir = args.out  # the weights go with the exported steps
        ws.open(args.model, args.importer, planned=pipeline, capture=args.capture,
                importer_maps=args.importer_map, keep_params=args.keep_params)
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
    if args.json == "-":
        # stdout carries only the JSON: what the opened file prints (an IR file that prints its
        # module, say) goes to stderr with the log
        import contextlib

        real_stdout = sys.stdout
        with contextlib.redirect_stdout(sys.stderr):
            return _check(args, real_stdout)
    return _check(args, sys.stdout)


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


def _cpu_fields() -> dict:
    from irviz.core.target import cpu_info

    return cpu_info().as_dict()


def _timing_fields(res) -> dict:
    """How each figure was taken: median, min, quartiles, runs, load average, threads."""
    out = {"tvm": dict(res.tvm_timing or {}, threads=res.threads)}
    if res.torch_timing:
        out["torch"] = dict(res.torch_timing, threads=res.torch_threads)
    return out


def _memory_fields(built, func: str):
    """StaticPlanBlockMemory's figures for the module the build lowered (None if unreadable)."""
    from irviz.core.backend.memory import memory_plan

    try:
        return memory_plan(built.lowered, func).summary()
    except Exception:  # noqa: BLE001 - the figures are extra; a check does not fail over them
        return None


def _decisions(ws, log) -> list[dict]:
    """The measured CPU decisions of the pipeline (each once), logged as the kernel table shows them."""
    from irviz.core.views.decisions import decisions_of, describe_decision, describe_tile

    seen, out = set(), []
    for st in ws.session.steps[1:]:
        if st.pass_name not in ("LibraryDispatch", "CPUTuneConv2d", "CPUTuneReductions"):
            continue
        for d in decisions_of(st.mod):
            key = (d["kind"], d.get("kernel"), d["workload"])
            if key in seen:
                continue
            seen.add(key)
            out.append(d)
            if d["kind"] in ("library_or_tir", "whole_model"):
                log(f"decide   {d['workload']}: {describe_decision(d)}")
            elif d.get("choice"):
                log(f"tile     {d['kernel']}: {describe_tile(d)}")
    return out


def _check(args, out) -> int:
    quiet = args.json == "-"
    log = (lambda msg: print(msg, file=sys.stderr)) if quiet else print
    failure = _Failure(args.verbose)
    summary = {"ok": False, "failed_stage": None, "error": None, "model": args.model,
               "pipeline": args.pipeline, "importer": args.importer, "steps": [],
               "max_abs_error": None, "max_rel_error": None, "allclose": None,
               "tvm_ms": None, "torch_ms": None, "threads": None, "build_seconds": None,
               "reference": None, "func": args.func, "verdict": None, "not_comparable": None}
    ws = _open_workspace(args, failure, log)
    if ws is not None and failure.stage is None:
        try:
            built, res = ws.build_run(repeats=args.repeats, func=args.func)
        except Exception as exc:
            failure.record(ws.stage, exc)
        else:
            summary.update(build_seconds=round(built.seconds, 4),
                           max_abs_error=_finite(res.max_abs_error),
                           max_rel_error=_finite(res.max_rel_error), allclose=res.allclose,
                           tvm_ms=round(res.tvm_ms, 4), torch_ms=_finite(round(res.torch_ms, 4)),
                           threads=res.threads, timing=_timing_fields(res))
            summary["memory"] = _memory_fields(built, args.func)
            # "torch" rather than "PyTorch": the JSON's values are short identifiers
            summary["reference"] = {"PyTorch": "torch", None: "none"}.get(ws.reference_name, ws.reference_name)
            if res.allclose is None:
                log(f"run      tvm {res.tvm_ms:.3f} ms  ({res.threads} threads)  "
                    "no reference to compare with")
            else:
                torch_part = f"torch {res.torch_ms:.3f} ms  " if _finite(res.torch_ms) is not None else ""
                log(f"run      tvm {res.tvm_ms:.3f} ms  {torch_part}"
                    f"({res.threads} threads)  max abs error {res.max_abs_error:.3g} "
                    f"against {ws.reference_name}")
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
    if getattr(args, "intermediates", False) and ws is not None and ws.session is not None:
        _check_intermediates(ws, args, failure, summary, log)
    if ws is not None and ws.session is not None:
        from irviz.core.passes import pipeline_text

        summary["pipeline_text"] = pipeline_text(ws.session.full_pipeline())
        summary["params_file"] = ws.params_file
    if ws is not None:
        summary["importer"] = ws.importer
        summary["capture"] = ws.capture
    if ws is not None and ws.session is not None:
        summary["steps"] = [{"pass": s.pass_name, "changed": s.changed, "seconds": round(s.seconds, 6)}
                            for s in ws.session.steps[1:]]
        summary["decisions"] = _decisions(ws, log)
    if ws is not None:
        summary["stage_seconds"] = {k: round(v, 4) for k, v in ws.stage_seconds.items()}
    summary["cpu"] = _cpu_fields()
    summary.update(failed_stage=failure.stage, error=failure.error, ok=failure.stage is None)
    if args.json:
        text = json.dumps(summary, indent=2)
        if args.json == "-":
            print(text, file=out)
        else:
            with open(args.json, "w") as f:
                f.write(text + "\n")
    if not quiet:
        print("OK" if summary["ok"] else f"NOT COMPARABLE: {summary['not_comparable']}"
              if summary.get("verdict") == "not comparable" and failure.stage == "compare"
              else f"FAILED at {summary['failed_stage']}")
    return 0 if summary["ok"] else 1


def _check_intermediates(ws, args, failure: _Failure, summary: dict, log) -> None:
    """--intermediates: summary["intermediates"] (one entry per compared FX node) and
    summary["first_divergence"]; a divergence fails `compare` (when nothing failed before)."""
    try:
        res = ws.compare_intermediates(rtol=args.rtol, atol=args.atol)
    except Exception as exc:
        if failure.stage is None:
            failure.record(ws.stage or "run", exc)
        return
    summary["intermediates"] = [
        {"fx_node": n.fx_node, "relax_var": n.relax_var, "max_abs": _finite(n.max_abs),
         "max_rel": _finite(n.max_rel), "status": n.status, "reason": n.reason}
        for n in res.nodes]
    summary["first_divergence"] = res.first_divergence
    matched = [n for n in res.nodes if n.status != "unmatched"]
    log(f"nodes    {len(matched)} of {len(res.nodes)} FX nodes compared at step {res.step} "
        f"({res.pass_name}), {sum(res.seconds.values()):.2f} s")
    if res.first_divergence is None:
        log("nodes    every compared node is within tolerance")
    else:
        n = next(x for x in res.nodes if x.fx_node == res.first_divergence)
        log(f"first divergence: {n.fx_node} (relax {n.relax_var}): {n.reason}")
    log(f"  {'fx node':32} {'relax var':12} {'max abs':>10} {'max rel':>10}  status")
    for n in res.worst(10):
        log(f"  {n.fx_node[:32]:32} {str(n.relax_var)[:12]:12} {n.max_abs:10.3g} {n.max_rel:10.3g}  {n.status}")
    if res.first_divergence is not None and failure.stage is None:
        failure.mismatch(f"intermediates diverge from torch first at {res.first_divergence}")


def _cmd_export(args) -> int:
    failure = _Failure(args.verbose)
    ws = _open_workspace(args, failure, print)
    if ws is None:
        return 1
    if failure.stage is None and not args.no_build:
        try:
            ws.build_run(func=args.func)
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


def _cmd_compare(args) -> int:
    from irviz.cli_compare import run_compare

    return run_compare(args)


def _cmd_query(args) -> int:
    from irviz.cli_compare import run_query

    return run_query(args)


def _cmd_bisect(args) -> int:
    from irviz.cli_bisect import run_bisect

    if args.json == "-":  # stdout carries only the JSON
        import contextlib

        real_stdout = sys.stdout
        with contextlib.redirect_stdout(sys.stderr):
            return run_bisect(args, real_stdout, _open_workspace, _Failure)
    return run_bisect(args, sys.stdout, _open_workspace, _Failure)


if __name__ == "__main__":
    raise SystemExit(main())
