"""`irviz compare`: two pipelines on one model, steps aligned by pass name, their last steps built
and run; compare.html and compare.json (the work is in core.compare)."""
from __future__ import annotations

import argparse
import sys

from irviz.cli.common import Failure, add_model_arguments, add_target_argument, open_workspace

# irviz.core modules that load torch or TVM are imported inside the functions (see common).

COMPARE_HELP = ("run two pipelines on the same model, steps aligned by pass name; write compare.html "
                "and compare.json")


def add_compare_arguments(p: argparse.ArgumentParser) -> None:
    add_model_arguments(p, pipelines=2)
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--no-build", action="store_true", help="skip building and running the last steps")
    p.add_argument("--repeats", type=int, default=10, help="timed runs of each pipeline's last step")
    add_target_argument(p, help_more="; both pipelines' passes run under T and their last steps are "
                                     "built for it, and run only where its device is here")


def run_compare(args) -> int:
    """Open MODEL with pipeline A (its session is A), run B on the same import, write the pages."""
    # lazy: these load TVM, which `irviz MODEL` must not
    from irviz.core import pipeline_compare as compare_mod
    from irviz.core.export.compare_report import write_compare

    failure = Failure(args.verbose)
    pipelines = args.pipeline or []
    if len(pipelines) != 2:
        print(f"irviz: compare needs exactly two pipelines, got {len(pipelines)}: "
              "give --pipeline A --pipeline B", file=sys.stderr)
        return 2
    args.pipeline = pipelines[0]
    # B is parsed with the pass files loaded (it may name their passes), before the model loads
    ws = open_workspace(args, failure, print, other_pipelines=pipelines[1:])
    if ws is None or ws.imported is None:
        return 1
    try:
        cmp = compare_mod.compare_pipelines(ws, pipelines, progress=lambda text, *_a, **_k: print(text))
        for k, err in enumerate(cmp.errors):
            if err is not None and not (k == 0 and failure.stage):  # A's was reported by the open
                failure.record("pipeline", err)
        for i, j in cmp.aligned:
            a = f"{i:2d} {cmp.steps[0][i].pass_name}" if i is not None else ""
            b = f"{j:2d} {cmp.steps[1][j].pass_name}" if j is not None else ""
            print(f"  {a:32} {b}")
        if not args.no_build:
            for k, r in enumerate(compare_mod.measure(ws, cmp, repeats=args.repeats)):
                if r["error"]:
                    print(f"{'AB'[k]}: {r['error']}", file=sys.stderr)
                    failure.stage = failure.stage or "build"
                elif r.get("not_run"):
                    print(f"{'AB'[k]}: built in {r['build_seconds']:.2f} s; {r['not_run']}")
                elif r.get("structure_only"):
                    print(f"{'AB'[k]}: built in {r['build_seconds']:.2f} s (structure only: no "
                          "weights to run with)")
                else:
                    print(f"{'AB'[k]}: tvm {r['tvm_ms']:.3f} ms  max abs error {r['max_abs_error']:.3g}  "
                          f"{r['kernels']} kernels  built in {r['build_seconds']:.2f} s")
        html_path, json_path = write_compare(cmp, args.out, ws.model_name or "model")
    except Exception as exc:
        failure.record(ws.stage or "compare", exc)
        return 1
    print(f"wrote {html_path}\nwrote {json_path}")
    return 0 if failure.stage is None else 1
