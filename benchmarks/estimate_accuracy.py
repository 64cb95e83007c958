"""Estimated latency (each distinct kernel timed alone, times its calls) against the measured run.

For each model: open it with its weights, apply PIPELINE, estimate the last step (Workspace.estimate:
kernel times come from the decision cache when this CPU has timed them before; `--fresh` times them
again), then build and run it (Workspace.build_run, median of REPEATS). Prints estimated, measured
and their ratio per model, and the CPU. Aim: within 25%.

    nice -n 10 python benchmarks/estimate_accuracy.py [--model sample:resnet18 ...]
        [--pipeline zero] [--repeats 10] [--fresh] [--json out.json]

The 1-layer full-width Llama (sample:llama3_8b_1layer) fits in memory with its weights but its
naive (unscheduled) kernels take minutes a run; pass it with --model to include it.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
warnings.filterwarnings("ignore")

MODELS = ["sample:mlp", "sample:small_cnn", "sample:dynamic_mlp", "sample:resnet18", "sample:hf_llama"]


def measure(spec: str, pipeline: str, repeats: int) -> dict:
    from irviz.core.passes import parse_pipeline
    from irviz.core.workspace import Workspace

    ws = Workspace(log=lambda line: None)
    ws.open(spec, planned=parse_pipeline(pipeline))
    ws.run_to_end()
    t = time.perf_counter()
    est = ws.estimate()
    est_seconds = time.perf_counter() - t
    _, res = ws.build_run(repeats=repeats)
    measured = float(res.tvm_ms)
    return {"model": spec, "pipeline": pipeline, "estimated_ms": est["estimated_ms"],
            "measured_ms": measured, "ratio": est["estimated_ms"] / measured if measured else None,
            "kernels": len(est["kernels"]), "not_estimated": len(est["not_estimated"]),
            "timed": est["measured"], "from_cache": est["cached"], "estimate_seconds": est_seconds,
            "reliable": res.reliable, "reason": res.reason, "dims": est["dims"]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", action="append", default=None)
    p.add_argument("--pipeline", default="zero")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--fresh", action="store_true", help="time every kernel again (not from the cache)")
    p.add_argument("--json", metavar="PATH")
    args = p.parse_args(argv)

    from irviz.core.target import cpu_info
    from irviz.core.tuning.decision_cache import set_cache_enabled

    if args.fresh:
        set_cache_enabled(False)
    cpu = cpu_info()
    print(f"CPU: {cpu.model} ({cpu.mcpu}, {cpu.isa}), pipeline {args.pipeline}", flush=True)
    print(f"{'model':28} {'estimated ms':>13} {'measured ms':>12} {'ratio':>7}  kernels  note", flush=True)
    rows = []
    for spec in args.model or MODELS:
        try:
            r = measure(spec, args.pipeline, args.repeats)
        except Exception as exc:  # one model that fails does not stop the table
            print(f"{spec:28} failed: {str(exc).splitlines()[0][:200]}", flush=True)
            rows.append({"model": spec, "error": str(exc)[:500]})
            continue
        rows.append(r)
        note = [] if r["reliable"] else ["run unreliable (other processes had the cores)"]
        if r["not_estimated"]:
            note.append(f"{r['not_estimated']} kernels not estimated")
        if r["dims"]:
            note.append("at " + ", ".join(f"{k}={v}" for k, v in r["dims"].items()))
        print(f"{spec:28} {r['estimated_ms']:13.4f} {r['measured_ms']:12.4f} {r['ratio']:7.3f}  "
              f"{r['kernels']:7d}  {'; '.join(note)}", flush=True)
    ok = [r for r in rows if r.get("ratio")]
    within = [r for r in ok if 0.75 <= r["ratio"] <= 1.25]
    print(f"{len(within)} of {len(ok)} within 25%", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"cpu": cpu.as_dict(), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
