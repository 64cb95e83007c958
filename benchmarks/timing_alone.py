"""Does irviz's figure for each runtime agree with that runtime timed alone in a fresh process?

    python benchmarks/timing_alone.py [--models mlp,small_cnn,gpt,resnet18] [--pipeline zero] [--repeats 20]

For each model, three kinds of fresh process, `--rounds` times each, interleaved (figures are the
medians over rounds):
1. `irviz check MODEL --pipeline P --json -`: irviz's torch and TVM figures (medians);
2. torch eager alone: load the model, time it, nothing else (same thread count);
3. TVM alone: the same pipeline and build, time vm["main"], no torch run in between.
Prints each figure, the ratios irviz/alone (target: within 25% on a quiet machine), the CPU, and the
load average (a busy machine moves every figure; look at the min columns then).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

ALONE = r'''
import json, os, sys, warnings
warnings.filterwarnings("ignore")
import torch
from irviz.core.backend.timing import time_alone
from irviz.core.frontend.model_file import load_model
which, spec, pipeline, repeats = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
threads = int(os.environ.get("TVM_NUM_THREADS", os.cpu_count() or 1))
torch.set_num_threads(threads)
loaded = load_model(spec)
ex = tuple(loaded.example_inputs)
if which == "torch":
    with torch.no_grad():
        t = time_alone(lambda: loaded.module(*ex), repeats)
else:
    import tvm
    from tvm import relax
    from irviz.core.workspace import Workspace
    from irviz.core.passes import parse_pipeline
    from irviz.core.backend.build import build
    ws = Workspace()
    ws.open(spec, planned=parse_pipeline(pipeline))
    ws.run_to_end()
    fn = relax.VirtualMachine(build(ws.session.module()).executable, tvm.cpu())["main"]
    args = [tvm.runtime.tensor(x.numpy()) for x in ex if isinstance(x, torch.Tensor)]
    t = time_alone(lambda: fn(*args), repeats, warmup=1)
print(json.dumps(t.as_dict()))
'''


def _last_json(text: str) -> dict:
    return json.loads(text.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="mlp,small_cnn,gpt,resnet18")
    ap.add_argument("--pipeline", default="zero")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3,
                    help="fresh processes of each kind, interleaved (check, torch alone, TVM alone, again): "
                         "the machine's own speed drifts between processes, the median over rounds does less")
    args = ap.parse_args()
    env = dict(os.environ, TVM_NUM_THREADS=os.environ.get("TVM_NUM_THREADS", str(os.cpu_count() or 1)))
    from irviz.core.target import cpu_info

    info = cpu_info()
    print(f"CPU: {info.model}, {info.mcpu}, {info.isa} ({info.vector_lanes} float32 lanes); "
          f"threads {env['TVM_NUM_THREADS']}; pipeline {args.pipeline}; load average {os.getloadavg()[0]:.1f}")
    print(f"{'model':10} {'torch in check':>14} {'torch alone':>12} {'ratio':>6}   {'tvm in check':>12} "
          f"{'tvm alone':>10} {'ratio':>6}   (min ms: check / alone)")
    worst = 1.0
    for name in args.models.split(","):
        spec = f"sample:{name}"
        rounds = {"check_torch": [], "check_tvm": [], "torch": [], "tvm": []}
        failed = None
        for _ in range(max(1, args.rounds)):
            chk = subprocess.run([sys.executable, "-m", "irviz", "check", spec, "--pipeline", args.pipeline,
                                  "--json", "-", "--repeats", str(args.repeats)],
                                 capture_output=True, text=True, env=env)
            try:
                summary = json.loads(chk.stdout)
                rounds["check_torch"].append(summary["timing"]["torch"])
                rounds["check_tvm"].append(summary["timing"]["tvm"])
            except (ValueError, KeyError):
                failed = chk.stderr.strip().splitlines()[-1:]
                break
            for which in ("torch", "tvm"):
                p = subprocess.run([sys.executable, "-c", ALONE, which, spec, args.pipeline, str(args.repeats)],
                                   capture_output=True, text=True, env=env)
                rounds[which].append(_last_json(p.stdout))
        if failed is not None:
            print(f"{name:10} check failed: {failed}")
            continue
        med = lambda xs, k: statistics.median(x[k] for x in xs)
        t = {k: med(rounds["check_torch"], k) for k in ("median_ms", "min_ms")}
        v = {k: med(rounds["check_tvm"], k) for k in ("median_ms", "min_ms")}
        alone = {w: {k: med(rounds[w], k) for k in ("median_ms", "min_ms")} for w in ("torch", "tvm")}
        rt = t["median_ms"] / alone["torch"]["median_ms"] if t and alone["torch"] else float("nan")
        rv = v["median_ms"] / alone["tvm"]["median_ms"] if alone["tvm"] else float("nan")
        worst = max(worst, rt, 1 / rt, rv, 1 / rv)
        print(f"{name:10} {t['median_ms']:14.3f} {alone['torch']['median_ms']:12.3f} {rt:6.2f}   "
              f"{v['median_ms']:12.3f} {alone['tvm']['median_ms']:10.3f} {rv:6.2f}   "
              f"({t['min_ms']:.3f}/{alone['torch']['min_ms']:.3f}, {v['min_ms']:.3f}/{alone['tvm']['min_ms']:.3f})",
              flush=True)
    print(f"worst disagreement: {worst:.2f}x (target: within 1.25x on a quiet machine); "
          f"load average after {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
