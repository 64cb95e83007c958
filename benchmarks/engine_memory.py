"""The engine's memory on a big model: RSS after each phase, against the model's weight bytes.

In one process, as the engine does it (core Workspace + the views the window asks for at every
step): open MODEL (default: full-size GPT-2, benchmarks/gpt2_full.py), step through ``zero`` then
``default_build``, then go back to step 0 and forward to the end a few times.  Target: RSS within
3x the weight bytes, and no growth from one back/forward round to the next.

    nice -n 10 python benchmarks/engine_memory.py [--model benchmarks/gpt2_full.py] [--rounds 3]
        [--no-views]

Heavy (full GPT-2: about a minute to open, a few to step): run it once or twice, not in loops.

    nice -n 10 python benchmarks/engine_memory.py --full-size [--model sample:llama3_8b_shape]
        [--compare zero] [--json out.json]

The full-size case: the engine's own command handlers (irviz.engine.dispatch.Engine, as the
window's requests reach them) open MODEL structure only (no weights: Llama-3-8B's shape is 32 GB
in float32), step default_build to the end asking the views the window asks at every step, build
the last step (no run: nothing to run with), its memory plan and estimated latency (what the Run
pane offers instead of a run), then compare default_build with another pipeline (both built).
RSS after each phase and each phase's own peak (VmHWM, reset between phases). Target: <= 4 GB
throughout. With IRVIZ_CACHE_DIR set to an empty folder the estimate times every kernel (cold).
"""
from __future__ import annotations

import argparse
import gc
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
warnings.filterwarnings("ignore")

MB = 1024 * 1024


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def weight_bytes(loaded) -> int:
    """Bytes of the model's parameters and buffers (each tensor once)."""
    seen, total = set(), 0
    module = getattr(loaded, "module", None)
    if module is None or not hasattr(module, "state_dict"):
        return 0
    for t in module.state_dict(keep_vars=True).values():
        if hasattr(t, "untyped_storage"):
            key = t.untyped_storage().data_ptr()
            if key in seen:
                continue
            seen.add(key)
            total += t.untyped_storage().nbytes()
    return total


class Report:
    def __init__(self, weights: int):
        self.weights = weights
        self.rows: list[tuple[str, int]] = []

    def __call__(self, phase: str) -> int:
        gc.collect()
        r = rss_bytes()
        self.rows.append((phase, r))
        ratio = f"  {r / self.weights:4.2f}x weights" if self.weights else ""
        print(f"{phase:<44} RSS {r / MB:8.0f} MB{ratio}", flush=True)
        return r


def ask_views(views, index: int) -> None:
    """What the window asks at each step: the Relax graph and text of main (and of the step
    before, for the highlights), TensorIR list, the diff, provenance."""
    names = views.func_names(views._step(index))[0]
    if "main" in names:
        views.relax_graph(step=index, func="main")
        views.function_text(step=index, name="main")
        if index > 0 and "main" in views.func_names(views._step(index - 1))[0]:
            views.relax_graph(step=index - 1, func="main")
    views.tir_functions(step=index)
    views.diff(max(0, index - 1), index)
    views.provenance(step=index)


