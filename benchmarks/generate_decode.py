"""Decode ms per token, TVM against torch eager, and the share of the measured memory bandwidth, for a
causal LM at a real width (Qwen2-0.5B's: hidden 896, 14 heads, 2 KV heads, MLP 4864, vocab 151936)
with a few layers and random weights.

    python benchmarks/generate_decode.py --layers 2 --pipeline tir-cpu --tokens 8

A decode step reads every weight and the whole static cache once; the bandwidth limit is those
bytes over the STREAM-triad bandwidth measured here, and "% of bandwidth" is limit / measured
decode time (100%: as fast as memory allows). The biggest decode kernels are listed with their own
share (their argument bytes over their time in an instrumented run, backend.kernel_times), and the
process's RSS once the programs hold their weights, and its peak.

    python benchmarks/generate_decode.py --layers 2 --baseline no-matvec

--baseline PIPELINE opens the model a second time through another pipeline ("no-matvec": tir-cpu
without CPUTuneMatVec and CPUMatVec, the decode matmuls tiled as any matmul) and times the two
decode steps interleaved, block by block, so a busy machine slows both alike.
"""
from __future__ import annotations

import argparse
import json
import math
import resource
import statistics
import time

import torch
import transformers
import tvm

from irviz.core.backend.machine_peak import memory_bandwidth
from irviz.core.frontend import hf
from irviz.core.generate import generation_report as report
from irviz.core.generate.decode_estimate import weight_bytes
from irviz.core.generate.decode_kernels import decode_inputs, decode_kernel_rows
from irviz.core.generate.programs import open_programs
from irviz.core.target import cpu_info


def qwen2_width(layers: int, vocab: int):
    cfg = transformers.Qwen2Config(vocab_size=vocab, hidden_size=896, intermediate_size=4864,
                                   num_hidden_layers=layers, num_attention_heads=14, num_key_value_heads=2,
                                   max_position_embeddings=512, tie_word_embeddings=True)
    return hf.build(transformers.Qwen2ForCausalLM, cfg, seed=0)


def rss_mb() -> tuple[float, float]:
    """(the process's resident MB now, its peak MB so far)."""
    with open("/proc/self/statm", encoding="ascii") as f:
        now = int(f.read().split()[1]) * resource.getpagesize() / 1e6
    return now, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3


def without_matvec(pipeline: str) -> str:
    from irviz.core.passes.named_pipelines import PIPELINES

    steps = [i.name for i in PIPELINES[pipeline][1] if i.name not in ("CPUTuneMatVec", "CPUMatVec")]
    return ",".join(steps)


def interleaved(gens: dict, rounds: int = 8, calls: int = 3) -> dict:
    """{name: median ms of a decode call}, the generators' decode steps timed in turns."""
    args = {n: decode_inputs(g) for n, g in gens.items()}
    ms = {n: [] for n in gens}
    for _ in range(rounds):
        for n, g in gens.items():
            g.decode_fn(*args[n])  # its pool and caches warm again after the other's turn
            for _ in range(calls):
                t = time.perf_counter()
                g.decode_fn(*args[n])
                ms[n].append((time.perf_counter() - t) * 1e3)
    return {n: statistics.median(v) for n, v in ms.items()}


