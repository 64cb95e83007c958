"""How long the tool itself takes to export a whole trace and to open an exported step again.

1. `irviz export MODEL --pipeline P` as a user runs it: a fresh process, wall time and CPU time,
   with the number of bindings in main and of functions in the last step (every step is parsed
   back during the export, so `loadable` is what was seen).
2. Opening the last exported step file in a fresh process (`Workspace.open`), as the app's engine
   does, and `python step_NN.py` on its own.

Figures only: the machine's load is printed beside them, since a busy machine stretches wall time.

    python benchmarks/export_speed.py [--model sample:hf_llama] [--pipeline zero]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPEN = ("import sys, time\nt = time.perf_counter()\nfrom irviz.core.workspace import Workspace\n"
        "ws = Workspace()\nws.open(sys.argv[1])\nprint(f'{time.perf_counter() - t:.2f}')\n")


def timed(cmd: list[str]) -> tuple[float, float, str]:
    """(wall s, CPU s of the child, its stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": REPO})
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{out.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), out.stdout


def _size(step_file: str) -> tuple[int, int]:
    """(bindings in main, prim_funcs) read off a step file's script."""
    text = open(step_file, encoding="utf-8").read()
    body = text.split("def main(", 1)[1] if "def main(" in text else ""
    bindings = sum(1 for line in body.splitlines() if " = R." in line or ": R.Tensor" in line and " = " in line)
    return bindings, text.count("@T.prim_func")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="sample:hf_llama")
    ap.add_argument("--pipeline", default="zero")
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as out:
        wall, cpu, _ = timed([sys.executable, "-m", "irviz", "export", args.model, "--pipeline",
                              args.pipeline, "--out", out])
        steps = json.load(open(os.path.join(out, "steps.json")))["steps"]
        last = steps[-1]
        bindings, funcs = _size(os.path.join(out, steps[0]["file"]))
        print(f"export {args.model} --pipeline {args.pipeline}: {wall:.1f} s wall, {cpu:.1f} s CPU; "
              f"{len(steps)} steps, all loadable: {all(s.get('loadable') for s in steps)}; "
              f"imported main: {bindings} bindings; last step: {_size(os.path.join(out, last['file']))[1]} prim_funcs")
        path = os.path.join(out, last["file"])
        wall, cpu, said = timed([sys.executable, "-c", OPEN, path])
        print(f"open {last['file']} (Workspace.open, fresh process): {wall:.1f} s wall, {cpu:.1f} s CPU "
              f"(open itself {said.strip()} s)")
        wall, cpu, _ = timed([sys.executable, path])
        print(f"python {last['file']}: {wall:.1f} s wall, {cpu:.1f} s CPU")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
