"""FoldConstant on small transformers: irviz's step (numpy for small injective calls) against TVM's
pass (one LLVM build per distinct function), after LegalizeOps, on the same module.

    python benchmarks/fold_constant_speed.py [--types longformer,led]

Each type is built as benchmarks/transformers_corpus.py builds it (hidden size 32, 2 layers, fixed
seed). Prints seconds for each, the calls numpy and LLVM folded, and whether the two modules are
structurally equal (constants compared bit for bit).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

MODEL_FILE = """
import os, sys
sys.path.insert(0, {here!r})
import transformers_corpus


def get_model():
    return transformers_corpus.build_case(os.environ["IRVIZ_FOLD_TYPE"])
"""


def measure(model_type: str, path: str) -> str:
    import tvm_ffi
    from tvm import relax

    from irviz.core.passes.fold_constant import FoldStats, fold_constant
    from irviz.core.workspace import Workspace

    os.environ["IRVIZ_FOLD_TYPE"] = model_type
    ws = Workspace()
    ws.open(path, planned=["LegalizeOps", "AnnotateTIROpPattern"])
    ws.run_to_end()
    mod = ws.session.steps[-1].mod
    t = time.perf_counter()
    ours = fold_constant()(mod)
    t_ours = time.perf_counter() - t
    t = time.perf_counter()
    ref = relax.transform.FoldConstant()(mod)
    t_tvm = time.perf_counter() - t
    same = bool(tvm_ffi.structural_equal(ours, ref))
    return (f"| {model_type} | {t_ours:.2f} | {t_tvm:.2f} | {t_tvm / t_ours:.0f}x | "
            f"{FoldStats.numpy_folds} | {FoldStats.llvm_folds} | {same} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--types", default="longformer,led")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fold_model.py"
        path.write_text(MODEL_FILE.format(here=str(HERE)))
        print("| type | irviz FoldConstant s | TVM FoldConstant s | ratio | numpy folds | LLVM folds "
              "| same module |")
        print("|---|---|---|---|---|---|---|")
        for model_type in args.types.split(","):
            print(measure(model_type.strip(), str(path)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
