"""CUDA source for a whole transformer through the gpu pipeline, with no GPU: GPT-2 small's width
(768 wide, 12 heads, vocab 50257, random weights) with a few layers, about 300 bindings in main.
The issue's target: the whole model's GPU source in at most 30 s on 2 cores.

Timed: the gpu pipeline stepped (zero's passes, then each dlight GPU rule as its own step), the GPU
build of the last step (what `check --target cuda` compiles), and each kernel's CUDA source with its
launch shape (what `export --target cuda` and the Code pane read). Loading, torch.export and the
import are printed apart: they are the same for every target.

    python benchmarks/gpu_source.py [--layers 4] [--seq 32] [--target cuda]
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
warnings.filterwarnings("ignore")


def make_model(layers: int, seq: int):
    import torch
    import transformers

    from irviz.core.frontend import hf

    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=layers)  # defaults: 768 wide, 12 heads, vocab 50257
    return hf.causal_lm(transformers.GPT2LMHeadModel, cfg), (hf.token_ids(cfg.vocab_size, seq=seq),)


def bindings(mod, func: str = "main") -> int:
    from tvm import relax

    return sum(len(b.bindings) for b in mod[func].body.blocks if isinstance(b, relax.BindingBlock))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--target", default="cuda")
    args = ap.parse_args(argv)

    from irviz.core import passes
    from irviz.core.backend.build import build
    from irviz.core.backend.kernel_code import kernel_code
    from irviz.core.frontend.model_file import LoadedModel
    from irviz.core.target import cpu_info, resolve_target
    from irviz.core.workspace import Workspace

    print(f"CPU      {cpu_info().summary()}, {cpu_info().cores} cores")
    t = time.perf_counter()
    model, inputs = make_model(args.layers, args.seq)
    ws = Workspace()
    ws.target = args.target
    ws.open_loaded(LoadedModel(module=model, example_inputs=inputs, spec="gpt2_small", name="gpt2_small"),
                   planned=passes.get_pipeline("gpu"))
    opened = time.perf_counter() - t
    s = ws.session
    print(f"model    GPT-2 small width, {args.layers} layers, {args.seq} tokens: "
          f"{bindings(s.steps[0].mod)} bindings in main at the import, "
          f"{len(ws.captured.graph.nodes)} FX nodes (made, exported and imported in {opened:.1f} s)")

    t0 = time.perf_counter()
    while s.pipeline:
        name = s.pipeline[0].name
        step = s.step_forward()
        if step is None:
            print(f"FAILED at {name}: {s.error.user_message()}")
            return 1
        print(f"  {step.index:2d} {name:26} {step.seconds:6.2f} s  "
              f"{len(step.changes.changed):3d} functions changed")
    pipeline = time.perf_counter() - t0
    mod = s.current.mod

    t = time.perf_counter()
    built = build(mod, resolve_target(args.target))
    build_s = time.perf_counter() - t
    t = time.perf_counter()
    code = kernel_code(mod, args.target)
    source_s = time.perf_counter() - t
    bad = [n for n, k in code.kernels.items() if k.error]
    lines = sum(k.counts.get("lines", 0) for k in code.kernels.values())
    print(f"pipeline {pipeline:6.2f} s  (gpu: {len(s.steps) - 1} steps, "
          f"{len(code.kernels)} kernels at the end)")
    print(f"build    {build_s:6.2f} s  (the last step for {args.target}: {len(built.passes_run)} "
          f"default_build passes + codegen)")
    print(f"source   {source_s:6.2f} s  (each kernel's {code.kind} source and launch shape: "
          f"{lines} lines, {len(bad)} kernels not compiled{': ' + ', '.join(bad) if bad else ''})")
    total = pipeline + build_s + source_s
    print(f"total    {total:6.2f} s  pipeline + build + per-kernel source "
          f"({'within' if total <= 30 else 'OVER'} the 30 s target)")
    return 0 if not bad else 1


if __name__ == "__main__":
    raise SystemExit(main())
