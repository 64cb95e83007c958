"""Every model type the installed transformers ships, at a small size: irviz and bare TVM side by side,
each type × pipeline a row of an `irviz corpus` run (Ray tasks, local workers or a cluster).

    python benchmarks/transformers_corpus.py --json OUT [--html PAGE] [--types bert,siglip,...]
        [--limit N] [--side both|irviz|tvm] [--pipeline P]... [--workers N] [--address ADDR]
        [--timeout 300] [--memory-gb G] [--logs DIR] [--builds-only]

Run it again with the same --json to go on where it stopped (Ctrl-C keeps the rows that finished);
the tables are printed from the file, so a rerun with nothing left to do just prints them.

Each model type of ``transformers``' ``MODEL_MAPPING_NAMES`` is built from its own config class
with the sizes shrunk (hidden size 32, 2 layers, 4 heads, vocabulary 256, images 32x32; nested
text/vision/audio configs likewise), random weights from a fixed seed, no download, and run in
eager torch on small example inputs (token ids, pixels, audio samples, whatever its forward()
names first; the main input alone, else every input it names).  A type that does not build or
run in eager torch is skipped with the reason (one process tries them in turn, most do not
build; the reasons are kept in the JSON's "types" and tried again by a rerun when the recipe,
benchmarks/transformers_small.py, has changed since; --builds-only stops there and counts them).
The others are the rows, each in its own process with a timeout and a memory cap:

* **irviz**: ``irviz check benchmarks/transformers_corpus.py:TYPE`` (this file is the model file:
  its factory for TYPE builds that type), once per --pipeline;
* **bare TVM** (pipeline ``bare-tvm``): ``torch.export`` (non-strict) + ``from_exported_program``
  + ``tvm.compile(mod, "llvm")`` + the VM, compared with eager torch with irviz's tolerances.

The tables: ok / graceful failure (a stage and a message) / crash, timeout or memory per side,
the types bare TVM passes and irviz fails, and where irviz stops (stage and first line of its
message) per type.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # irviz from this checkout

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the build recipe beside this file
from transformers_small import SMALL, build_case, reason, recipe_version  # noqa: F401 (the recipe's API)


def bare_tvm(module, inputs) -> dict:
    import torch
    import tvm
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program

    from irviz.core.backend.run import _compare_outputs, _to_tvm
    from irviz.core.errors import tvm_error_text

    stage = "capture"
    try:
        ep = torch.export.export(module, inputs, strict=False)
        stage = "import"
        mod = from_exported_program(ep)
        stage = "build"
        ex = tvm.compile(mod, target="llvm")
        stage = "run"
        dev = tvm.cpu()
        out = relax.VirtualMachine(ex, dev)["main"](*[_to_tvm(a, dev) for a in inputs])
        with torch.no_grad():
            ref = module(*inputs)
        stage = "compare"
        per_output = _compare_outputs(out, ref, "PyTorch", count_hint="", shape_hint="")
    except Exception as exc:
        text = tvm_error_text(exc) if stage != "capture" else f"{type(exc).__name__}: {exc}"
        return {"status": "FAIL", "stage": stage, "reason": _first_line(text)}
    if all(o["allclose"] for o in per_output):
        return {"status": "PASS"}
    worst = max((o["max_abs"] for o in per_output), default=0.0)
    return {"status": "FAIL", "stage": "compare", "reason": f"max abs error {worst:.3g}"}


def worker(model_type: str, out) -> dict:
    """Build and run in eager torch (or say why not), then bare TVM: one JSON line on stdout."""
    try:
        module, inputs = build_case(model_type)
    except Exception as e:
        return {"type": model_type, "skip": _first_line(reason(e))}
    out.write(json.dumps({"type": model_type, "built": True}) + "\n")  # bare TVM may crash next
    out.flush()
    return {"type": model_type, "tvm": bare_tvm(module, inputs)}


def build_worker(types: list[str], out, timeout: int) -> None:
    """Try to build each type in this one process (most types do not build, and a process per
    type spends most of its time importing): one JSON line per type, written as it is known."""
    import gc
    import signal

    def _alarm(*_):
        raise TimeoutError(f"building it took over {timeout} s")

    signal.signal(signal.SIGALRM, _alarm)
    for t in types:
        out.write(json.dumps({"type": t, "trying": True}) + "\n")  # a death is this type's
        out.flush()
        signal.alarm(timeout)
        try:
            build_case(t)
            row = {"type": t, "built": True}
        except BaseException as e:  # a type's failure is its row, whatever it is
            row = {"type": t, "skip": _first_line(reason(e))}
        finally:
            signal.alarm(0)
        gc.collect()
        out.write(json.dumps(row) + "\n")
        out.flush()


def buildable(types: list[str], timeout: float):
    """Yield (type, None) where it builds and runs in eager torch, else (type, the reason), as
    each is known (one process tries them in turn, so the caller runs the built ones meanwhile);
    a build that kills the process is that type's reason, and the rest go on in a new process."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "TOKENIZERS_PARALLELISM": "false"}
    left = list(types)
    while left:
        p = subprocess.Popen([sys.executable, __file__, "--build-worker", ",".join(left),
                              "--timeout", str(int(timeout))], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, env=env, cwd=REPO)
        trying, answered = None, set()
        for line in p.stdout:
            if not line.startswith("{"):
                continue
            row = json.loads(line)
            if row.get("trying"):
                trying = row["type"]
                continue
            answered.add(row["type"])
            trying = None
            yield row["type"], row.get("skip")
        p.wait()
        if trying is not None:
            answered.add(trying)
            yield trying, f"building it died (exit code {p.returncode})"
        elif not answered:  # nothing answered at all: say so for every type rather than loop
            for t in left:
                yield t, f"the build worker died (exit code {p.returncode})"
            return
        left = [t for t in left if t not in answered]


