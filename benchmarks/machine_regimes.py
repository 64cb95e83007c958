"""Whether this machine's speed changes under a benchmark, and with what: every half second, for
``--seconds``, the FMA peak and the triad bandwidth (``machine_peak``'s kernels), one model built
with fast-cpu and the same model in torch eager, each timed alone. Then the samples split at the
median TVM time, with each half's medians side by side.

    python benchmarks/machine_regimes.py [--seconds 120] [--model benchmarks/real_size/mobilenet_v2.py]

On the 2-vCPU AMD EPYC VM the figures in README.md come from, one 4-minute watch saw MobileNet-V2
switch between about 4.3 ms (eager 9.5) and 6.8 ms (eager 12) several times, for tens of
seconds each time. The FMA peak stayed at ~530 GFLOP/s throughout, and the triad bandwidth was *higher* in the
slow periods (100-140 GB/s against 35-90). That is what the two vCPUs placed on cores that do not
share a last-level cache would give, against cores that do: more memory channels, but the
activations the two threads share crossing between caches. That reading is not proven. A ratio
from one interleaved run holds across the periods better than a time does. A watch that stays in
one period shows two similar halves.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--model", default=os.path.join(os.path.dirname(__file__), "real_size", "mobilenet_v2.py"))
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    os.environ["TVM_NUM_THREADS"] = str(args.threads)
    warnings.filterwarnings("ignore")

    import torch
    import tvm
    from tvm import relax

    from irviz.core.backend import build as build_mod
    from irviz.core.backend import machine_peak as mp
    from irviz.core.backend.timing import time_alone
    from irviz.core.frontend.capture import capture
    from irviz.core.frontend.importer import import_model
    from irviz.core.frontend.model_file import load_model
    from irviz.core.passes import get_pipeline
    from irviz.core.session import Session
    from irviz.core.target import cpu_info

    torch.set_num_threads(args.threads)
    loaded = load_model(args.model)
    captured = capture(loaded)
    session = Session(import_model(captured), captured)
    session.set_pipeline(get_pipeline("fast-cpu"))
    if session.run_to_end() is None:
        raise session.error
    main_fn = relax.VirtualMachine(build_mod.build(session.module()).executable, tvm.cpu())["main"]
    tvm_in = [tvm.runtime.tensor(x.detach().numpy()) for x in loaded.example_inputs if isinstance(x, torch.Tensor)]

    info = cpu_info()
    lanes, iters, n = info.vector_lanes, 100_000, 1 << 22
    fma = mp.fma_probe(args.threads, iters, lanes)
    triad = mp.triad_probe(args.threads, n, lanes)

    print(f"CPU: {info.model}; {info.isa}, {lanes} float32 lanes; {args.threads} threads; model {loaded.name}")
    print(f"{'time':8} {'FMA GFLOP/s':>11} {'triad GB/s':>10} {'tvm ms':>7} {'eager ms':>8}")
    rows = []
    end = time.time() + args.seconds
    with torch.no_grad():
        while time.time() < end:
            gflops, gbs = fma(5), triad(5)
            tvm_ms = time_alone(lambda: main_fn(*tvm_in), 20).median_ms
            eager_ms = time_alone(lambda: loaded.module(*loaded.example_inputs), 10).median_ms
            rows.append((gflops, gbs, tvm_ms, eager_ms))
            print(f"{time.strftime('%H:%M:%S')} {gflops:11.0f} {gbs:10.1f} {tvm_ms:7.2f} {eager_ms:8.2f}", flush=True)
    if len(rows) < 4:
        print("too few samples to split; run longer")
        return 1
    cut = statistics.median(r[2] for r in rows)
    print(f"\n{len(rows)} samples, split at the median TVM time {cut:.2f} ms:")
    for name, part in (("faster half", [r for r in rows if r[2] <= cut]), ("slower half", [r for r in rows if r[2] > cut])):
        med = [statistics.median(r[i] for r in part) for i in range(4)]
        print(f"  {name}: FMA {med[0]:.0f} GFLOP/s, triad {med[1]:.1f} GB/s, tvm {med[2]:.2f} ms, "
              f"eager {med[3]:.2f} ms, tvm/eager {med[2] / med[3]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
