"""One generation check from a model spec to a plain dict: what `irviz generate` prints as JSON and
what an engine command would send.

    result = generate_report("sample:tiny_llama", tokens=32, pipeline="zero")
    result["tokens_match"], result["decode_ms_per_token"]["tvm"]

Without weights (no_weights=True) nothing runs: the figures are estimates from per-kernel timing
and the bandwidth limit (generate.estimate), and the run's keys are None.
"""
from __future__ import annotations

import time

from irviz.core.generate import static_cache as sc

RUN_KEYS = ("tokens_match", "tvm_tokens", "torch_tokens", "first_mismatch", "logits", "logits_max_abs_error",
            "logits_allclose", "prefill_ms", "decode_ms_per_token", "tokens_per_s", "timings", "threads")
ESTIMATE_KEYS = ("estimated_prefill_ms", "estimated_decode_ms_per_token", "estimated_tokens_per_s",
                 "bandwidth_limit_ms_per_token", "decode_share_of_bandwidth", "bandwidth_gbs",
                 "bandwidth_source", "weight_bytes", "prefill_kernels", "decode_kernels", "not_estimated")
DEFAULT_TOKENS = 16


def empty_report(model: str, pipeline, tokens: int, max_len, no_weights: bool) -> dict:
    """Every key, None until known: a failed stage still gives a complete JSON."""
    out = {"ok": False, "failed_stage": None, "error": None, "model": model, "pipeline": pipeline,
           "target": None, "cpu": None, "no_weights": bool(no_weights), "tokens": int(tokens),
           "max_len": max_len, "context_length": None, "context_reason": None,
           "decode_reads": None, "decode_reads_reason": None, "prompt_len": None, "kv_cache_bytes": None, "kv_cache_bytes_by_length": None,
           "kv_cache_shape": None, "programs": None, "reliable": None, "reason": None, "seconds": {}}
    out.update({k: None for k in RUN_KEYS + ESTIMATE_KEYS})
    return out


def open_for_generation(spec: str, *, tokens: int = DEFAULT_TOKENS, max_len=None, pipeline="zero", target=None, no_weights=False, log=None):
    """Load `spec` (a model file or sample:NAME) and open its prefill and decode programs."""
    from irviz.core.frontend.model_file import load_model
    from irviz.core.generate.programs import open_programs

    loaded = load_model(spec, no_weights=no_weights)
    if loaded.exported is not None:
        raise sc.NotACausalLM(f"{spec} is an exported program: its graph is fixed, so no prefill and decode "
                              "programs with a cache can be captured from it",
                              hint="open the model file whose get_model() returns the causal LM")
    return open_programs(loaded.module, loaded.example_inputs, spec=spec, max_len=max_len, tokens=tokens,
                         pipeline=pipeline, target=target, structure_only=loaded.structure_only, log=log)


def describe_programs(progs) -> dict:
    return {p.name: {"fx_nodes": len(p.captured.graph.nodes), "steps": len(p.session.steps),
                     "inputs": p.inputs, "signature": _params_text(p)}
            for p in (progs.prefill, progs.decode)}


def _params_text(p) -> str:
    from irviz.core.tvm_compat import var_name

    names = [var_name(v) for v in p.session.module()["main"].params][:p.inputs]
    return f"main({', '.join(names)}, <{len(p.weight_names())} weights>)"


def by_length(layout) -> dict:
    """{context length: bytes the filled part of the cache holds}, at powers of two up to max_len and
    at max_len: what a cache that grows with the context would take (the static one takes all)."""
    lengths = sorted({n for n in (2 ** k for k in range(20)) if n < layout.max_len} | {layout.max_len})
    return {str(n): layout.bytes_at(n) for n in lengths}


def fill_from_programs(out: dict, progs) -> None:
    from irviz.core.generate.programs import target_name
    from irviz.core.target import cpu_info

    out.update(target=target_name(progs.target), cpu=cpu_info().as_dict(), max_len=progs.layout.max_len,
               context_length=progs.context_length, context_reason=progs.context_reason,
               decode_reads=progs.decode_reads, decode_reads_reason=progs.decode_reason,
               prompt_len=int(progs.prompt.shape[1]), kv_cache_bytes=progs.layout.bytes,
               kv_cache_shape={"tensors": progs.layout.tensors, "each": list(progs.layout.shape),
                               "dtype": str(progs.layout.dtype).replace("torch.", "")},
               kv_cache_bytes_by_length=by_length(progs.layout), programs=describe_programs(progs))
    out["seconds"].update({k: round(v, 3) for k, v in progs.seconds.items()})


def run_generation(out: dict, progs, tokens: int, repeats: int = 10):
    """Generate in TVM and with transformers, compare, time: fills `out`'s run keys; the generator."""
    from irviz.core.generate import generation as g

    t = time.perf_counter()
    gen = g.TvmGenerator(progs)
    out["seconds"]["build"] = round(progs.seconds.get("build", 0.0), 3)
    tvm_tokens, tvm_logits = gen.generate(progs.prompt.numpy(), tokens)
    torch_tokens, torch_logits = g.torch_generate(progs.lm, progs.prompt, tokens)
    out.update(tvm_tokens=tvm_tokens, torch_tokens=torch_tokens,
               **g.compare_steps(tvm_tokens, torch_tokens, tvm_logits, torch_logits))
    out["seconds"]["generate"] = round(time.perf_counter() - t, 3)
    t = time.perf_counter()
    out.update(g.time_generation(gen, progs.lm, progs.prompt, repeats))
    out["seconds"]["timing"] = round(time.perf_counter() - t, 3)
    return gen


def estimate_generation(out: dict, progs) -> None:
    from irviz.core.generate.decode_estimate import estimate_generation as estimate

    t = time.perf_counter()
    est = estimate(progs)
    out.update({k: est.get(k) for k in ESTIMATE_KEYS})
    contended = est.get("contended") or []
    out["reliable"] = not contended
    out["reason"] = (f"kernels timed while their threads waited for a core (their figures are high): "
                     f"{', '.join(contended)}" if contended else None)
    out["seconds"]["estimate"] = round(time.perf_counter() - t, 3)
