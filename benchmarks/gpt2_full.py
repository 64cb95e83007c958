"""Full-size GPT-2 (12 layers, 768 wide, vocab 50257, random weights): irviz vs bare TVM, per phase.

irviz:   capture (torch.export + run_decompositions + FxGraph) -> import_model (irviz converters,
         provenance) -> Session zero pipeline, one step at a time (snapshot, hashes, provenance)
         -> build (rest of default_build + tvm.compile).
bare:    torch.export -> relax.frontend.torch.from_exported_program (decomposes itself)
         -> each pass of relax.get_pipeline("zero") applied directly under
         `with target, PassContext(opt_level=3)` -> tvm.compile(mod, target).

Both use the same wrapper: forward(input_ids) -> logits with use_cache=False (with the cache,
bare TVM cannot import GPT-2 at all: the empty 1-D cat).  A bare phase that fails is printed
as FAILED with TVM's message (e.g. the build of a bool cumsum, which irviz's converter avoids).

    python benchmarks/gpt2_full.py [--seq 32] [--layers 12] [--run] [--irviz-first]

--run also runs the irviz build once against PyTorch (unscheduled TensorIR: slow).
Time to first paint in the app is measured by benchmarks/gui_startup.py, not here.
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
warnings.filterwarnings("ignore")

ZERO = ["LegalizeOps", "AnnotateTIROpPattern", "FoldConstant", "FuseOps", "FuseTIR"]


def make_model(layers: int, seq: int):
    import transformers

    from irviz.core.frontend import hf

    cfg = transformers.GPT2Config(n_layer=layers)  # defaults: 768 wide, 12 heads, vocab 50257
    model = hf.causal_lm(transformers.GPT2LMHeadModel, cfg)
    return model, (hf.token_ids(cfg.vocab_size, seq=seq),)


def get_model():
    """This file is also a model file: `python benchmarks/gui_startup.py --model benchmarks/gpt2_full.py`
    times the app's first paint of the FX and Relax graphs for full-size GPT-2."""
    import torch

    torch.manual_seed(0)
    return make_model(12, 32)


def irviz_times(model, inputs, run: bool) -> dict:
    from irviz.core import passes
    from irviz.core.backend.build import build
    from irviz.core.backend.run import run_and_compare
    from irviz.core.frontend.capture import capture
    from irviz.core.frontend.importer import import_model
    from irviz.core.frontend.model_file import LoadedModel
    from irviz.core.session import Session

    out = {}
    loaded = LoadedModel(module=model, example_inputs=inputs, spec="gpt2_full", name="gpt2_full")
    t = time.perf_counter()
    cap = capture(loaded)
    out["export"] = time.perf_counter() - t
    out["fx_nodes"] = len(cap.graph.nodes)
    from irviz.core.frontend.capture import build_fx_graph

    t = time.perf_counter()
    build_fx_graph(cap.exported)
    out["fx_view"] = time.perf_counter() - t
    t = time.perf_counter()
    imp = import_model(cap)
    out["import"] = time.perf_counter() - t
    s = Session(imp, cap)
    s.set_pipeline(passes.get_pipeline("zero"))
    while s.pipeline:
        name = s.pipeline[0].name
        t = time.perf_counter()
        step = s.step_forward()
        if step is None:
            raise RuntimeError(f"{name}: {s.error.user_message()}")
        out[name] = time.perf_counter() - t  # pass + snapshot bookkeeping (diff, provenance)
        out[name + ":pass"] = step.seconds  # the pass alone
    t = time.perf_counter()
    br = build(s.current.mod)
    out["build"] = time.perf_counter() - t
    if run:
        r = run_and_compare(br, loaded, repeats=1)
        out["run"] = f"allclose={r.allclose} max_abs={r.max_abs_error:.2e} tvm={r.tvm_ms:.0f} ms torch={r.torch_ms:.0f} ms"
    return out


def bare_times(model, inputs) -> dict:
    import torch
    import tvm
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program

    from irviz.core.tvm_compat import host_target

    out = {}
    target = host_target()
    t = time.perf_counter()
    ep = torch.export.export(model, inputs, strict=False)
    out["export"] = time.perf_counter() - t
    t = time.perf_counter()
    try:
        mod = from_exported_program(ep)  # runs ep.run_decompositions() itself
    except Exception as exc:
        out["import"] = f"FAILED after {time.perf_counter() - t:.1f} s: {_first(exc)}"
        return out
    out["import"] = time.perf_counter() - t
    for name in ZERO:
        t = time.perf_counter()
        with target, tvm.transform.PassContext(opt_level=3):
            mod = getattr(relax.transform, name)()(mod)
        out[name] = time.perf_counter() - t
    t = time.perf_counter()
    try:
        tvm.compile(mod, target)
        out["build"] = time.perf_counter() - t
    except Exception as exc:
        out["build"] = f"FAILED after {time.perf_counter() - t:.1f} s: {_first(exc)}"
    return out


def _first(exc) -> str:
    lines = [ln for ln in str(exc).splitlines() if ln.strip() and "TVM_BACKTRACE" not in ln]
    return (lines[-1] if lines else type(exc).__name__)[:160]


def _fmt(v) -> str:
    return f"{v:8.2f} s" if isinstance(v, float) else str(v)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--run", action="store_true", help="also run the irviz build and compare with torch")
    ap.add_argument("--irviz-first", action="store_true", help="run the irviz path before the bare one")
    args = ap.parse_args(argv)

    t = time.perf_counter()
    model, inputs = make_model(args.layers, args.seq)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"GPT-2: {args.layers} layers, 768 wide, {n_params / 1e6:.1f} M parameters, "
          f"tokens (1, {args.seq}); built in {time.perf_counter() - t:.1f} s", flush=True)

    if args.irviz_first:
        irv = irviz_times(model, inputs, args.run)
        bare = bare_times(model, inputs)
    else:
        bare = bare_times(model, inputs)
        irv = irviz_times(model, inputs, args.run)
    print(f"irviz: {irv.get('fx_nodes')} FX nodes", flush=True)

    rows = ["export", "import", *ZERO, "build"]
    print(f"\n{'phase':<22}{'irviz':>14}   {'(pass alone)':>12}   bare TVM")
    for r in rows:
        alone = irv.get(r + ":pass")
        alone = f"{alone:10.2f} s" if isinstance(alone, float) else ""
        print(f"{r:<22}{_fmt(irv.get(r, '-')):>14}   {alone:>12}   {_fmt(bare.get(r, '-'))}")
    tot_i = sum(v for k, v in irv.items() if k in rows and isinstance(v, float))
    tot_b = sum(v for k, v in bare.items() if k in rows and isinstance(v, float))
    print(f"{'total':<22}{tot_i:>10.2f} s   {tot_b:8.2f} s (successful phases only)")
    print(f"irviz export = torch.export + run_decompositions + FX view-model ({irv['fx_view']:.2f} s "
          "of it); bare import includes run_decompositions")
    if "run" in irv:
        print("run:", irv["run"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
