"""Greedy generation in TVM (prefill, then one decode call per token), checked against transformers'
``generate(do_sample=False)`` token by token and logits by logits, and timed against torch eager.

Timing follows backend.timing: each runtime in blocks of its own (never interleaved), the median
shown, and `reliable` false with the reason when a block's threads waited for a core. The decode
figure is one decode call at the first position after the prompt: the program is the same at
every position (the cache is static and attention reads all of it under a mask), so the position
does not change the work. Torch eager's decode is transformers' own step with its dynamic cache
cut back after each call, so every timed call sees the same prompt-long cache.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from irviz.core.generate import static_cache as sc

# as backend.run compares a float32 output: atol scales with the reference's largest magnitude
RTOL, ATOL = 1e-4, 1e-4


def torch_generate(lm, prompt: torch.Tensor, tokens: int) -> tuple[list[int], list[np.ndarray]]:
    """model.generate(do_sample=False) (see static_cache.torch_reference): the tokens, and each
    step's logits (vocab,) as generate saw them."""
    return sc.torch_reference(lm, prompt, tokens, with_logits=True)


def _entry(program, shared: dict, dev, donor: list | None = None):
    """(main, the weights main takes): the shared weights, or what TRANSFORM_PARAMS made of them,
    computed here once; the outputs `program.from_prefill` names are taken from `donor` (the
    prefill's transformed weights), not computed again."""
    from tvm import relax

    from irviz.core.generate.programs import TRANSFORM_PARAMS
    from irviz.core.generate.shared_packing import merged

    vm = relax.VirtualMachine(program.built.executable, dev)
    weights = [shared[n] for n in program.weight_names()]
    if program.lifted:
        weights = list(vm[TRANSFORM_PARAMS](weights))
        if program.from_prefill:
            weights = merged(weights, donor, program.from_prefill, len(weights) + len(program.from_prefill))
    return vm["main"], weights


def _tvm_tensors(arrays, dev):
    import tvm

    return [tvm.runtime.tensor(np.ascontiguousarray(a), dev) for a in arrays]


class TvmGenerator:
    """The two built programs on one device, with the weights converted once and shared. max_len: the
    cache's positions (None: the length opened with; another needs a symbolic context length)."""

    def __init__(self, progs, device=None, max_len: int | None = None):
        import tvm

        self.progs = progs
        self.layout = progs.layout_for(max_len)
        self.dev = device or tvm.cpu()
        params = progs.params()
        shared = dict(zip(params, _tvm_tensors(params.values(), self.dev)))
        progs.build()
        self.prefill_fn, self.prefill_weights = _entry(progs.prefill, shared, self.dev)
        self.decode_fn, self.decode_weights = _entry(progs.decode, shared, self.dev, self.prefill_weights)

    def empty_cache(self) -> list:
        zeros = np.zeros(self.layout.shape, str(self.layout.dtype).replace("torch.", ""))
        return _tvm_tensors([zeros] * self.layout.tensors, self.dev)

    def prefill(self, ids: np.ndarray):
        ids = _tvm_tensors([ids.astype("int64")], self.dev)
        out = self.prefill_fn(*ids, *self.empty_cache(), *self.prefill_weights)
        return out[0].numpy(), list(out)[1:]

    def decode(self, token: int, position: int, cache):
        tok, pos = _tvm_tensors([np.array([[token]], "int64"), np.array([position], "int64")], self.dev)
        out = self.decode_fn(tok, pos, *cache, *self.decode_weights)
        return out[0].numpy(), list(out)[1:]

    def generate(self, prompt: np.ndarray, tokens: int) -> tuple[list[int], list[np.ndarray]]:
        S = prompt.shape[1]
        room = self.layout.max_len - S
        if tokens > room + 1:
            raise sc.NotACausalLM(
                f"{tokens} tokens after a {S}-token prompt need a cache of {S + tokens - 1} positions; "
                f"this one has {self.layout.max_len}",
                hint=f"give --max-len {S + tokens} or more, or fewer --tokens")
        logits, cache = self.prefill(prompt)
        out, all_logits = [int(logits[0, -1].argmax())], [logits[0, -1]]
        for i in range(tokens - 1):
            logits, cache = self.decode(out[-1], S + i, cache)
            out.append(int(logits[0, -1].argmax()))
            all_logits.append(logits[0, -1])
        return out, all_logits