def _first_line(text: str, width: int = 160) -> str:
    line = next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")
    return line if len(line) <= width else line[: width - 3] + "..."


def __getattr__(name: str):
    """The model-file factory `irviz check transformers_corpus.py:TYPE` calls: TYPE built small."""
    model_type = _types_by_factory().get(name)
    if name.startswith("_") or model_type is None:
        raise AttributeError(name)
    return lambda: build_case(model_type)


def _known_types() -> set[str]:
    try:
        return set(all_types())
    except ImportError:  # no transformers: no factories
        return set()


def all_types() -> list[str]:
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    return sorted(MODEL_MAPPING_NAMES)


# ============================================================================================
# the rows, as Ray tasks (this file's functions travel by value: run as a script, it is __main__)

BARE = "bare-tvm"  # the pipeline column of the bare TVM rows
MODEL_FILE = "benchmarks/transformers_corpus.py"


def factory_name(model_type: str) -> str:
    """The type as a Python name (FILE.py:NAME takes one): "xlm-roberta" -> "xlm_roberta"."""
    return re.sub(r"\W", "_", model_type)


def model_spec(model_type: str) -> str:
    return f"{MODEL_FILE}:{factory_name(model_type)}"


def type_of(spec: str) -> str:
    name = spec.rpartition(":")[2]
    return _types_by_factory().get(name, name)


def _types_by_factory() -> dict[str, str]:
    return {factory_name(t): t for t in _known_types()}


def row(job: dict, opts: dict) -> dict:
    """One row: bare TVM in a worker of this file, or irviz check (the corpus's own row)."""
    from irviz.core.corpus.rows import check_row

    if job["pipeline"] == BARE:
        return bare_row(job, opts)
    return check_row(job, opts)


def bare_row(job: dict, opts: dict) -> dict:
    from irviz.core.corpus.isolate import run_isolated
    from irviz.core.corpus.rows import base_row, classify

    t = type_of(job["model"])
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"}
    with tempfile.TemporaryDirectory() as tmp:
        out = run_isolated([sys.executable, str(REPO / MODEL_FILE), "--worker", t], cwd=str(REPO), env=env,
                           timeout=opts["timeout"], memory_bytes=opts.get("memory_bytes"),
                           log_dir=opts.get("log_dir") or tmp, log_name=f"{t}_{BARE}")
    r = base_row(job, out)
    answers = [json.loads(ln) for ln in out.stdout.splitlines() if ln.startswith("{")]
    tvm = answers[-1].get("tvm") if answers else None
    if out.timed_out or out.over_memory or tvm is None:  # killed, or died: as the corpus says it
        r.update(classify(out, None, opts["timeout"], opts.get("memory_bytes")))
        if answers and "skip" in answers[-1]:
            r.update(result="graceful", stage="build", error=answers[-1]["skip"])
        elif r["result"] == "crash":
            r["stage"] = "bare TVM" if answers else "build"
    elif tvm["status"] == "PASS":
        r.update(result="ok", stage=None, error=None)
    else:
        r.update(result="graceful", stage=tvm.get("stage"), error=tvm.get("reason"))
    return r


