"""`irviz tune`: MetaSchedule on a model's slowest kernels, headless, locally or on the boards of a
TVM RPC tracker (``core.tuning.meta_schedule``)."""
from __future__ import annotations

import argparse
import signal
import sys
import time

from irviz.cli.common import Failure, add_model_arguments, add_target_argument, open_workspace

TUNE_HELP = "tune a model's slowest kernels with TVM's MetaSchedule (locally or through an RPC tracker)"


def add_tune_arguments(p: argparse.ArgumentParser) -> None:
    add_model_arguments(p)
    p.add_argument("--trials", type=int, default=8, help="candidates measured per kernel (default 8)")
    p.add_argument("--kernels", default="", help="comma-separated kernels to tune (default: the --top slowest)")
    p.add_argument("--top", type=int, default=2, help="how many kernels, by measured time share (default 2)")
    p.add_argument("--db", default=None, metavar="DIR",
                   help="MetaSchedule database directory (default: the decision cache's, per target)")
    p.add_argument("--rpc", default=None, metavar="HOST:PORT",
                   help="measure on the devices of this TVM RPC tracker (builds stay on this machine)")
    p.add_argument("--key", default=None, help="with --rpc: the devices' key (rpc_server --key)")
    add_target_argument(p)


def _bar(done: int, total: int, width: int = 20) -> str:
    n = int(width * done / max(1, total))
    return "[" + "#" * n + "." * (width - n) + "]"


def run_tune(args) -> int:
    failure = Failure(args.verbose)
    if args.trials < 1:
        print(f"irviz: tune failed: --trials must be at least 1, got {args.trials}", file=sys.stderr)
        return 2
    if bool(args.rpc) != bool(args.key):
        print("irviz: tune failed: --rpc and --key go together", file=sys.stderr)
        return 2
    from irviz.core.errors import IrvizError
    from irviz.core.tuning import meta_schedule as ms_tuning
    from irviz.core.tuning.meta_schedule_space import unscheduled_sources

    try:
        ms_tuning.check_requirements()
        runner = "local"
        if args.rpc:
            runner, free = ms_tuning.rpc_runner(args.rpc, args.key)
            print(f"tracker  {args.rpc}: key {args.key!r}, {free} free device(s)")
    except IrvizError as exc:
        failure.record("tune", exc)
        return 1
    ws = open_workspace(args, failure, print)
    if ws is None or failure.stage is not None:
        return 1
    target = ms_tuning.tuning_target(ws.session.target if not args.target else _target(args.target))
    db = args.db or str(ms_tuning.default_db_dir(target))
    mod = ws.session.current.mod
    from irviz.core.views.decisions import pipeline_decisions, provisional_summary

    decided = provisional_summary(pipeline_decisions(ws.session.steps[1:]))
    if decided:  # the pipeline's own CPU decisions, which MetaSchedule's "before" is built with
        print(f"decide   {decided}")
    sources, authored = unscheduled_sources(ws.session)
    t0 = time.perf_counter()

    def progress(text, fraction):
        print(f"tune     {_bar(round(100 * (fraction or 0)), 100)} {text}", flush=True)

    print(f"database {db}")
    interrupted = []

    def on_sigint(signum, frame):
        # no KeyboardInterrupt here: raised inside TVM's C++ it can end in std::terminate; the search
        # stops itself after the batch it is measuring, and a second Ctrl-C stops at once
        if interrupted:
            raise KeyboardInterrupt
        interrupted.append(True)
        ms_tuning.STOP.set()

    old_handler = signal.signal(signal.SIGINT, on_sigint)
    try:
        _, reports = ms_tuning.tune_module(mod, target, db, args.trials,
                                           kernels=[k for k in args.kernels.split(",") if k.strip()],
                                           top=args.top, runner=runner, progress=progress,
                                           sources=sources, authored=authored)
    except (Exception, KeyboardInterrupt) as exc:  # a board that died mid-run, Ctrl-C: the database stays
        if interrupted or isinstance(exc, KeyboardInterrupt):
            print(f"irviz: tune interrupted after {time.perf_counter() - t0:.0f} s; what was measured is "
                  f"in {db} (a rerun with the same --db continues from it)", file=sys.stderr)
            return 130
        failure.record("tune", exc)
        print(f"the database at {db} keeps what was measured", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGINT, old_handler)
        ms_tuning.STOP.clear()
    from irviz.core.tuning import meta_schedule_space as ms_space

    print(f"{'kernel':32} {'before ms':>10} {'after ms':>10} {'best in db':>10}  measured  result")
    for rep in reports:
        verdict = "MetaSchedule's" if rep.get("applied") else ms_space.short_kept(rep.get("owner", ""))
        print(f"{rep['kernel']:32} {_ms(rep.get('before_ms')):>10} {_ms(rep.get('after_ms')):>10} "
              f"{_ms(rep.get('db_ms')):>10}  {rep.get('measured_now', 0):>8}  {verdict}")
    for rep in reports:
        if rep.get("searched_from"):
            print(f"{rep['kernel']}: searched from {rep['searched_from']} ({rep['owner']} is the 'before')")
        if not rep.get("applied"):
            print(f"{rep['kernel']}: {ms_space.outcome(rep)}")
    print(f"chosen by {reports[0]['why'] if reports else 'nothing to tune: the module has no TensorIR kernel'}; "
          f"database {db}")
    return 0


def _ms(x) -> str:
    return "-" if x is None else f"{x:.4f}"


def _target(text):
    from irviz.core.target import Target

    return Target.of(text).tvm