def compare_steps(tvm_tokens, torch_tokens, tvm_logits, torch_logits) -> dict:
    """Tokens and logits step by step. Logits are compared up to the first differing token (after
    it the two runs read different histories)."""
    first = next((i for i, (a, b) in enumerate(zip(tvm_tokens, torch_tokens)) if a != b), None)
    if first is None and len(tvm_tokens) != len(torch_tokens):
        first = min(len(tvm_tokens), len(torch_tokens))
    upto = len(tvm_logits) if first is None else first + 1
    steps = []
    for i, (a, b) in enumerate(zip(tvm_logits[:upto], torch_logits[:upto])):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        err = float(np.max(np.abs(a - b))) if a.shape == b.shape else math.inf
        atol = ATOL * max(1.0, float(np.max(np.abs(b)))) if b.size else ATOL
        steps.append({"step": i, "max_abs_error": err,
                      "allclose": bool(a.shape == b.shape and np.allclose(a, b, rtol=RTOL, atol=atol))})
    mismatch = None
    if first is not None:
        mismatch = {"step": first,
                    "tvm": tvm_tokens[first] if first < len(tvm_tokens) else None,
                    "torch": torch_tokens[first] if first < len(torch_tokens) else None}
    return {"tokens_match": first is None, "first_mismatch": mismatch, "logits": steps,
            "logits_max_abs_error": max((s["max_abs_error"] for s in steps), default=math.nan),
            "logits_allclose": all(s["allclose"] for s in steps)}


def mismatch_message(result: dict) -> str:
    m = result["first_mismatch"]
    step = m["step"]
    program = "prefill" if step == 0 else "decode"
    where = ("the prefill (the first generated token)" if step == 0
             else f"decode step {step} (position {result['prompt_len'] + step - 1})")
    return (f"generated token {step} differs: TVM {m['tvm']}, torch generate {m['torch']}, at {where}; "
            f"the tokens before it matched, with logits max abs error {result['logits_max_abs_error']:.3g} "
            f"up to it; the {program} program's graph is the one to bisect")


def time_generation(gen: TvmGenerator, lm, prompt: torch.Tensor, repeats: int = 10) -> dict:
    """Prefill ms and decode ms per token, TVM and torch eager, each timed alone (see module doc)."""
    from irviz.core.backend.run import tvm_threads
    from irviz.core.backend.timing import judge, time_alone

    threads = tvm_threads() or torch.get_num_threads()
    S = int(prompt.shape[1])
    ids = _tvm_tensors([prompt.numpy().astype("int64")], gen.dev)
    _, cache = gen.prefill(prompt.numpy())
    empty = gen.empty_cache()
    tok, pos = _tvm_tensors([np.array([[1]], "int64"), np.array([S], "int64")], gen.dev)
    t = {"TVM prefill": time_alone(lambda: gen.prefill_fn(*ids, *empty, *gen.prefill_weights), repeats),
         "TVM decode": time_alone(lambda: gen.decode_fn(tok, pos, *cache, *gen.decode_weights), repeats)}
    t.update(_time_torch(lm, prompt, repeats, threads))
    reliable, reason = judge(t, threads)
    ms = {k: v.median_ms for k, v in t.items()}
    return {
        "prefill_ms": {"tvm": ms["TVM prefill"], "torch": ms["PyTorch prefill"]},
        "decode_ms_per_token": {"tvm": ms["TVM decode"], "torch": ms["PyTorch decode"]},
        "tokens_per_s": {"tvm": 1e3 / ms["TVM decode"], "torch": 1e3 / ms["PyTorch decode"]},
        "timings": {k: v.as_dict() for k, v in t.items()},
        "threads": threads, "reliable": reliable, "reason": reason,
    }


def _time_torch(lm, prompt, repeats: int, threads: int) -> dict:
    from irviz.core.backend.timing import time_alone

    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    S = int(prompt.shape[1])
    try:
        with torch.no_grad():
            prefill = time_alone(lambda: lm(input_ids=prompt, use_cache=True, return_dict=True), repeats)
            out = lm(input_ids=prompt, use_cache=True, return_dict=True)
            cache = getattr(out, "cache", None) or out.past_key_values
            tok, pos = torch.tensor([[1]]), torch.tensor([[S]])

            def step():
                lm(input_ids=tok, position_ids=pos, cache=cache, use_cache=True, return_dict=True)
                cache.crop(-1)  # back to the prompt: each call sees the same cache

            decode = time_alone(step, repeats)
    finally:
        torch.set_num_threads(saved)
    return {"PyTorch prefill": prefill, "PyTorch decode": decode}