def probe(types: list[str], store, timeout: float, build_one: bool = False) -> dict:
    """{type: None if it builds and runs in eager torch, else why not}, kept in the file's "types"
    (so a rerun probes only the new ones, and those that did not build with another recipe); one
    type alone is left to its row to build unless `build_one`."""
    known = store.data.setdefault("types", {})
    version = recipe_version()
    if store.data.get("recipe") != version:  # the recipe changed since: its reasons may not hold
        for t in [t for t, why in known.items() if why is not None]:
            del known[t]
        store.data["recipe"] = version
    # a worker that died before answering said nothing about the types themselves: ask again
    todo = [t for t in types if t not in known or str(known[t]).startswith("the build worker died")]
    t0 = time.monotonic()
    answers = buildable(todo, timeout) if len(todo) > 1 or build_one else ((t, None) for t in todo)
    for k, (t, why) in enumerate(answers, 1):
        known[t] = why
        print(f"[build {k}/{len(todo)} {time.monotonic() - t0:.0f} s] {t}: "
              + ("builds" if why is None else f"skipped ({why})"), file=sys.stderr, flush=True)
        if k % 20 == 0:
            store.write()
    store.write()
    return {t: known[t] for t in types}


# ============================================================================================
# the tables


def tables(store, types: list[str], sides: list[str]) -> str:
    by = {(type_of(r["model"]), r["pipeline"]): r for r in store.rows}
    built = [t for t in types if store.data["types"].get(t) is None]
    skipped = [t for t in types if store.data["types"].get(t) is not None]

    def count(side, results):
        return sum(1 for t in built if by.get((t, side), {}).get("result") in results)

    lines = [f"| {len(built)} architectures | " + " | ".join(sides) + " |", "|---" * (len(sides) + 1) + "|"]
    for label, results in (("pass (matches torch)", ("ok",)), ("graceful failure", ("graceful",)),
                           ("crash", ("crash",)), ("timeout or memory", ("timeout", "memory")),
                           ("not run yet", (None,))):
        lines.append(f"| {label} | " + " | ".join(str(count(s, results)) for s in sides) + " |")
    if BARE in sides:
        regress = [t for t in built if by.get((t, BARE), {}).get("result") == "ok"
                   and any(by.get((t, s), {}).get("result") not in ("ok", None) for s in sides if s != BARE)]
        lines.append(f"\nbare TVM passes, irviz fails ({len(regress)}): {', '.join(regress) or 'none'}")
    lines += ["", "| type | " + " | ".join(sides) + " |", "|---" * (len(sides) + 1) + "|"]
    lines += [f"| {t} | " + " | ".join(_cell(by.get((t, s))) for s in sides) + " |" for t in built]
    if skipped:
        lines += ["", f"skipped ({len(skipped)}, do not build or run in eager torch at this size):"]
        lines += [f"  {t}: {store.data['types'][t]}" for t in skipped]
    return "\n".join(lines)


def _cell(r: dict | None) -> str:
    if r is None:
        return "not run"
    how = f" ({r['capture']})" if r.get("capture") not in (None, "export") else ""  # a fallback's name
    if r["result"] == "ok":
        return "pass" + how
    at = f" at {r['stage']}" if r.get("stage") else ""
    return f"{r['result']}{at}{how}: {_first_line(r.get('error') or '')}".replace("|", "\\|")


