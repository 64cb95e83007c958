"""Bisect over default_build on ResNet-18 with a wrong pass inserted (target: at most 60 s).

    python benchmarks/bisect_speed.py [--model sample:resnet18]

WrongAddToSubtract (tests/core/data/bisect_passes.py) goes after DispatchSortScan, before
LegalizeOps (it rewrites a high-level R.add). Prints the seconds of the bisect itself (the steps
it built and ran) and of opening + applying the pipeline.
"""
import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="sample:resnet18")
    args = ap.parse_args()
    from irviz.core import passes
    from irviz.core.backend.step_bisect import bisect, reference_for
    from irviz.core.backend.build import DEFAULT_BUILD_STEPS
    from irviz.core.workspace import Workspace

    passes.load_pass_file(ROOT / "tests" / "core" / "data" / "bisect_passes.py")
    names = list(DEFAULT_BUILD_STEPS)
    names.insert(names.index("LegalizeOps"), "WrongAddToSubtract")
    t0 = time.perf_counter()
    ws = Workspace()
    ws.open(args.model, planned=passes.parse_pipeline(",".join(names)))
    ws.run_to_end()
    t1 = time.perf_counter()
    result = bisect(ws.session, reference_for(ws))
    t2 = time.perf_counter()
    for c in result.checked:
        print(f"  step {c.index:2d} {c.pass_name:24} {'ok ' if c.ok else 'BAD'} {c.seconds:6.2f} s")
    fb = result.first_bad
    print(f"model {args.model}, {len(ws.session.steps) - 1} passes, {len(result.candidates)} changed the module")
    print(f"first bad: {fb.index} {fb.pass_name} ({fb.stage})" if fb else "first bad: none")
    print(f"open + pipeline: {t1 - t0:.1f} s")
    print(f"bisect: {t2 - t1:.1f} s over {len(result.checked)} builds (target <= 60 s)")
    return 0 if fb is not None and fb.pass_name == "WrongAddToSubtract" else 1


if __name__ == "__main__":
    raise SystemExit(main())
