"""How long the tool itself takes to export a whole trace and to open an exported step again.

1. `irviz export MODEL --pipeline P` as a user runs it: a fresh process, wall time and CPU time,
   with the number of bindings in main and of functions in the last step (every step is parsed
   back during the export, so `loadable` is what was seen).
2. The app's Export… alone, in one fresh process: the model opened and every pass applied first
   (timed apart), then the trace exported with the step files run back in forked children on the
   usable cores, then again with every check in the process itself (`--workers 0` shows only
   that one), as before the forked checks.
3. Opening the last exported step file in a fresh process (`Workspace.open`), as the app's engine
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
# the app's engine has TVM imported before the user opens anything (a spare engine warms up)
OPEN = ("import sys, time\nt = time.perf_counter()\nimport tvm\nfrom irviz.core.workspace import Workspace\n"
        "t1 = time.perf_counter()\nws = Workspace()\nws.open(sys.argv[1])\n"
        "print(f'{t1 - t:.2f} {time.perf_counter() - t1:.2f}')\n")


PHASES = """import sys, tempfile, time
from irviz.core import passes
from irviz.core.export import roundtrip_pool
from irviz.core.workspace import Workspace
model, pipeline, workers = sys.argv[1], sys.argv[2], [int(w) for w in sys.argv[3].split(",")]
t = time.perf_counter()
ws = Workspace()
ws.open(model, planned=passes.parse_pipeline(pipeline))
ws.run_to_end()
print(f"open + passes: {time.perf_counter() - t:.2f} s, {len(ws.session.steps)} steps")
for n in workers:
    real = roundtrip_pool.usable_cores
    roundtrip_pool.usable_cores = lambda n=n: n
    with tempfile.TemporaryDirectory() as out:
        t = time.perf_counter()
        ws.export(out)
        print(f"Export... with {n or 'no'} forked checkers ({real()} usable cores): "
              f"{time.perf_counter() - t:.2f} s")
    roundtrip_pool.usable_cores = real
"""


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
    ap.add_argument("--workers", default="2,0",
                    help="forked checkers for the Export... phase runs, comma-separated")
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    _, _, said = timed([sys.executable, "-c", PHASES, args.model, args.pipeline, args.workers])
    print(said.rstrip())
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
        imports, opening = said.split()
        print(f"open {last['file']} (Workspace.open, fresh process): {wall:.1f} s wall, {cpu:.1f} s CPU "
              f"(importing TVM and irviz {imports} s, then Workspace.open {opening} s)")
        wall, cpu, _ = timed([sys.executable, path])
        print(f"python {last['file']}: {wall:.1f} s wall, {cpu:.1f} s CPU")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
