"""`irviz bisect`: the first pass whose build gives wrong numbers, or fails to build or run.

Exit 0 when every step matches the reference, 1 when a bad step was found (or the model could not
be checked at all), 2 on a usage error (an unknown pipeline or pass, a model that does not open).
"""
from __future__ import annotations

import argparse

from irviz.cli.common import Failure, add_model_arguments, add_target_argument, log_for, open_workspace, \
    with_json_stdout, write_json

# irviz.core modules that load torch, TVM or numpy are imported inside the functions (see common).

BISECT_HELP = ("find the first pass whose build gives wrong numbers, or fails to build or run; "
               "exit 0: every step matches, 1: found one")


def add_bisect_arguments(p: argparse.ArgumentParser) -> None:
    add_model_arguments(p)
    p.add_argument("--atol", type=float, default=None,
                   help="absolute tolerance (default: 1e-4 x max(1, max |expected|) per output)")
    p.add_argument("--rtol", type=float, default=None, help="relative tolerance (default 1e-4)")
    p.add_argument("--out", metavar="DIR", help="write the repro folder of the bad pass here")
    p.add_argument("--json", metavar="PATH", help="write the result as JSON to PATH ('-' = stdout)")
    add_target_argument(p, help_more="; each checked step is built for T and run, so T must run here")


def run_bisect(args) -> int:
    return with_json_stdout(args, lambda out: _bisect(args, out))


def _bisect(args, out) -> int:
    log = log_for(args)
    failure = Failure(args.verbose)
    summary = {"first_bad": None, "steps_checked": [], "repro": None, "model": args.model,
               "pipeline": args.pipeline, "error": None}
    ws = open_workspace(args, failure, log)
    if ws is None or ws.session is None:
        summary["error"] = failure.error
        _write(args, summary, out)
        return 2
    from irviz.core.backend.step_bisect import bisect, reference_for

    def progress(text, fraction=None, pass_name=None):
        if text.startswith("Bisect:"):
            log(text)

    try:
        ref = reference_for(ws, args.func)
        result = bisect(ws.session, ref, atol=args.atol, rtol=args.rtol, progress=progress,
                        func=args.func, target=ws.runnable_target("bisect"))
    except Exception as exc:  # no reference to compare with: nothing was bisected
        failure.record("run", exc)
        summary["error"] = failure.error
        _write(args, summary, out)
        return 1
    summary.update(result.as_dict())
    for c in result.checked:
        what = (f"ok, max abs error {c.max_abs_error:.3g}" if c.ok and c.max_abs_error is not None
                else "ok" if c.ok else f"BAD ({c.stage}): {c.reason.splitlines()[0][:200]}")
        log(f"  step {c.index:2d} {c.pass_name:28} {c.seconds:6.2f} s  {what}")
    fb = result.first_bad
    if fb is None:
        log(f"every step matches {result.reference} (checked {len(result.checked)} of "
            f"{len(result.candidates)} steps that changed the module, {result.seconds:.1f} s)")
    else:
        log(f"first bad step: {fb.index} {fb.pass_name} ({fb.stage}): {fb.reason.splitlines()[0]}")
        if args.out and fb.stage != "pass":
            from irviz.core.export.repro import repro_for_step

            try:
                path = repro_for_step(ws, args.out, fb.index, verdict=fb, atol=args.atol,
                                      rtol=args.rtol, ref=ref)
            except Exception as exc:  # the finding stands without its repro
                failure.record("export", exc)
            else:
                summary["repro"] = str(path)
                log(f"repro folder: {path} (python {path}/repro.py)")
        elif args.out:
            from irviz.core.export.repro import repro_for_crash

            s = ws.session
            s.jump(len(s.steps) - 1)
            path = repro_for_crash(ws, args.out, fb.pass_name, None, stage="pass", reason=fb.reason)
            summary["repro"] = str(path)
            log(f"repro folder: {path} (python {path}/repro.py)")
    _write(args, summary, out)
    return 0 if fb is None else 1


def _write(args, summary: dict, out) -> None:
    write_json(args.json, summary, out)
