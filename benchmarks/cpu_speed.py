"""TVM vs torch eager latency per model and pipeline, timed interleaved in one run.

    python benchmarks/cpu_speed.py [--models resnet18,mlp,gpt,small_cnn,hf_bert]
                                   [--pipelines fast-cpu,tir-cpu] [--repeats 20] [--threads N] [--kernels K]

For every model × pipeline: step the pipeline through an irviz Session, build, then time vm["main"]
and torch eager alternately (median of --repeats runs each, same thread count for both) and print
the ratio TVM/torch. Targets: fast-cpu ≤ 1.0× everywhere, tir-cpu ≤ 3× on ResNet-18.
`zero` (unscheduled TensorIR) can be added to --pipelines; ResNet-18 then takes ~1.5 s per run.

The machine is shared: the load average is printed before and after, and a ratio only means something
from one run (TVM and torch timed alternately). With --threads 2 on a loaded 2-core machine every
parallel launch can wait for a descheduled thread; --threads 1 shows the kernels' own speed.
--kernels K prints the K slowest kernels (VM instrument, 3 runs) under each row.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings


def _load() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "?"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet18,mlp,gpt,small_cnn,hf_bert")
    ap.add_argument("--pipelines", default="fast-cpu,tir-cpu")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--kernels", type=int, default=0, help="print the K slowest kernels of each build")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                    help="threads for both TVM's runtime and torch (default: all cores)")
    args = ap.parse_args()
    # TVM reads this when its thread pool starts, so it has to be set before the first run.
    os.environ["TVM_NUM_THREADS"] = str(args.threads)
    warnings.filterwarnings("ignore")

    import torch

    from irviz.core.backend import build as build_mod
    from irviz.core.backend.run import run_and_compare
    from irviz.core.frontend.capture import capture
    from irviz.core.frontend.importer import import_model
    from irviz.core.frontend.model_file import load_model
    from irviz.core.passes import get_pipeline
    from irviz.core.session import Session

    torch.set_num_threads(args.threads)
    rows = []
    print(f"threads: {args.threads} (TVM_NUM_THREADS and torch.set_num_threads); "
          f"median of {args.repeats} interleaved runs each; load average {_load()}")
    if args.threads > 1 and os.getloadavg()[0] > 1.0:
        print("note: other jobs are running; with more than one thread, torch's and TVM's thread pools "
              "wait for descheduled workers, so the figures swing widely: compare with --threads 1")
    print()
    print(f"{'model':10} {'pipeline':10} {'torch ms':>9} {'tvm ms':>10} {'tvm/torch':>10} "
          f"{'max err':>9} {'build s':>8}")
    for name in args.models.split(","):
        try:
            loaded = load_model(f"sample:{name}")
            captured = capture(loaded)
        except Exception as exc:  # e.g. hf_bert without the hf extra
            print(f"{name:10} skipped: {getattr(exc, 'message', exc)}")
            continue
        for pipeline in args.pipelines.split(","):
            try:
                session = Session(import_model(captured), captured)
                session.set_pipeline(get_pipeline(pipeline))
                session.run_to_end()
                if session.error is not None:
                    raise session.error
                t = time.perf_counter()
                built = build_mod.build(session.module())
                build_s = time.perf_counter() - t
                res = run_and_compare(built, loaded, repeats=args.repeats, match_threads=True)
            except Exception as exc:
                print(f"{name:10} {pipeline:10} failed: {getattr(exc, 'message', exc)}"[:200])
                continue
            ratio = res.tvm_ms / res.torch_ms
            rows.append((name, pipeline, ratio))
            print(f"{name:10} {pipeline:10} {res.torch_ms:9.3f} {res.tvm_ms:10.3f} {ratio:9.2f}× "
                  f"{res.max_abs_error:9.2e} {build_s:8.1f}" + ("" if res.allclose else "  WRONG"),
                  flush=True)
            for k in sorted(res.kernels, key=lambda k: -k.ms)[:args.kernels]:
                print(f"{'':22}{k.ms / max(k.calls, 1):8.3f} ms × {k.calls:<3} {k.name}")
    print(f"\nload average after: {_load()}")
    for pipeline, target in (("fast-cpu", 1.0), ("tir-cpu", 3.0)):
        got = [(m, r) for m, p, r in rows if p == pipeline]
        if got:
            worst = max(got, key=lambda x: x[1])
            scope = "every model" if pipeline == "fast-cpu" else "resnet18"
            print(f"{pipeline}: worst {worst[1]:.2f}× ({worst[0]}); target ≤ {target}× on {scope}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
