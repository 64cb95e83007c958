"""TVM's own frontend tests as a corpus: irviz's chain and bare TVM on every module, side by side.

    python benchmarks/frontend_corpus.py tests/data/tvm_frontend_corpus.py \
        [--limit N] [--filter RE] [--jobs 1] [--timeout 300] [--json OUT]

The test file (apache/tvm tests/python/relax/test_frontend_from_exported_program.py) defines
small nn.Modules in each test and hands each, with example inputs, to a ``verify_model*`` helper.
The file is executed with those helpers replaced by a recorder and TVMScript's ``I``/``R``/``T`` and
``tvm.script`` stubbed (the expected modules are not needed), each test once per parametrization with
``torch.manual_seed(0)`` first, so the harvest is the same in every process.

Each module then goes, in eval mode, through

* **irviz**: ``Workspace.open_loaded`` (capture, import with irviz's converters), the zero pipeline
  one pass at a time, ``build_run`` compared with torch (what ``irviz check --pipeline zero`` does);
* **bare TVM**: ``torch.export`` + ``from_exported_program`` + ``tvm.compile(mod, "llvm")`` + the
  VM, compared with torch with the same tolerances (irviz's ``_compare``).

Outcomes: PASS; FAIL stage [op] (stage: capture, import, pipeline, build, run, compare);
NOT COMPARABLE reason (PyTorch itself rejects the example inputs, a random op, order-dependent
writes: see irviz/core/backend/nondeterminism.py); CRASH (the process died, e.g. a TVM
segfault) and TIMEOUT.  Modules run in worker processes, one case at a time, so a crash costs
only that case: the worker is restarted (and re-harvests) for the next one.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import queue
import re
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VERIFY_HELPERS = ("verify_model", "verify_model_numerically")
RESTART_EVERY = 40  # cases per worker process (TVM's and torch's caches only grow)


# ============================================================================================
# harvesting (in the worker)


class _Anything:
    """Stands for TVMScript's I, R and T: every attribute, call and subscript is itself, so the
    tests' expected modules are defined without being parsed."""

    def __getattr__(self, name):
        return self

    def __call__(self, *args, **kwargs):
        return self

    def __getitem__(self, key):
        return self


class _TvmWithoutScript:
    """The tvm package as the tests see it, with tvm.script stubbed."""

    def __init__(self, tvm, stub):
        self._tvm, self._stub = tvm, stub

    def __getattr__(self, name):
        return self._stub if name == "script" else getattr(self._tvm, name)


class Case:
    def __init__(self, name, module, args, dynamic_shapes):
        self.name, self.module, self.args, self.dynamic_shapes = name, module, args, dynamic_shapes


def _param_id(v) -> str:
    if isinstance(v, (int, float, bool, str)) or v is None:
        return str(v)
    return getattr(v, "__name__", None) or type(v).__name__


def _parametrizations(fn) -> list[tuple[str, dict]]:
    """(id, kwargs) for each combination of the test's parametrize marks."""
    axes = []
    for mark in getattr(fn, "pytestmark", []):
        if mark.name != "parametrize":
            continue
        names, values = mark.args[0], mark.args[1]
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        combos = []
        for v in values:
            if hasattr(v, "values") and hasattr(v, "marks"):  # pytest.param(...)
                v = tuple(v.values)
            elif len(names) == 1:
                v = (v,)
            else:
                v = tuple(v)
            combos.append(("-".join(_param_id(x) for x in v), dict(zip(names, v))))
        axes.append(combos)
    if not axes:
        return [("", {})]
    out = []
    for combo in itertools.product(*axes):
        ids = "-".join(c[0] for c in combo)
        kwargs = {}
        for c in combo:
            kwargs.update(c[1])
        out.append((ids, kwargs))
    return out