# ============================================================================================
# the driver


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--types", help="comma-separated model types (default: every one)")
    ap.add_argument("--limit", type=int, help="only the first N types")
    ap.add_argument("--side", choices=("both", "irviz", "tvm"), default="both",
                    help="run irviz check, bare TVM or both (default)")
    ap.add_argument("--pipeline", action="append", metavar="P",
                    help="irviz's pipeline (repeat for several; default: check's)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="local Ray workers")
    ap.add_argument("--address", help="an existing Ray cluster instead of a local instance")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per row (and per type's build)")
    ap.add_argument("--memory-gb", type=float, default=None,
                    help="resident memory per row (default: this machine's divided by --workers)")
    ap.add_argument("--json", metavar="OUT",
                    help="the corpus's results file, required (rewritten after each row; a rerun resumes it)")
    ap.add_argument("--html", metavar="PAGE", help="the rows as a sortable HTML table")
    ap.add_argument("--logs", metavar="DIR", help="keep each row's output in DIR")
    ap.add_argument("--builds-only", action="store_true",
                    help="only try building each type (kept in the file's \"types\"), run no rows")
    ap.add_argument("--worker", metavar="TYPE", help=argparse.SUPPRESS)
    ap.add_argument("--build-worker", metavar="TYPES", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker or args.build_worker:
        import warnings

        warnings.filterwarnings("ignore")
        out = os.fdopen(os.dup(1), "w")
        os.dup2(2, 1)  # torch's and TVM's own prints stay out of the answer
        if args.build_worker:
            build_worker(args.build_worker.split(","), out, int(args.timeout))
            return 0
        out.write(json.dumps(worker(args.worker, out)) + "\n")
        out.flush()
        return 0

    known = all_types()
    types = [t.strip() for t in args.types.split(",")] if args.types else known
    unknown = [t for t in types if t not in known]
    if unknown:
        print(f"unknown model types: {', '.join(unknown)} (transformers' MODEL_MAPPING_NAMES has "
              f"{len(known)}, e.g. {', '.join(known[:5])})", file=sys.stderr)
        return 2
    clash = sorted(set(types) & set(globals()))
    if clash:  # this file's own function would be called instead of the factory
        print(f"model types named like this file's functions: {', '.join(clash)}", file=sys.stderr)
        return 2
    if not args.json:
        ap.error("--json OUT is required: the rows go there as they finish")
    from irviz.cli.corpus import default_pipeline, memory_cap, progress
    from irviz.core.corpus.html_table import write_html
    from irviz.core.corpus.pool import run_jobs
    from irviz.core.corpus.store import Store

    types = types[: args.limit] if args.limit else types
    store = Store(args.json)
    t0 = time.perf_counter()
    builds = probe(types, store, args.timeout, build_one=args.builds_only)
    if args.builds_only:
        built = sorted(t for t, why in builds.items() if why is None)
        print(f"{len(built)} of {len(types)} types build and run in eager torch at the small size")
        by_reason: dict[str, list[str]] = {}
        for t, why in builds.items():
            if why is not None:
                by_reason.setdefault(why, []).append(t)
        for why, ts in sorted(by_reason.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            print(f"  {len(ts):3d}  {why}  ({', '.join(sorted(ts)[:6])}{', ...' if len(ts) > 6 else ''})")
        return 0
    pipelines = args.pipeline or [default_pipeline()]
    sides = (pipelines if args.side != "tvm" else []) + ([BARE] if args.side != "irviz" else [])
    jobs = [{"model": model_spec(t), "pipeline": s, "target": None}
            for t in types if builds[t] is None for s in sides]
    opts = {"timeout": args.timeout, "memory_bytes": memory_cap(args), "repeats": 1, "cwd": str(REPO),
            "env": {"TOKENIZERS_PARALLELISM": "false"},
            "log_dir": os.path.abspath(args.logs) if args.logs else None}
    todo = store.todo(jobs)
    print(f"{len(jobs)} rows ({sum(b is None for b in builds.values())} types build, sides {', '.join(sides)}): "
          f"{len(jobs) - len(todo)} already in {args.json}, {len(todo)} to run", file=sys.stderr, flush=True)
    res = run_jobs(jobs, store, opts, workers=args.workers, address=args.address, task=row,
                   on_row=progress(time.monotonic()))
    store.write()
    if args.html:
        write_html(args.html, store.rows, store.summary(), title="transformers corpus: irviz and bare TVM")
    print(tables(store, types, sides))
    print(f"\n{res.finished} rows run in {time.perf_counter() - t0:.0f} s"
          + (f" (Ray started in {res.startup_seconds:.1f} s)" if res.finished else "")
          + ("; interrupted: run the same command again to go on" if res.interrupted else ""))
    return 130 if res.interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
