"""TVM against torch eager and torch.compile, per model and pipeline, on this CPU.

    python benchmarks/cpu_speed.py [--models resnet18,mlp,gpt,small_cnn,hf_bert | --real-size]
                                   [--pipelines fast-cpu,tir-cpu] [--repeats 20] [--rounds 3]
                                   [--threads N] [--no-compile] [--fresh-cache] [--kernels K]
                                   [--isa avx2]

All in one process. Each runtime is timed in a block of its own (``timing.time_alone``: warm-up,
then at least ``--repeats`` runs and 0.2 s), never call by call in one loop: timed that way torch
read up to 100x too slow. The blocks are repeated for ``--rounds`` rounds, interleaved (eager,
compile, each pipeline, then again), so a change in machine load hits every column; each figure is
the median over rounds of the blocks' medians, and the spread column is the largest relative
interquartile range of its blocks.

The first lines name the CPU, its vector ISA and width, the threads and the load average, so figures
from different machines can be told apart. ``tune s`` is the time the pipeline spent measuring on
this machine (library or TensorIR, conv2d and matmul tiles): the first run, then the same pipeline
again, read from the cache, with that second run's whole time in brackets. ``--fresh-cache`` measures into an empty cache (the first-time figure).

``--real-size`` times what users compile instead of the samples: BERT-base (128 tokens), GPT-2 small
(a 128-token prefill), ResNet-18 (224²), MobileNet-V2 (224²), ViT-base/16 (224², 197 tokens) and
ConvNeXt-T (224²), at their published sizes with random weights (``benchmarks/real_size/``; also
``real:qwen2_4layers``, a Llama-family decoder at Qwen2-0.5B's width). A name in ``--models`` is a
sample, ``real:NAME`` or a model file.

Share of the peak, which carries over between CPUs where a ratio against torch does not (torch's
matmuls are MKL's AVX-512 code on Intel, AVX2 code on AMD): the header gives the float32 FMA peak
irviz measures on this CPU at the threads used (``machine_peak.compute_peak``), and each row the
model's GFLOP (the sum of its kernels' work, as ``roofline`` counts it: TVM's FLOP estimate of each
TensorIR kernel with each distinct subexpression once, operand shapes for a library call), its
GFLOP/s at the timed median against that peak, and the kernel launches one run makes.
``--kernels K`` prints the K slowest kernels with their time per call, GFLOP/s and % of the peak,
and the roof ``roofline`` holds each against ("compute": the FMA peak; "L2 mem": that level's
measured bandwidth, where the kernel is memory-bound) with its % of that roof. A kernel timed
above its roof prints "ABOVE ROOF" and a "not real" line with the reason instead of a figure.

``--isa avx2`` runs the same comparison as on an AVX2 machine, on this one: torch restricted to
AVX2 (``ATEN_CPU_CAPABILITY=avx2`` for ATen and inductor's generated code, ``DNNL_MAX_CPU_ISA=AVX2``
for oneDNN's convolutions, ``MKL_ENABLE_INSTRUCTIONS=AVX2`` for MKL's matmuls; set before torch is
imported, so the script starts itself again with them), and irviz building, tuning and timing for
the ``x86-avx2`` target (``IRVIZ_HOST_TARGET``; its decisions are cached apart, under ISA AVX2).
The script checks what torch reports and stops if it does not use AVX2. Same CPU, same caches and
clock: an honest proxy for AVX2 code, not a measurement of another CPU.

Targets (quiet machine, 2 threads): fast-cpu ≤ 0.85× eager and ≤ 0.95× torch.compile on ResNet-18,
BERT-base, GPT-2 small and ConvNeXt-T; tir-cpu ≤ 1.1× eager; BERT-base and GPT-2 small at ≥ 75% of
the measured peak, their big matmuls at ≥ 88%; tuning ResNet-18 ≤ 60 s the first time, ≤ 2 s from
the cache. Figures taken while the load average is above the cores are marked: on a shared 2-core
machine torch's threads wait for descheduled peers, and both columns read slow by different amounts.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import warnings


def _load() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "?"


# what --isa avx2 sets before torch is imported; the host target irviz builds for instead
AVX2_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "DNNL_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
AVX2_TARGET = "x86-avx2"


def _restart_for_isa(isa: str) -> None:
    """Start this script again with the environment of `isa` (no return) unless it has it already:
    torch reads these variables once, when it is imported."""
    if isa == "native" or all(os.environ.get(k) == v for k, v in AVX2_ENV.items()):
        return
    env = dict(os.environ, **AVX2_ENV)
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


def _isa_check(isa: str) -> str:
    """What torch and irviz run with, read back from them; raises SystemExit when --isa avx2 did
    not take (a torch that ignores the variables would make the AVX2 columns AVX-512 ones)."""
    import torch

    cap = torch.backends.cpu.get_cpu_capability()
    try:
        from torch._inductor.cpu_vec_isa import pick_vec_isa

        inductor = str(pick_vec_isa()) or "none"
    except Exception as exc:  # an inductor without this module: say so rather than guess
        inductor = f"unknown ({type(exc).__name__})"
    text = f"torch CPU capability {cap}, inductor vector ISA {inductor}"
    if isa == "avx2":
        if cap.upper() != "AVX2" or inductor.lower() not in ("avx2", "unknown"):
            raise SystemExit(f"--isa avx2: torch did not take AVX2 ({text}); figures would be AVX-512's")
        text += (f", oneDNN max ISA {os.environ['DNNL_MAX_CPU_ISA']}, MKL {os.environ['MKL_ENABLE_INSTRUCTIONS']}; "
                 f"irviz target {AVX2_TARGET}. AVX2 proxy: AVX2 code on this CPU (same cores, caches "
                 "and clock), not another machine")
    return text


def _roof_cell(e: dict | None) -> str:
    """Which roof a kernel is held against and how close it came: "compute 92%" (the FMA peak) or
    "L2 61%" (that level's bandwidth, memory-bound); "ABOVE ROOF" where it timed faster than the
    roof allows, which no real kernel does."""
    if not e or e.get("pct_of_roof") is None:
        return f"{'-':>13}"
    if e["above_roof"]:
        return f"{'ABOVE ROOF':>13}"
    roof = "compute" if e["bound"] == "compute" else f"{e['level']} mem"
    return f"{roof:>7} {e['pct_of_roof']:4.0f}%"


def _print_kernels(kernels, work, roof, peak_gflops: float, count: int) -> None:
    """The `count` slowest kernels: time per call, GFLOP/s, % of the FMA peak, and the roofline's
    roof for each; a kernel timed above its roof shows no % as if it were real, and says why."""
    entries = {e["name"]: e for e in (roof or {}).get("kernels", ())}
    for k in sorted(kernels, key=lambda k: -k.ms)[:count]:
        w = work.get(k.name)
        e = entries.get(k.name)
        gflops = w[0] / (k.ms / 1e3) / 1e9 if w is not None and w[0] > 0 and k.ms > 0 else None
        above = bool(e and e["above_roof"]) or (gflops is not None and gflops > peak_gflops)
        if gflops is None:
            rate = f"{'-':>7} GFLOP/s {'-':>6}"
        elif above:
            rate = f"{gflops:7.1f} GFLOP/s {'?':>6}"
        else:
            rate = f"{gflops:7.1f} GFLOP/s {100 * gflops / peak_gflops:5.1f}%"
        cell = _roof_cell(e) if e or not above else f"{'ABOVE ROOF':>13}"
        print(f"{'':23}{k.ms / max(k.calls, 1):8.3f} ms × {k.calls:<3} {rate} {cell}  {k.name}")
        if above:
            why = (e or {}).get("above_roof_reason") or (
                f"timed faster than the FMA peak measured here ({peak_gflops:.1f} GFLOP/s)")
            print(f"{'':25}not real: {why}")


REAL_SIZE = ["real:bert_base", "real:gpt2_small", "resnet18", "real:mobilenet_v2", "real:vit_base",
             "real:convnext_tiny"]


def _model_source(name: str) -> str:
    if name.startswith("real:"):
        return os.path.join(os.path.dirname(os.path.abspath(__file__)), "real_size", name[5:] + ".py")
    return name if name.endswith((".py", ".pt2")) else f"sample:{name}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet18,mlp,gpt,small_cnn,hf_bert")
    ap.add_argument("--real-size", action="store_true",
                    help="BERT-base, GPT-2 small, ResNet-18, MobileNet-V2, ViT-base and ConvNeXt-T at their published sizes")
    ap.add_argument("--pipelines", default="fast-cpu,tir-cpu")
    ap.add_argument("--repeats", type=int, default=20, help="timed runs per block")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds of blocks")
    ap.add_argument("--kernels", type=int, default=0, help="print the K slowest kernels of each build")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                    help="threads for both TVM's runtime and torch (default: all cores)")
    ap.add_argument("--no-compile", action="store_true", help="leave out torch.compile (inductor)")
    ap.add_argument("--isa", choices=("native", "avx2"), default="native",
                    help="avx2: torch limited to AVX2 and irviz built for x86-avx2, on this CPU (a proxy)")
    ap.add_argument("--fresh-cache", action="store_true",
                    help="measure the CPU decisions into an empty cache (the first-time tuning figure)")
    args = ap.parse_args()
    _restart_for_isa(args.isa)
    if args.isa == "avx2":
        from irviz.core.target import target_spec
        from irviz.core.tvm_compat import HOST_TARGET_ENV

        os.environ[HOST_TARGET_ENV] = json.dumps(target_spec(AVX2_TARGET)[1])
    # TVM reads this when its thread pool starts, so it has to be set before the first run.
    os.environ["TVM_NUM_THREADS"] = str(args.threads)
    if args.fresh_cache:
        os.environ["IRVIZ_CACHE_DIR"] = tempfile.mkdtemp(prefix="irviz-cache-")
    warnings.filterwarnings("ignore")

    import torch
    import tvm
    from tvm import relax

    from irviz.core.backend import build as build_mod
    from irviz.core.backend.machine_peak import compute_peak
    from irviz.core.backend.roofline import kernel_work, machine_roofs, roofline
    from irviz.core.target import cpu_info
    from irviz.core.backend.run import run_and_compare
    from irviz.core.backend.timing import time_alone, tune_seconds
    from irviz.core.frontend.capture import capture
    from irviz.core.frontend.importer import import_model
    from irviz.core.frontend.model_file import load_model
    from irviz.core.passes import get_pipeline
    from irviz.core.session import Session

    torch.set_num_threads(args.threads)
    info = cpu_info()
    print(f"CPU: {info.model}; LLVM target {info.mcpu}; {info.isa}, {info.vector_lanes} float32 lanes; "
          f"{info.cores} cores")
    print(f"torch {torch.__version__}, TVM {tvm.__version__}; threads: {args.threads} (TVM_NUM_THREADS and "
          f"torch.set_num_threads); {args.rounds} interleaved rounds of blocks of at least {args.repeats} runs and 0.2 s, "
          f"each runtime timed alone; load average {_load()}")
    print(_isa_check(args.isa))
    peak = compute_peak(args.threads)
    print(f"measured float32 FMA peak {peak['gflops']:.1f} GFLOP/s at {args.threads} threads ({peak['per_core_gflops']:.1f} "
          f"per core; all threads together read {peak['measured_all_threads']:.1f}; load {peak['load']}): {peak['source']}")
    # the roof each kernel is held against (the FMA peak or a memory level's bandwidth), measured
    # before any timing so its probes do not land in a timed block
    roofs = machine_roofs(args.threads) if args.kernels else None
    print()
    cols = ["eager ms", "compile ms", "tvm ms", "tvm/eager", "tvm/compile", "spread", "max err",
            "build s", "tune s (pipeline s)", "GFLOP", "% peak", "launches"]
    print(f"{'model':12} {'pipeline':9} " + " ".join(f"{c:>11}" for c in cols))
    summary = []
    models = REAL_SIZE if args.real_size else args.models.split(",")
    for entry in models:
        name = os.path.splitext(os.path.basename(entry.removeprefix("real:")))[0]
        try:
            loaded = load_model(_model_source(entry))
            captured = capture(loaded)
        except Exception as exc:  # e.g. hf_bert without the hf extra
            print(f"{name:12} skipped: {getattr(exc, 'message', exc)}")
            continue
        example = tuple(loaded.example_inputs)
        runners = {"eager": lambda: loaded.module(*example)}
        compile_note = ""
        if not args.no_compile:
            try:
                compiled = torch.compile(loaded.module)
                t = time.perf_counter()
                with torch.no_grad():
                    compiled(*example)
                compile_note = f"torch.compile warm-up {time.perf_counter() - t:.1f} s"
                runners["compile"] = lambda: compiled(*example)
            except Exception as exc:  # no compiler on this machine: say so, go on
                compile_note = f"torch.compile failed: {str(exc).splitlines()[0][:120]}"
        built_rows = []
        for pipeline in args.pipelines.split(","):
            try:
                t_tune = tune_seconds()
                session = Session(import_model(captured), captured)
                session.set_pipeline(get_pipeline(pipeline))
                if session.run_to_end() is None:
                    raise session.error
                tuned_first = tune_seconds() - t_tune
                # the same pipeline again: every decision now comes from the cache
                t_tune = tune_seconds()
                again = Session(import_model(captured), captured)
                again.set_pipeline(get_pipeline(pipeline))
                t_again = time.perf_counter()
                again.run_to_end()
                cached_s = time.perf_counter() - t_again
                tuned_again = tune_seconds() - t_tune
                t = time.perf_counter()
                built = build_mod.build(session.module())
                build_s = time.perf_counter() - t
                res = run_and_compare(built, loaded, repeats=3, match_threads=True)
                main_fn = relax.VirtualMachine(built.executable, tvm.cpu())["main"]
                tvm_in = [tvm.runtime.tensor(x.detach().numpy()) for x in example if isinstance(x, torch.Tensor)]
                runners[pipeline] = (lambda f=main_fn, a=tvm_in: f(*a))
                built_rows.append((pipeline, res, build_s, tuned_first, tuned_again, cached_s,
                                   kernel_work(built, res.kernels),
                                   roofline(built, res.kernels, roofs) if roofs else None))
            except Exception as exc:
                print(f"{name:12} {pipeline:9} failed: {getattr(exc, 'message', exc)}"[:200])
        blocks: dict[str, list] = {k: [] for k in runners}
        with torch.no_grad():
            for _ in range(max(1, args.rounds)):
                for key, fn in runners.items():
                    blocks[key].append(time_alone(fn, args.repeats))
        med = {k: statistics.median(t.median_ms for t in ts) for k, ts in blocks.items()}
        spread = {k: max(t.spread for t in ts) for k, ts in blocks.items()}
        eager, comp = med["eager"], med.get("compile")
        for pipeline, res, build_s, tuned_first, tuned_again, cached_s, work, roof in built_rows:
            tvm_ms = med[pipeline]
            known = [w for w in work.values() if w is not None]
            gflop = sum(f for f, _ in known) / 1e9
            launches = sum(k.calls for k in res.kernels)
            unknown = len(work) - len(known)
            pct = 100 * gflop / (tvm_ms / 1e3) / peak["gflops"]
            cells = [f"{eager:11.3f}", f"{comp:11.3f}" if comp else f"{'-':>11}", f"{tvm_ms:11.3f}",
                     f"{tvm_ms / eager:10.2f}×", f"{tvm_ms / comp:10.2f}×" if comp else f"{'-':>11}",
                     f"{100 * max(spread[pipeline], spread['eager']):10.0f}%",
                     f"{res.max_abs_error:11.2e}", f"{build_s:11.1f}", f"{tuned_first:5.1f}/{tuned_again:.1f} ({cached_s:.1f})",
                     f"{gflop:11.3f}" + ("+" if unknown else " "), f"{pct:10.1f}%", f"{launches:11d}"]
            print(f"{name:12} {pipeline:9} " + " ".join(cells) + ("" if res.allclose else "  WRONG"), flush=True)
            summary.append((name, pipeline, tvm_ms / eager, tvm_ms / comp if comp else None, tuned_first,
                            cached_s, res.allclose, pct))
            if unknown:
                print(f"{'':23}GFLOP+: the work of {unknown} kernel(s) is not known (symbolic sizes); left out")
            if args.kernels:
                _print_kernels(res.kernels, work, roof, peak["gflops"], args.kernels)
        load = _load()
        busy = float(load.split()[0]) > (os.cpu_count() or 1) if load != "?" else False
        print(f"{'':23}load average {load}" + (" (above the cores: these timings are not reliable)" if busy else "")
              + (f"; {compile_note}" if compile_note else ""))
    print(f"\nload average after: {_load()}")
    print("tune s: seconds measuring decisions in the pipeline's first run / in the same pipeline run "
          "again (decisions from the cache), and in brackets how long that whole second run took")
    for pipeline, target in (("fast-cpu", 0.85), ("tir-cpu", 1.1)):
        got = [r for r in summary if r[1] == pipeline]
        if got:
            worst = max(got, key=lambda r: r[2])
            print(f"{pipeline}: worst {worst[2]:.2f}× eager ({worst[0]}); target ≤ {target}×")
    got = [r for r in summary if r[1] == "fast-cpu" and r[3] is not None]
    if got:
        worst = max(got, key=lambda r: r[3])
        print(f"fast-cpu: worst {worst[3]:.2f}× torch.compile ({worst[0]}); target ≤ 0.95×")
    for r in summary:
        if r[0] in ("bert_base", "gpt2_small"):
            print(f"{r[0]} {r[1]}: {r[7]:.0f}% of the measured peak; target ≥ 75%")
    if any(not r[6] for r in summary):
        print("WRONG numbers in: " + ", ".join(f"{r[0]}/{r[1]}" for r in summary if not r[6]))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