def harvest(path: str) -> tuple[list[Case], list[str]]:
    """Every (module, example args) the test file hands to a verify helper; and the tests that
    could not be run to harvest them (name: reason)."""
    import inspect

    import torch

    name = "irviz_frontend_corpus_tests"
    mod = types.ModuleType(name)
    mod.__file__ = str(path)
    sys.modules[name] = mod  # TVMScript finds the source of decorated code through sys.modules
    source = Path(path).read_text(encoding="utf-8")
    exec(compile(source, str(path), "exec"), mod.__dict__)  # the corpus is the input

    cases: list[Case] = []
    skipped: list[str] = []
    current = {"name": "", "count": 0}

    def record(*args, **kwargs):
        model = kwargs.get("torch_model", args[0] if args else None)
        example = kwargs.get("example_args", args[1] if len(args) > 1 else None)
        current["count"] += 1
        label = f"{current['name']}#{current['count']} {type(model).__name__}"
        if isinstance(example, torch.Tensor):
            example = (example,)
        cases.append(Case(label, model, tuple(example or ()), kwargs.get("dynamic_shapes")))

    for helper in VERIFY_HELPERS:
        mod.__dict__[helper] = record
    stub = _Anything()
    for short in ("I", "R", "T"):
        mod.__dict__[short] = stub
    mod.__dict__["tvm"] = _TvmWithoutScript(mod.__dict__["tvm"], stub)  # @tvm.script.ir_module

    tests = [(n, f) for n, f in mod.__dict__.items() if n.startswith("test_") and callable(f)]
    for test_name, fn in tests:
        try:
            wanted = set(inspect.signature(fn).parameters)
        except (TypeError, ValueError):
            wanted = set()
        for ids, kwargs in _parametrizations(fn):
            label = f"{test_name}[{ids}]" if ids else test_name
            if wanted - set(kwargs):
                skipped.append(f"{label}: needs fixtures {sorted(wanted - set(kwargs))}")
                continue
            current.update(name=label, count=0)
            torch.manual_seed(0)
            try:
                fn(**kwargs)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:  # pytest.skip raises a BaseException
                if current["count"] == 0:
                    skipped.append(f"{label}: {type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}")
    return cases, skipped


# ============================================================================================
# one case, both ways (in the worker)

_OP_PATTERNS = (
    re.compile(r"\baten\.[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)?"),
    re.compile(r"'([a-z_0-9]+\.(?:default|Tensor|Scalar|[A-Za-z_0-9]+))'"),
    re.compile(r"\brelax\.[a-z_.]+[a-z_]"),
    re.compile(r"\bR\.[a-z_.]+[a-z_]"),
)


def _op_of(message: str) -> str | None:
    for pat in _OP_PATTERNS:
        m = pat.search(message or "")
        if m:
            return m.group(1) if m.groups() else m.group(0)
    return None


