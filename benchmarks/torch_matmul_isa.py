"""Torch's own matmuls with every ISA it finds, and limited to AVX2 (as ``cpu_speed.py --isa avx2``
limits it), timed alone in a process each: whether torch gains from AVX-512 on this CPU, which is
what the AVX-512 column of cpu_speed.py's ratios rests on. Prints ms and GFLOP/s per shape."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from cpu_speed import AVX2_ENV  # this script's folder: what --isa avx2 sets

SHAPES = [(128, 768, 3072), (128, 3072, 768), (128, 768, 768), (197, 768, 3072)]


def _time(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)
    for m, k, n in SHAPES:
        a, w, b = torch.randn(m, k), torch.randn(n, k), torch.randn(n)
        for _ in range(5):
            torch.nn.functional.linear(a, w, b)
        t, runs = time.perf_counter(), 0
        while time.perf_counter() - t < 0.5:
            torch.nn.functional.linear(a, w, b)
            runs += 1
        ms = (time.perf_counter() - t) / runs * 1e3
        print(f"  {m}x{k}x{n:<5} {ms:7.3f} ms {2 * m * k * n / ms / 1e6:6.0f} GFLOP/s", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _time(args.threads)
        return 0
    for label, extra in (("every ISA torch finds", {}), ("AVX2 only", AVX2_ENV)):
        print(f"torch.nn.functional.linear, {args.threads} threads, {label}:", flush=True)
        subprocess.run([sys.executable, __file__, "--child", "--threads", str(args.threads)],
                       env={**os.environ, **extra}, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
