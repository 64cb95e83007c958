"""Seconds to compare intermediates on ResNet-18 at the last step of default_build (target ≤ 10 s).

    nice -n 10 python benchmarks/intermediates_speed.py [sample:resnet18]

Prints the pipeline time (not counted), then the compare: torch FX run, build, instrumented run,
comparison, and the total; and how many FX nodes were compared.
"""
import sys
import time

from irviz.core.passes import get_pipeline
from irviz.core.workspace import Workspace


def main(spec: str = "sample:resnet18") -> None:
    ws = Workspace()
    t = time.perf_counter()
    ws.open(spec, planned=get_pipeline("default_build"))
    ws.run_to_end()
    print(f"open + default_build steps: {time.perf_counter() - t:.2f} s (not counted)")
    t = time.perf_counter()
    res = ws.compare_intermediates()
    total = time.perf_counter() - t
    compared = [n for n in res.nodes if n.status != "unmatched"]
    print("  ".join(f"{k} {v:.2f} s" for k, v in res.seconds.items()))
    print(f"compare intermediates at step {res.step} ({res.pass_name}, {res.method}): {total:.2f} s; "
          f"{len(compared)} of {len(res.nodes)} FX nodes compared; first divergence: {res.first_divergence}")


if __name__ == "__main__":
    main(*sys.argv[1:])
