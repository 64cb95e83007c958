"""Decode ms per token at a short and a long position: the decode that reads the filled positions
only (the symbolic context length's) against the one that reads the whole static cache (the
constant length's), one process, the two timed in alternating blocks so a busy machine slows both.

    python benchmarks/generate_context.py --max-len 2048 --pipeline zero
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import transformers

from irviz.core.frontend import hf
from irviz.core.generate import generation as g
from irviz.core.generate.programs import open_programs
from irviz.core.target import cpu_info


def model(layers: int):
    cfg = transformers.LlamaConfig(vocab_size=512, hidden_size=256, intermediate_size=512, num_hidden_layers=layers,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192)
    return hf.build(transformers.LlamaForCausalLM, cfg, seed=0), hf.token_ids(512, seq=16, seed=1)


def decode_call(gen, position: int):
    """The decode call at `position`, on the prefilled cache."""
    _, cache = gen.prefill(gen.progs.prompt.numpy())
    tok, pos = g._tvm_tensors([np.array([[1]], "int64"), np.array([position], "int64")], gen.dev)
    return lambda: gen.decode_fn(tok, pos, *cache, *gen.decode_weights)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-len", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--pipeline", default="zero")
    ap.add_argument("--blocks", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    lm, prompt = model(a.layers)
    S = int(prompt.shape[1])
    gens = {}
    for name, symbolic in (("filled only", True), ("whole cache", False)):
        progs = open_programs(lm, (prompt,), spec="bench", max_len=a.max_len, pipeline=a.pipeline, symbolic=symbolic)
        gens[name] = g.TvmGenerator(progs)
        print(f"{name:12s} context_length={progs.context_length} decode_reads={progs.decode_reads}")
    positions = (S, a.max_len - 1)
    calls = {(n, p): decode_call(gen, p) for n, gen in gens.items() for p in positions}
    times = {k: [] for k in calls}
    for fn in calls.values():
        fn()  # warm
    for _ in range(a.blocks):
        for k, fn in calls.items():
            t = time.perf_counter()
            for _ in range(a.repeats):
                fn()
            times[k].append((time.perf_counter() - t) / a.repeats * 1e3)
    cpu = cpu_info().as_dict()
    print(f"CPU {cpu['model']} ({cpu['mcpu']}, {cpu['cores']} cores); max_len {a.max_len}, {a.layers} layers, pipeline {a.pipeline}")
    for k, v in times.items():
        print(f"{k[0]:12s} position {k[1]:5d}: {statistics.median(v):8.3f} ms/token (median of {a.blocks} blocks)")


if __name__ == "__main__":
    main()
