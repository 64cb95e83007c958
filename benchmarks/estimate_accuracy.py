"""Estimated latency (each distinct kernel timed alone, times its calls) against the measured run.

For each model: open it with its weights, apply PIPELINE, then ROUNDS times, back to back in one
process: estimate the last step (Workspace.estimate; `--fresh` times every kernel again each round
rather than reading this CPU's cached figures) and build and run it (Workspace.build_run, median of
REPEATS). Prints per round estimated, measured (median and min), their ratio, the load average and
the share of the CPU other processes took while the run was timed; then the median ratio per
model. Aim: within 25%. With `--threads 1` it also times the run in CPU time (cpu_ms), which a
busy machine does not inflate: the ratio to compare on a shared machine.

`--no-weights-estimate` estimates the model opened without its weights instead (what a user who
cannot run it gets: the weights are parameters, so kernels a build with weights folds away, such as
a weight's transpose, are timed and counted) and compares it with the run of the model with them.

    nice -n 10 python benchmarks/estimate_accuracy.py [--model sample:resnet18 ...]
        [--pipeline zero] [--repeats 10] [--rounds 3] [--fresh] [--no-weights-estimate]
        [--threads 1] [--json out.json]

Full-size models: --model sample:llama3_8b_1layer (one Llama-3-8B layer at full width, 4.7 GB of
weights; under `zero` or `default_build` its unscheduled kernels take minutes a run, so use a
scheduled pipeline: --pipeline fast-cpu or tir-cpu), --model benchmarks/real_size/bert_base.py,
--model benchmarks/real_size/gpt2_small.py.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
warnings.filterwarnings("ignore")

MODELS = ["sample:mlp", "sample:small_cnn", "sample:dynamic_mlp", "sample:resnet18", "sample:hf_llama"]


def _open(spec: str, pipeline: str, no_weights: bool = False):
    from irviz.core.passes import parse_pipeline
    from irviz.core.workspace import Workspace

    ws = Workspace(log=lambda line: None)
    ws.open(spec, planned=parse_pipeline(pipeline), no_weights=no_weights)
    ws.run_to_end()
    return ws


def cpu_ms(ws, repeats: int) -> float:
    """Median CPU time of main's run on this thread (time.thread_time), built from the last step.
    With one thread (--threads 1) every kernel runs on the calling thread, so this is the run's
    time without what the scheduler gave other processes: on a machine at load 12 a 75 ms run read
    455 ms at best in wall time, each call preempted many times, while kernels of a millisecond,
    each timed alone, mostly ran within a time slice."""
    import tvm
    from tvm import relax

    built = ws.build_step(ws.step_at())
    fn = relax.VirtualMachine(built.executable, tvm.cpu())["main"]
    args = [tvm.runtime.tensor(x.detach().cpu().numpy()) for x in ws.loaded.example_inputs]
    fn(*args)
    times = []
    for _ in range(max(3, repeats)):
        t = time.thread_time()
        fn(*args)
        times.append(time.thread_time() - t)
    return statistics.median(times) * 1e3


def measure(spec: str, pipeline: str, repeats: int, rounds: int, fresh: bool, no_weights_estimate: bool,
            show=print, single_thread: bool = False) -> dict:
    ws = _open(spec, pipeline)
    est_ws = _open(spec, pipeline, no_weights=True) if no_weights_estimate else ws
    out = {"model": spec, "pipeline": pipeline, "estimate_from": "no weights" if no_weights_estimate else "weights",
           "rounds": []}
    for k in range(rounds):
        t = time.perf_counter()
        est = est_ws.estimate(fresh=fresh)
        est_seconds = time.perf_counter() - t
        _, res = ws.build_run(repeats=repeats)
        timing = res.tvm_timing or {}
        measured = float(res.tvm_ms)
        cpu = cpu_ms(ws, repeats) if single_thread else None
        r = {"estimated_ms": est["estimated_ms"], "measured_ms": measured, "cpu_ms": cpu,
             "cpu_ratio": est["estimated_ms"] / cpu if cpu else None, "folded": len(est.get("folded") or []),
             "measured_min_ms": timing.get("min_ms"), "ratio": est["estimated_ms"] / measured if measured else None,
             "load": os.getloadavg()[0], "others": timing.get("others"), "reliable": res.reliable,
             "kernels": len(est["kernels"]), "sites": est["sites"], "not_estimated": len(est["not_estimated"]),
             "timed": est["measured"], "from_cache": est["cached"], "estimate_seconds": est_seconds,
             "dims": est["dims"], "top": [(x["name"], x["calls"], round(x["total_ms"], 4)) for x in est["kernels"][:5]]}
        out["rounds"].append(r)
        show(_row(spec, pipeline, k, r))
    ratios = [r["ratio"] for r in out["rounds"] if r["ratio"]]
    out["ratio"] = statistics.median(ratios) if ratios else None
    cpu = [r["cpu_ratio"] for r in out["rounds"] if r["cpu_ratio"]]
    out["cpu_ratio"] = statistics.median(cpu) if cpu else None
    out["cpu_ms"] = statistics.median(r["cpu_ms"] for r in out["rounds"]) if cpu else None
    out["estimated_ms"] = statistics.median(r["estimated_ms"] for r in out["rounds"])
    out["measured_ms"] = statistics.median(r["measured_ms"] for r in out["rounds"])
    return out


def _row(spec, pipeline, k, r) -> str:
    note = [] if r["reliable"] else ["run unreliable"]
    if r["not_estimated"]:
        note.append(f"{r['not_estimated']} kernels not estimated")
    if r["folded"]:
        note.append(f"{r['folded']} kernels on weights alone left out (folded with weights)")
    if r["dims"]:
        note.append("at " + ", ".join(f"{a}={b}" for a, b in r["dims"].items()))
    others = f"{r['others']:.2f}" if r["others"] is not None else "?"
    mn = r["measured_min_ms"] if r["measured_min_ms"] is not None else float("nan")
    return (f"{spec[-30:]:30} {pipeline:10} {k:2d} {r['estimated_ms']:12.4f} {r['measured_ms']:12.4f} "
            f"{mn:10.4f} {r['ratio']:6.3f} {_num(r['cpu_ms'], 10, 4)} {_num(r['cpu_ratio'], 6, 3)} "
            f"{r['load']:5.1f} {others:>6} {r['kernels']:4d}/{r['sites']:<5d} " + "; ".join(note))


def _num(x, width, digits) -> str:
    return f"{x:{width}.{digits}f}" if x is not None else f"{'-':>{width}}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", action="append", default=None)
    p.add_argument("--pipeline", action="append", default=None, help="one or more (default: zero)")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--rounds", type=int, default=1, help="estimate and run this many times, back to back")
    p.add_argument("--fresh", action="store_true", help="time every kernel again (not from the cache)")
    p.add_argument("--no-weights-estimate", action="store_true",
                   help="estimate the model opened without its weights (measure it with them)")
    p.add_argument("--threads", type=int, default=None,
                   help="TVM's and torch's threads (default: one per core). On a busy machine 1 keeps a "
                        "parallel kernel from waiting a time slice for a descheduled worker at each call")
    p.add_argument("--json", metavar="PATH")
    args = p.parse_args(argv)
    if args.threads:  # before TVM's pool starts
        os.environ["TVM_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = str(args.threads)
        import torch

        torch.set_num_threads(args.threads)

    from irviz.core.backend.run import tvm_threads
    from irviz.core.target import cpu_info

    cpu = cpu_info()
    print(f"CPU: {cpu.model} ({cpu.mcpu}, {cpu.isa}), {os.cpu_count()} cores, {tvm_threads()} TVM threads, "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    print(f"{'model':30} {'pipeline':10} {'#':>2} {'estimated ms':>12} {'measured ms':>12} {'min ms':>10} "
          f"{'ratio':>6} {'cpu ms':>10} {'ratio':>6} {'load':>5} {'others':>6} kernels/calls", flush=True)
    rows = []
    for pipeline in args.pipeline or ["zero"]:
        for spec in args.model or MODELS:
            try:
                r = measure(spec, pipeline, args.repeats, args.rounds, args.fresh, args.no_weights_estimate,
                            show=lambda line: print(line, flush=True), single_thread=tvm_threads() == 1)
            except Exception as exc:  # one model that fails does not stop the table
                print(f"{spec[-30:]:30} {pipeline:10} failed: {str(exc).splitlines()[0][:200]}", flush=True)
                rows.append({"model": spec, "pipeline": pipeline, "error": str(exc)[:500]})
                continue
            rows.append(r)
    ok = [r for r in rows if r.get("ratio")]
    print("\nmedian over rounds:", flush=True)
    for r in ok:
        cpu_text = (f"  CPU time {r['cpu_ms']:10.4f} ms  ratio {r['cpu_ratio']:.3f}" if r.get("cpu_ratio") else "")
        print(f"{r['model'][-30:]:30} {r['pipeline']:10} estimated {r['estimated_ms']:10.4f} ms  measured "
              f"{r['measured_ms']:10.4f} ms  ratio {r['ratio']:.3f}{cpu_text}", flush=True)
    within = [r for r in ok if 0.75 <= r["ratio"] <= 1.25]
    print(f"{len(within)} of {len(ok)} within 25% of the measured wall time", flush=True)
    cpu_ok = [r for r in ok if r.get("cpu_ratio")]
    if cpu_ok:
        within = [r for r in cpu_ok if 0.75 <= r["cpu_ratio"] <= 1.25]
        print(f"{len(within)} of {len(cpu_ok)} within 25% of the measured CPU time", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"cpu": dataclasses.asdict(cpu), "rows": rows}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
