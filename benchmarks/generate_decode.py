"""Decode ms per token, TVM against torch eager, and the share of the measured memory bandwidth, for a
causal LM at a real width (Qwen2-0.5B's: hidden 896, 14 heads, 2 KV heads, MLP 4864, vocab 151936)
with a few layers and random weights.

    python benchmarks/generate_decode.py --layers 2 --pipeline tir-cpu --tokens 8

A decode step reads every weight and the whole static cache once; the bandwidth limit is those
bytes over the STREAM-triad bandwidth measured here, and "% of bandwidth" is limit / measured
decode time (100%: as fast as memory allows).
"""
from __future__ import annotations

import argparse
import json
import time

import torch
import transformers

from irviz.core.backend.machine_peak import memory_bandwidth
from irviz.core.frontend import hf
from irviz.core.generate import generation_report as report
from irviz.core.generate.decode_estimate import weight_bytes
from irviz.core.generate.programs import open_programs
from irviz.core.target import cpu_info


def qwen2_width(layers: int, vocab: int):
    cfg = transformers.Qwen2Config(vocab_size=vocab, hidden_size=896, intermediate_size=4864,
                                   num_hidden_layers=layers, num_attention_heads=14, num_key_value_heads=2,
                                   max_position_embeddings=512, tie_word_embeddings=True)
    return hf.build(transformers.Qwen2ForCausalLM, cfg, seed=0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument("--pipeline", default="tir-cpu")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    lm = qwen2_width(args.layers, args.vocab)
    prompt = hf.token_ids(args.vocab, seq=args.prompt, seed=1)
    t = time.perf_counter()
    progs = open_programs(lm, (prompt,), spec="qwen2-0.5b-width", tokens=args.tokens, pipeline=args.pipeline,
                          log=print)
    out = report.empty_report("qwen2-0.5b-width", args.pipeline, args.tokens, None, False)
    report.fill_from_programs(out, progs)
    print(f"opened in {time.perf_counter() - t:.1f} s")
    report.run_generation(out, progs, args.tokens)
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
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2, default=str)


if __name__ == "__main__":
    main()
