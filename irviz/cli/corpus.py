"""`irviz corpus`: `irviz check` for every model × pipeline × target, each row a Ray task running
the check in a process of its own (a crash, a hang or a runaway allocation costs its row), rows
streamed into --json as they finish; a rerun with the same --json runs only the rows it lacks."""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

HELP = ("check many models × pipelines × targets as Ray tasks (local workers or a cluster), each in "
        "its own process with a timeout and a memory cap; a results JSON that a rerun resumes")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="model files (FILE.py, FILE.py:NAME, FILE.pt2, sample:NAME) or folders (their "
                        "*.py files not starting with _)")
    p.add_argument("--pipeline", action="append", metavar="P",
                   help="a pipeline each model is checked with (repeat for several; default: check's)")
    p.add_argument("--target", action="append", metavar="T",
                   help="a target each model is checked for (repeat for several; default: check's, the host)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, metavar="N",
                   help="checks at a time on the local Ray instance (default: the CPU count)")
    p.add_argument("--address", metavar="ADDR",
                   help="run on this Ray cluster (e.g. auto, ray://head:10001) instead of a local "
                        "instance; every node needs irviz and the model files at the same paths")
    p.add_argument("--timeout", type=float, default=900, metavar="S",
                   help="seconds a check may take before it is killed (default 900)")
    p.add_argument("--memory-gb", type=float, default=None, metavar="G",
                   help="resident memory a check may hold before it is killed (default: this "
                        "machine's memory divided by --workers; none with --address)")
    p.add_argument("--repeats", type=int, default=1, help="check's timed runs per row (default 1)")
    p.add_argument("--check-arg", action="append", default=[], metavar="ARG",
                   help="one more argument for every check, e.g. --check-arg=--no-weights")
    p.add_argument("--json", required=True, metavar="F",
                   help="the results file: rewritten after each row; rows it holds are not run again")
    p.add_argument("--html", metavar="F", help="also write the rows as a sortable HTML table")
    p.add_argument("--logs", metavar="DIR", help="keep each check's stdout and stderr in DIR")


def expand_models(files: list[str]) -> list[str]:
    """Each FILE as given, a folder as its model files; an argument that names nothing is an error."""
    out = []
    for f in files:
        head, sep, name = f.rpartition(":")
        if f.startswith("sample:") or os.path.isfile(f) or (sep and head and name and os.path.isfile(head)):
            out.append(f)
        elif os.path.isdir(f):
            found = sorted(str(p) for p in Path(f).glob("*.py") if not p.name.startswith("_"))
            if not found:
                raise ValueError(f"{f}: a folder without model files (*.py)")
            out.extend(found)
        else:
            raise ValueError(f"{f}: no such model file (FILE.py, FILE.py:NAME, FILE.pt2, sample:NAME or a folder)")
    return out


def default_pipeline() -> str:
    from irviz.cli.common import add_model_arguments

    p = argparse.ArgumentParser()
    add_model_arguments(p)  # check's model options, its default pipeline among them
    return p.get_default("pipeline")


def memory_cap(args) -> int | None:
    if args.memory_gb is not None:
        return int(args.memory_gb * 2**30) if args.memory_gb > 0 else None
    if args.address:  # the nodes' memory is not this machine's
        return None
    try:
        import psutil

        total = psutil.virtual_memory().total
    except ImportError:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return total // max(1, args.workers)


def jobs_for(models: list[str], pipelines: list[str], targets: list[str | None]) -> list[dict]:
    return [{"model": m, "pipeline": p, "target": t} for m in models for p in pipelines for t in targets]


def options(args) -> dict:
    return {"timeout": args.timeout, "memory_bytes": memory_cap(args), "repeats": args.repeats,
            "check_args": list(args.check_arg), "cwd": os.getcwd(),
            "log_dir": os.path.abspath(args.logs) if args.logs else None}


def progress(t0: float):
    def on_row(row: dict, k: int, n: int) -> None:
        where = f" at {row['stage']}" if row.get("stage") else ""
        why = f": {str(row['error']).splitlines()[0][:160]}" if row.get("error") else ""
        target = f" {row['target']}" if row.get("target") else ""
        print(f"[{k}/{n} {time.monotonic() - t0:.0f} s] {row['model']} {row['pipeline']}{target}: "
              f"{row['result']}{where}{why} ({row.get('seconds') or 0:.1f} s, {row.get('rss_mb') or 0:.0f} MB)",
              flush=True)
    return on_row


def run(args) -> int:
    from irviz.core.corpus.html_table import write_html
    from irviz.core.corpus.pool import ClusterUnreachable, RayMissing, run_jobs
    from irviz.core.corpus.store import CorpusError, Store

    if args.workers < 1 or args.timeout <= 0 or args.repeats < 1:
        print("irviz corpus: --workers, --timeout and --repeats must be positive", file=sys.stderr)
        return 2
    try:
        models = expand_models(args.files)
        store = Store(args.json)
    except (ValueError, CorpusError) as e:
        print(f"irviz corpus: {e}", file=sys.stderr)
        return 2
    opts = options(args)
    jobs = jobs_for(models, args.pipeline or [default_pipeline()], args.target or [None])
    store.data["options"] = {k: opts[k] for k in ("timeout", "memory_bytes", "repeats", "check_args")}
    todo = store.todo(jobs)
    print(f"{len(jobs)} rows: {len(jobs) - len(todo)} already in {args.json}, {len(todo)} to run "
          + (f"on the Ray cluster at {args.address}" if args.address else f"on {args.workers} local workers"),
          flush=True)
    t0 = time.monotonic()
    try:
        res = run_jobs(jobs, store, opts, workers=args.workers, address=args.address, on_row=progress(t0))
    except (RayMissing, ClusterUnreachable) as e:
        print(f"irviz corpus: {e}", file=sys.stderr)
        return 2
    store.write()
    if args.html:
        write_html(args.html, store.rows, store.summary(), title=f"irviz corpus: {args.json}")
    s = store.summary()
    print(", ".join(f"{s[k]} {k}" for k in ("ok", "graceful", "crash", "timeout", "memory"))
          + f" of {s['rows']} rows in {args.json}"
          + (f"; {res.finished} run in {res.seconds:.0f} s (Ray started in {res.startup_seconds:.1f} s)"
             if res.finished or res.interrupted else ""))
    if res.interrupted:
        print(f"interrupted: {res.finished} rows kept, {res.left} not run (run the same command again "
              f"to do them)", file=sys.stderr)
        return 130
    # a crash, a hang or a blow-up is what a corpus run is for finding: a script can stop on it
    return 1 if s["crash"] or s["timeout"] or s["memory"] else 0
