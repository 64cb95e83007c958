"""The engine's memory on a big model: RSS after each phase, against the model's weight bytes.

In one process, as the engine does it (core Workspace + the views the window asks for at every
step): open MODEL (default: full-size GPT-2, benchmarks/gpt2_full.py), step through ``zero`` then
``default_build``, then go back to step 0 and forward to the end a few times.  Target: RSS within
3x the weight bytes, and no growth from one back/forward round to the next.

    nice -n 10 python benchmarks/engine_memory.py [--model benchmarks/gpt2_full.py] [--rounds 3]
        [--no-views]

Heavy (full GPT-2: about a minute to open, a few to step): run it once or twice, not in loops.
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


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(Path(__file__).with_name("gpt2_full.py")))
    ap.add_argument("--rounds", type=int, default=3, help="back-to-0 / forward-to-end rounds")
    ap.add_argument("--no-views", action="store_true", help="step only; ask no views")
    args = ap.parse_args()

    from irviz.core.passes import get_pipeline
    from irviz.step_views import StepViews
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