def _first_line(message: str, limit: int = 110) -> str:
    line = next((ln.strip() for ln in (message or "").splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _fail(stage: str, message: str) -> dict:
    return {"status": "FAIL", "stage": stage, "op": _op_of(message), "reason": _first_line(message)}


def _reference_problem(case) -> str | None:
    """Why torch itself cannot give a reference for this case, or None."""
    import torch

    from irviz.core.backend.nondeterminism import fresh

    try:
        with torch.no_grad():
            case.module(*fresh(case.args))
    except Exception as exc:
        return f"torch rejects the inputs: {_first_line(str(exc), 90)}"
    return None


def run_irviz(case) -> dict:
    from irviz.core import passes
    from irviz.core.errors import IrvizError
    from irviz.core.frontend.model_file import LoadedModel
    from irviz.core.workspace import Workspace

    ws = Workspace()
    loaded = LoadedModel(module=case.module, example_inputs=case.args, spec=case.name,
                         name=case.name, dynamic_shapes=case.dynamic_shapes)
    try:
        ws.open_loaded(loaded, planned=passes.get_pipeline("zero"))
        ws.run_to_end()
        _, res = ws.build_run(repeats=1)
    except Exception as exc:
        stage = (exc.stage if isinstance(exc, IrvizError) else None) or ws.stage or "load"
        msg = exc.message if isinstance(exc, IrvizError) and hasattr(exc, "message") else str(exc)
        return _fail(stage, msg or type(exc).__name__)
    return _verdict(res.allclose, res.max_abs_error, res.not_comparable)


def _verdict(allclose, max_abs, not_comparable) -> dict:
    if allclose:
        return {"status": "PASS", "max_abs": max_abs}
    if not_comparable:
        return {"status": "NOT COMPARABLE", "reason": not_comparable, "max_abs": max_abs}
    return {"status": "FAIL", "stage": "compare", "op": None, "max_abs": max_abs,
            "reason": f"MISMATCH, max abs error {max_abs:.3g}"}


def run_bare_tvm(case) -> dict:
    import torch
    import tvm
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program

    from irviz.core.backend import nondeterminism
    from irviz.core.backend.run import _compare_outputs, _to_tvm
    from irviz.core.errors import tvm_error_text

    args = nondeterminism.fresh(case.args)
    stage = "capture"
    try:
        ep = torch.export.export(case.module, args, dynamic_shapes=case.dynamic_shapes)
        stage = "import"
        mod = from_exported_program(ep)
        stage = "build"
        ex = tvm.compile(mod, target="llvm")
        stage = "run"
        vm = relax.VirtualMachine(ex, tvm.cpu())
        dev = tvm.cpu()
        tensors = [a for a in args if not isinstance(a, (int, float, bool, str))]
        out = vm["main"](*[_to_tvm(a, dev) for a in nondeterminism.fresh(tensors)])
        with torch.no_grad():
            ref = case.module(*nondeterminism.fresh(args))
        stage = "compare"
        per_output = _compare_outputs(out, ref, "PyTorch", count_hint="", shape_hint="")
    except Exception as exc:
        return _fail(stage, tvm_error_text(exc) if stage != "capture" else str(exc))
    ok = all(o["allclose"] for o in per_output)
    max_abs = max((o["max_abs"] for o in per_output), default=0.0)
    reason = None if ok else nondeterminism.explain(case.module, args, ep)
    return _verdict(ok, max_abs, reason)


def worker_main(path: str) -> int:
    """Harvest, announce the case names, then answer "RUN i" lines with one JSON line per side."""
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # TVM's and torch's own prints go to the log, not into the protocol
    sys.stdout = sys.stderr
    import warnings

    warnings.filterwarnings("ignore")
    sys.path.insert(0, str(REPO))
    cases, skipped = harvest(path)
    out.write(json.dumps({"cases": [c.name for c in cases], "skipped": skipped}) + "\n")
    for line in sys.stdin:
        parts = line.split()
        if len(parts) != 2 or parts[0] != "RUN":
            continue
        i = int(parts[1])
        case = cases[i]
        case.module.eval()
        problem = _reference_problem(case)
        for side, fn in (("irviz", run_irviz), ("tvm", run_bare_tvm)):
            if problem:
                result = {"status": "NOT COMPARABLE", "reason": problem}
            else:
                t = time.perf_counter()
                try:
                    result = fn(case)
                except Exception as exc:  # a bug here must not stop the corpus
                    result = _fail("harness", f"{type(exc).__name__}: {exc}")
                    print(traceback.format_exc(), file=sys.stderr)
                result["seconds"] = round(time.perf_counter() - t, 2)
            out.write(json.dumps({"i": i, "side": side, **result}) + "\n")
    return 0


# ============================================================================================
# the driver (parent process)


class Worker:
    def __init__(self, path: str, log):
        self.path, self.log = path, log
        self.proc = None
        self.cases: list[str] = []
        self.skipped: list[str] = []
        self.done = 0
        self._buf = b""

    def start(self, timeout: float) -> None:
        env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.proc = subprocess.Popen([sys.executable, __file__, "--worker", self.path],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     env=env, start_new_session=True)
        self.done = 0
        self._buf = b""
        first = self.readline(timeout)
        if first is None:
            raise RuntimeError(f"the harvesting worker died or hung (exit {self.proc.poll()}); see the log")
        head = json.loads(first)
        self.cases, self.skipped = head["cases"], head["skipped"]

    def readline(self, timeout: float) -> str | None:
        """One line from the worker; None on EOF (it died) or when `timeout` passes."""
        # raw reads into our own buffer: a buffered readline could swallow the next line, which
        # select() would then never report
        end = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = end - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    return None
                self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line.decode("utf-8", "replace")

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        self.proc = None

    def died(self) -> str:
        code = self.proc.poll() if self.proc else None
        if code is not None and code < 0:
            try:
                return f"process killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"process killed by signal {-code}"
        return f"process exited ({code})"


def run_case(worker: Worker, i: int, timeout: float) -> dict:
    """Both sides of case i; a crash or a hang is that side's outcome, and the worker restarts."""
    results: dict[str, dict] = {}
    worker.proc.stdin.write(f"RUN {i}\n".encode())
    worker.proc.stdin.flush()
    t0 = time.monotonic()
    for side in ("irviz", "tvm"):
        line = worker.readline(max(1.0, timeout - (time.monotonic() - t0)))
        if line is None:
            alive = worker.proc.poll() is None
            status = "TIMEOUT" if alive else "CRASH"
            reason = f"no answer in {timeout:.0f} s" if alive else worker.died()
            results[side] = {"status": status, "reason": reason}
            if side == "irviz":
                results["tvm"] = {"status": "NOT RUN", "reason": f"irviz's {status.lower()} stopped the worker"}
            worker.stop()
            break
        results[side] = json.loads(line)
    worker.done += 1
    return results


def describe(r: dict) -> str:
    s = r.get("status", "?")
    if s == "PASS":
        return "PASS"
    if s == "FAIL":
        op = f" {r['op']}" if r.get("op") else ""
        return f"FAIL {r.get('stage')}{op}: {r.get('reason', '')}"
    return f"{s}: {r.get('reason', '')}"


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("test_file", help="path of TVM's test_frontend_from_exported_program.py")
    ap.add_argument("--limit", type=int, default=None, help="run only the first N selected modules")
    ap.add_argument("--filter", default=None, metavar="RE", help="only modules whose name matches RE")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (the machine has few cores)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per module, both sides")
    ap.add_argument("--json", default=None, metavar="OUT", help="also write every outcome to OUT")
    ap.add_argument("--log", default=None, help="the workers' own output (default: a temp file)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker_main(args.test_file)
    path = str(Path(args.test_file).expanduser().resolve())
    if not Path(path).is_file():
        print(f"frontend_corpus: no such file: {args.test_file}", file=sys.stderr)
        return 2
    log_path = args.log or tempfile.mkstemp(prefix="frontend_corpus_", suffix=".log")[1]
    log = open(log_path, "w")

    t_start = time.monotonic()
    first = Worker(path, log)
    try:
        first.start(args.timeout)
    except RuntimeError as exc:
        print(f"frontend_corpus: {exc} ({log_path})", file=sys.stderr)
        return 1
    names = first.cases
    selected = [i for i, n in enumerate(names) if args.filter is None or re.search(args.filter, n)]
    if args.limit is not None:
        selected = selected[: args.limit]
    print(f"harvested {len(names)} modules from {Path(path).name} ({len(first.skipped)} tests gave none); "
          f"running {len(selected)}, {args.jobs} worker(s); worker log: {log_path}", flush=True)

    todo: queue.Queue = queue.Queue()
    for i in selected:
        todo.put(i)
    results: dict[int, dict] = {}
    lock = threading.Lock()
    name_w = min(58, max((len(names[i]) for i in selected), default=10))

    def report(i, r):
        with lock:
            results[i] = r
            print(f"{_short(names[i], name_w):{name_w}}  {_short(describe(r['irviz']), 52):52}  "
                  f"{_short(describe(r['tvm']), 52)}", flush=True)

    def slot(worker: Worker):
        while True:
            try:
                i = todo.get_nowait()
            except queue.Empty:
                break
            try:
                if worker.proc is None or worker.proc.poll() is not None or worker.done >= RESTART_EVERY:
                    worker.stop()
                    worker.start(args.timeout)
                r = run_case(worker, i, args.timeout)
            except (RuntimeError, BrokenPipeError, OSError) as exc:
                worker.stop()
                r = {side: {"status": "CRASH", "reason": f"worker: {exc}"} for side in ("irviz", "tvm")}
            report(i, r)
        worker.stop()

    print(f"{'module':{name_w}}  {'irviz':52}  bare TVM", flush=True)
    workers = [first] + [Worker(path, log) for _ in range(max(1, args.jobs) - 1)]
    threads = [threading.Thread(target=slot, args=(w,), daemon=True) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    summary = summarize(names, selected, results)
    print_summary(summary, time.monotonic() - t_start)
    if args.json:
        Path(args.json).write_text(json.dumps({
            "test_file": path, "modules": len(names), "selected": len(selected),
            "skipped_tests": first.skipped, "summary": summary,
            "cases": [{"name": names[i], **results[i]} for i in selected if i in results]},
            indent=1) + "\n")
    log.close()
    return 0


def summarize(names, selected, results) -> dict:
    counts = {"irviz": {}, "tvm": {}}
    for i in selected:
        for side in counts:
            s = results.get(i, {}).get(side, {}).get("status", "NOT RUN")
            counts[side][s] = counts[side].get(s, 0) + 1
    tvm_only = [names[i] for i in selected if results[i]["tvm"].get("status") == "PASS"
                and results[i]["irviz"].get("status") != "PASS"]
    irviz_only = [names[i] for i in selected if results[i]["irviz"].get("status") == "PASS"
                  and results[i]["tvm"].get("status") != "PASS"]
    return {"counts": counts, "total": len(selected),
            "irviz_pass": counts["irviz"].get("PASS", 0), "tvm_pass": counts["tvm"].get("PASS", 0),
            "tvm_passes_irviz_does_not": tvm_only, "irviz_passes_tvm_does_not": irviz_only}


def print_summary(summary: dict, seconds: float) -> None:
    counts = summary["counts"]
    statuses = ["PASS", "FAIL", "NOT COMPARABLE", "CRASH", "TIMEOUT", "NOT RUN"]
    print()
    print(f"{'':16}{'irviz':>8}{'bare TVM':>10}")
    for s in statuses:
        a, b = counts["irviz"].get(s, 0), counts["tvm"].get(s, 0)
        if a or b or s in ("PASS", "FAIL"):
            print(f"{s:16}{a:>8}{b:>10}")
    print(f"{'total':16}{summary['total']:>8}{summary['total']:>10}")
    print(f"\nPASS: irviz {summary['irviz_pass']} / {summary['total']}, "
          f"bare TVM {summary['tvm_pass']} / {summary['total']}  ({seconds:.0f} s)")
    if summary["tvm_passes_irviz_does_not"]:
        print("bare TVM passes, irviz does not: " + ", ".join(summary["tvm_passes_irviz_does_not"]))
    else:
        print("irviz passes every module bare TVM passes.")
    if summary["irviz_passes_tvm_does_not"]:
        print(f"irviz passes, bare TVM does not ({len(summary['irviz_passes_tvm_does_not'])}): "
              + ", ".join(summary["irviz_passes_tvm_does_not"]))


if __name__ == "__main__":
    raise SystemExit(main())