def print_kernels(gen, bw_gbs: float, model_ms: float) -> list:
    rows = decode_kernel_rows(gen, bw_gbs, model_ms=model_ms, top=6)
    print(f"biggest decode kernels ({'reliable' if rows['reliable'] else 'NOT reliable: ' + str(rows['reason'])}):")
    for k in rows["kernels"]:
        share = f"{k['share']:.0%}" if k["share"] is not None else "?"
        mb = f"{k['bytes'] / 1e6:.1f} MB" if k["bytes"] else "? MB"
        print(f"  {k['name'][:64]:64s} x{k['calls']} {k['ms']:8.2f} ms {mb:>10s} {share:>5s} of bandwidth")
    return rows["kernels"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument("--pipeline", default="tir-cpu")
    ap.add_argument("--json", default=None)
    ap.add_argument("--baseline", default=None,
                    help="a second pipeline whose decode is timed interleaved with this one's "
                         "(no-matvec: this pipeline without CPUTuneMatVec and CPUMatVec)")
    ap.add_argument("--constant-length", action="store_true",
                    help="capture the cache length as a constant instead of a symbolic size")
    args = ap.parse_args()
    lm = qwen2_width(args.layers, args.vocab)
    prompt = hf.token_ids(args.vocab, seq=args.prompt, seed=1)
    t = time.perf_counter()
    progs = open_programs(lm, (prompt,), spec="qwen2-0.5b-width", tokens=args.tokens, pipeline=args.pipeline,
                          log=print, symbolic=not args.constant_length)
    out = report.empty_report("qwen2-0.5b-width", args.pipeline, args.tokens, None, False)
    report.fill_from_programs(out, progs)
    print(f"opened in {time.perf_counter() - t:.1f} s")
    gen = report.run_generation(out, progs, args.tokens)
    held = rss_mb()
    bw = memory_bandwidth()
    limit = (weight_bytes(lm) + progs.layout.bytes) / (bw["gbs"] * 1e9) * 1e3
    dec = out["decode_ms_per_token"]
    out.update(bandwidth_gbs=bw["gbs"], bandwidth_limit_ms_per_token=limit, weight_bytes=weight_bytes(lm))
    print(f"CPU: {cpu_info().summary()}; {out['threads']} threads, torch {torch.get_num_threads()}")
    print(f"Qwen2-0.5B width, {args.layers} layers, prompt {args.prompt}, pipeline {args.pipeline}: "
          f"tokens {'match' if out['tokens_match'] else 'DIFFER'} (logits max abs error "
          f"{out['logits_max_abs_error']:.2g})")
    print(f"prefill ms: TVM {out['prefill_ms']['tvm']:.2f}, torch eager {out['prefill_ms']['torch']:.2f}")
    print(f"decode ms/token: TVM {dec['tvm']:.2f}, torch eager {dec['torch']:.2f} "
          f"(TVM/torch {dec['tvm'] / dec['torch']:.2f}x)")
    print(f"bandwidth: {bw['gbs']} GB/s measured; limit {limit:.2f} ms/token "
          f"({out['weight_bytes'] / 1e6:.0f} MB weights + {progs.layout.bytes / 1e6:.2f} MB cache); "
          f"TVM at {limit / dec['tvm']:.0%}, torch at {limit / dec['torch']:.0%} of it")
    print(f"timing reliable: {out['reliable']}" + (f" ({out['reason']})" if out["reason"] else ""))
    shared = [gen.decode_weights[i] for i in progs.decode.from_prefill]
    shared_mb = sum(math.prod(w.shape) * tvm.runtime.DataType(w.dtype).itemsize for w in shared) / 1e6
    print(f"RSS with both programs ready: {held[0]:.0f} MB (peak {held[1]:.0f} MB); decode takes {len(shared)} "
          f"packed weight(s), {shared_mb:.0f} MB, from the prefill's transform instead of a copy of its own")
    out.update(rss_mb=held[0], peak_rss_mb=held[1], shared_packed_weights=len(shared), shared_packed_mb=shared_mb)
    out["decode_kernels"] = print_kernels(gen, bw["gbs"], dec["tvm"])
    if args.baseline:
        pipe = without_matvec(args.pipeline) if args.baseline == "no-matvec" else args.baseline
        other = open_programs(lm, (prompt,), spec="qwen2-0.5b-width", tokens=args.tokens, pipeline=pipe,
                              symbolic=not args.constant_length)
        base = report.empty_report("qwen2-0.5b-width", pipe, args.tokens, None, False)
        base_gen = report.run_generation(base, other, args.tokens)
        ms = interleaved({"this": gen, "baseline": base_gen})
        print(f"baseline {args.baseline}: tokens {'match' if base['tokens_match'] else 'DIFFER'}; decode "
              f"interleaved: this {ms['this']:.2f} ms, baseline {ms['baseline']:.2f} ms "
              f"(this/baseline {ms['this'] / ms['baseline']:.2f}x; {limit / ms['this']:.0%} vs "
              f"{limit / ms['baseline']:.0%} of bandwidth)")
        out["baseline"] = {"pipeline": pipe, "decode_ms_interleaved": ms, "tokens_match": base["tokens_match"],
                           "decode_kernels": print_kernels(base_gen, bw["gbs"], ms["baseline"])}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2, default=str)


if __name__ == "__main__":
    main()