def peak_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def reset_peak() -> None:
    """VmHWM back to the current RSS, so the next reading is the peak of one phase."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:  # not Linux, or not allowed: the peaks are then cumulative
        pass


class NullChannel:
    def send(self, _msg) -> None:
        pass


def full_size(model: str, pipeline_b: str, no_views: bool, json_path: str | None) -> int:
    """The engine on a full-size model without weights: open, default_build step by step with the
    views, build, memory, estimate, compare. Each phase's RSS at its end and its own peak."""
    import json

    from irviz.engine.dispatch import Engine

    engine = Engine(NullChannel(), test_commands=False)
    rows: list[dict] = []
    n = [0]

    def call(cmd: str, **args):
        n[0] += 1
        reply = engine.handle({"id": n[0], "cmd": cmd, "args": args})
        if not reply["ok"]:
            raise SystemExit(f"{cmd} failed: {reply['error'].get('message')}")
        return reply["result"]

    def phase(name: str, t0: float) -> None:
        gc.collect()
        row = {"phase": name, "seconds": round(time.perf_counter() - t0, 2),
               "rss_mb": round(rss_bytes() / MB), "peak_mb": round(peak_bytes() / MB)}
        rows.append(row)
        print(f"{name:<46} {row['seconds']:7.1f} s   RSS {row['rss_mb']:6d} MB   "
              f"peak {row['peak_mb']:6d} MB", flush=True)
        reset_peak()

    print(f"python + irviz imported: RSS {rss_bytes() / MB:.0f} MB", flush=True)
    reset_peak()
    t = time.perf_counter()
    state = call("open", spec=model, pipeline="default_build", no_weights=True)
    phase("open (file -> imported)", t)
    views = engine.views
    if not no_views:
        t = time.perf_counter()
        views.fx_graph()
        ask_views(views, 0)
        phase("views of step 0 (FX, Relax, TensorIR, diff)", t)
    t = time.perf_counter()
    while engine.session.pipeline:
        t1 = time.perf_counter()
        state = call("step")
        if not no_views:
            ask_views(views, engine.session.cursor)
        name = engine.session.steps[engine.session.cursor].pass_name
        phase(f"  step {engine.session.cursor:2d} {name}", t1)
    print(f"default_build: {time.perf_counter() - t:.1f} s, {len(engine.session.steps) - 1} steps "
          f"(the engine's state: cursor {state.get('cursor') if isinstance(state, dict) else '?'})")
    # build_run answers that a model without weights has nothing to run with (and keeps the
    # session); the build itself is the workspace's, as `irviz check` builds without running
    reply = engine.handle({"id": 0, "cmd": "build_run", "args": {}})
    print(f"build_run: {'ok' if reply['ok'] else reply['error'].get('message', '')[:70]}")
    t = time.perf_counter()
    built = engine.ws.build_step()
    phase(f"build, no run ({built.seconds:.0f} s compiling)", t)
    t = time.perf_counter()
    mem = call("memory")
    phase(f"memory plan (peak {mem.get('peak_bytes', 0) / MB:.0f} MB of activations)", t)
    t = time.perf_counter()
    est = call("estimate")
    phase(f"estimate ({len(est['kernels'])} kernels, {est['measured']} timed)", t)
    t = time.perf_counter()
    cmp = call("compare", pipeline_b=pipeline_b, measure=True)
    phase(f"compare default_build | {pipeline_b} (both built)", t)
    for row in cmp.get("pipelines", []):
        print(f"    {row['pipeline'][:40]:<40} {len(row['steps'])} steps, build {row['build_seconds']} s"
              + (f", error: {row['error']}" if row.get("error") else ""))
    engine.comparison = None
    t = time.perf_counter()
    call("jump", index=0)
    phase("back to step 0, comparison dropped", t)
    peak = max(r["peak_mb"] for r in rows)
    print(f"\npeak RSS {peak} MB; target <= 4096 MB: {'met' if peak <= 4096 else 'NOT met'}")
    if json_path:
        Path(json_path).write_text(json.dumps({"model": model, "phases": rows, "peak_mb": peak},
                                              indent=2) + "\n")
    return 0 if peak <= 4096 else 1


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=None,
                    help="default: benchmarks/gpt2_full.py, or sample:llama3_8b_shape with --full-size")
    ap.add_argument("--full-size", action="store_true",
                    help="the model structure only, through the engine's handlers: open, "
                         "default_build, build, compare")
    ap.add_argument("--compare", default="zero", help="--full-size: pipeline B of the compare")
    ap.add_argument("--json", metavar="PATH", help="--full-size: the phases as JSON")
    ap.add_argument("--rounds", type=int, default=3, help="back-to-0 / forward-to-end rounds")
    ap.add_argument("--no-views", action="store_true", help="step only; ask no views")
    args = ap.parse_args()
    if args.full_size:
        return full_size(args.model or "sample:llama3_8b_shape", args.compare, args.no_views,
                         args.json)
    args.model = args.model or str(Path(__file__).with_name("gpt2_full.py"))

    from irviz.core.passes import get_pipeline
    from irviz.engine.views import StepViews
    from irviz.core.workspace import Workspace

    base = rss_bytes()
    print(f"python + irviz imported: RSS {base / MB:.0f} MB")
    ws = Workspace()
    views = StepViews(ws, lambda *a, **k: None)
    t = time.perf_counter()
    ws.open(args.model, planned=get_pipeline("zero") + get_pipeline("default_build"))
    weights = weight_bytes(ws.loaded)
    print(f"weights: {weights / MB:.0f} MB; opened in {time.perf_counter() - t:.0f} s")
    report = Report(weights)
    report("open (step 0)")
    if not args.no_views:
        views.fx_graph()
        ask_views(views, 0)
        report("open + views of step 0")
    s = ws.session
    n_zero = len(get_pipeline("zero"))
    t = time.perf_counter()
    while s.pipeline:
        ws.step()
        if not args.no_views:
            ask_views(views, s.cursor)
        if s.cursor == n_zero:
            report(f"after zero (step {s.cursor})")
    last = s.cursor
    report(f"after default_build (step {last}, {time.perf_counter() - t:.0f} s)")
    per_round = []
    for k in range(args.rounds):
        while s.cursor > 0:
            ws.back()
            if not args.no_views:
                ask_views(views, s.cursor)
        report(f"round {k + 1}: back to step 0")
        while s.cursor < last:
            ws.step()
            if not args.no_views:
                ask_views(views, s.cursor)
        per_round.append(report(f"round {k + 1}: forward to step {last}"))
    peak = max(r for _, r in report.rows)
    print()
    if weights:
        print(f"peak RSS {peak / MB:.0f} MB = {peak / weights:.2f}x the weights ({weights / MB:.0f} MB); "
              f"target <= 3x: {'met' if peak <= 3 * weights else 'NOT met'}")
    if len(per_round) >= 2:
        growth = per_round[-1] - per_round[0]
        print(f"growth from round 1 to round {len(per_round)}: {growth / MB:+.0f} MB "
              f"({'none to speak of' if abs(growth) < 0.02 * per_round[0] else 'it grows'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
