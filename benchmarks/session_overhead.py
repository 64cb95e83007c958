"""What irviz's bookkeeping costs on top of doing the same compilation with bare TVM.

For each model, in one run and interleaved (repeat r runs bare, then irviz, so machine load hits
both alike):

(a) bare TVM: torch.export + run_decompositions, ``from_exported_program`` (no second
    decomposition), then each zero-pipeline pass applied directly, each under
    ``with target, PassContext(opt_level=3)`` (what ``passes.apply_pass`` uses);
(b) irviz: ``capture`` (export + decompositions + FxGraph) -> ``import_model`` (provenance)
    -> ``Session`` with ``set_pipeline(zero)`` + ``run_to_end()`` (a snapshot, per-function
    structural hashes and carried provenance per step) + ``Session.diff(i-1, i)`` (unified and
    side-by-side, i.e. what ``Session.diff`` computes, called apart to time each half) of every step.

Prints the median of each phase and the ratio irviz / bare (target: <= 1.3x).

    python benchmarks/session_overhead.py --models resnet18 gpt --repeats 3
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

warnings.filterwarnings("ignore")

import torch
import tvm
from tvm import relax
from tvm.relax.frontend.torch import from_exported_program

from irviz.core import passes
from irviz.core.views import module_diff as diff_mod
from irviz.core.frontend.capture import build_fx_graph, capture
from irviz.core.frontend.importer import import_model
from irviz.core.frontend.model_file import load_model
from irviz.core.session import Session
from irviz.core.tvm_compat import host_target

ZERO = [relax.transform.LegalizeOps, relax.transform.AnnotateTIROpPattern,
        relax.transform.FoldConstant, relax.transform.FuseOps, relax.transform.FuseTIR]


def bare(loaded, target) -> dict[str, float]:
    t0 = time.perf_counter()
    ep = torch.export.export(loaded.module, tuple(loaded.example_inputs),
                             dynamic_shapes=loaded.dynamic_shapes, strict=False)
    ep = ep.run_decompositions()
    t1 = time.perf_counter()
    mod = from_exported_program(ep, unwrap_unit_return_tuple=True, run_ep_decomposition=False)
    t2 = time.perf_counter()
    for make in ZERO:
        with target, tvm.transform.PassContext(opt_level=3):
            mod = make()(mod)
    t3 = time.perf_counter()
    return {"export": t1 - t0, "import": t2 - t1, "passes": t3 - t2, "extra": 0.0, "total": t3 - t0,
            "_functions": len(mod.functions)}


def irviz(loaded, target) -> dict[str, float]:
    t0 = time.perf_counter()
    cap = capture(loaded)
    t1 = time.perf_counter()
    imp = import_model(cap)
    t2 = time.perf_counter()
    s = Session(imp, cap, target=target)
    s.set_pipeline(passes.get_pipeline("zero"))
    last = s.run_to_end()
    if last is None:
        raise SystemExit(f"irviz session failed: {s.error.user_message() if s.error else '?'}")
    t3 = time.perf_counter()
    # Session.diff(i, j) is unified_diff + side_by_side of the two snapshots; called apart here
    # so the report can say which half costs what.
    diff_lines, t_unified, t_side = 0, 0.0, 0.0
    for i in range(1, len(s.steps)):
        a, b = s.module(i - 1), s.module(i)
        u0 = time.perf_counter()
        text = diff_mod.unified_diff(a, b)
        u1 = time.perf_counter()
        diff_mod.side_by_side(a, b)
        u2 = time.perf_counter()
        t_unified += u1 - u0
        t_side += u2 - u1
        diff_lines += text.count("\n")
    t4 = time.perf_counter()
    # not counted: how much of capture() is building the FxGraph view-model
    g0 = time.perf_counter()
    build_fx_graph(cap.exported)
    t_graph = time.perf_counter() - g0
    return {"export": t1 - t0, "import": t2 - t1, "passes": t3 - t2, "extra": t4 - t3, "total": t4 - t0,
            "_functions": len(s.module().functions), "_diff_lines": diff_lines,
            "_unified": t_unified, "_side": t_side, "_fxgraph": t_graph}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["resnet18", "gpt"],
                    help="sample names or model specs (default: resnet18 gpt)")
    ap.add_argument("--repeats", type=int, default=3, help="runs of each variant (median shown)")
    ap.add_argument("--warmup", type=int, default=1,
                    help="uncounted runs of each variant first (torch.export's first call is slow)")
    args = ap.parse_args(argv)
    target = host_target()
    print(f"tvm {tvm.__version__}, torch {torch.__version__}, torch threads {torch.get_num_threads()}, "
          f"repeats {args.repeats} (+{args.warmup} warm-up)")
    worst = 0.0
    for name in args.models:
        spec = name if (":" in name or name.endswith((".py", ".pt2"))) else f"sample:{name}"
        loaded = load_model(spec)
        for _ in range(args.warmup):
            bare(loaded, target)
            irviz(loaded, target)
        runs = {"bare": [], "irviz": []}
        for _ in range(args.repeats):
            runs["bare"].append(bare(loaded, target))
            runs["irviz"].append(irviz(loaded, target))
        med = {k: {p: statistics.median(r[p] for r in v) for p in ("export", "import", "passes",
                                                                   "extra", "total")}
               for k, v in runs.items()}
        assert runs["bare"][0]["_functions"] == runs["irviz"][0]["_functions"], "different results"
        print(f"\n{loaded.name}  ({runs['bare'][0]['_functions']} functions after zero, "
              f"{runs['irviz'][0]['_diff_lines']} diff lines)")
        print(f"  {'phase':28} {'bare s':>8} {'irviz s':>8} {'ratio':>6}")
        labels = {"export": "export + decompose", "import": "import", "passes": "zero pipeline",
                  "extra": "diff of every step", "total": "total"}
        for p, label in labels.items():
            b, i = med["bare"][p], med["irviz"][p]
            ratio = f"{i / b:5.2f}x" if b > 0 else "   -  "
            print(f"  {label:28} {b:8.2f} {i:8.2f} {ratio:>6}")
        detail = {k: statistics.median(r[k] for r in runs["irviz"]) for k in ("_fxgraph", "_unified", "_side")}
        print(f"  (irviz detail: FxGraph view-model {detail['_fxgraph']:.2f} s inside capture; diffs: "
              f"unified {detail['_unified']:.2f} s, side-by-side {detail['_side']:.2f} s)")
        ratio = med["irviz"]["total"] / med["bare"]["total"]
        worst = max(worst, ratio)
        print(f"  irviz / bare = {ratio:.2f}x  ({'within' if ratio <= 1.3 else 'OVER'} the 1.3x target); "
              f"without the side-by-side diffs {(med['irviz']['total'] - detail['_side']) / med['bare']['total']:.2f}x")
    return 0 if worst <= 1.3 else 1


if __name__ == "__main__":
    sys.exit(main())
