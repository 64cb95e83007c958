"""`irviz generate MODEL --tokens N`: a causal LM as prefill and decode programs over a static KV
cache, built, run greedily in TVM and checked token by token against transformers' generate."""
from __future__ import annotations

import argparse
import sys

from irviz.cli.common import Failure, finite, load_pass_files, log_for, with_json_stdout, write_json

HELP = ("generate tokens greedily with TVM (a prefill program, then a decode program per token over a "
        "static KV cache) and compare them with transformers' generate(do_sample=False); time both")


def add_arguments(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("model", help="FILE.py whose get_model() returns a causal LM and prompt ids (1, S), "
                                  "FILE.py:NAME, or sample:NAME (e.g. sample:hf_llama)")
    sp.add_argument("--tokens", type=int, default=16, metavar="N", help="tokens to generate (default 16)")
    sp.add_argument("--pipeline", default="zero",
                    help="a named pipeline (see `irviz pipelines`) or a pipeline text, applied to both programs")
    sp.add_argument("--passes", metavar="FILE", action="append", default=[],
                    help="a pass file loaded before the pipeline is read (as check --passes)")
    sp.add_argument("--target", default=None, metavar="T", help="a target as `irviz targets` lists it (default host)")
    sp.add_argument("--max-len", type=int, default=None, metavar="L",
                    help="positions in the static KV cache (default: the prompt plus --tokens)")
    sp.add_argument("--no-weights", action="store_true",
                    help="structure only (the model on the meta device): nothing runs; per-kernel "
                         "estimates of prefill and decode, and the bandwidth limit of a decode step")
    sp.add_argument("--repeats", type=int, default=10, help="timed runs per figure (at least; default 10)")
    sp.add_argument("--bisect", action="store_true",
                    help="when a token differs (or the logits do), bisect the program that made it (prefill, "
                         "or decode) on that step's inputs as torch computed them, and name the first pass "
                         "whose build breaks its numbers (the JSON's `bisect`)")
    sp.add_argument("--json", metavar="FILE", help="write the summary as JSON to FILE ('-': stdout)")
    sp.add_argument("--verbose", action="store_true", help="print tracebacks of failures")


def run(args: argparse.Namespace) -> int:
    return with_json_stdout(args, lambda out: _run(args, out))


def _run(args, out) -> int:
    from irviz.core.generate import generation_report as report

    log = log_for(args)
    failure = Failure(args.verbose)
    tokens = int(args.tokens)
    summary = report.empty_report(args.model, args.pipeline, tokens, args.max_len, args.no_weights)
    summary["bisect"] = None
    stage = "load"
    try:
        if tokens < 1:
            raise ValueError(f"--tokens {tokens}: generate at least one token")
        if args.bisect and args.no_weights:
            raise ValueError("--bisect runs the programs, which --no-weights cannot")
        load_pass_files(args.passes, log)
        progs = report.open_for_generation(
            args.model, tokens=tokens, max_len=args.max_len, pipeline=args.pipeline, target=args.target,
            no_weights=args.no_weights, log=lambda line: log(f"program  {line}"))
        report.fill_from_programs(summary, progs)
        log(f"cache    {summary['kv_cache_shape']['tensors']} tensors of {tuple(progs.layout.shape)} "
            f"{summary['kv_cache_shape']['dtype']}: {summary['kv_cache_bytes']:,} bytes")
        stage = "build"
        if args.no_weights:
            report.estimate_generation(summary, progs)
        else:
            report.run_generation(summary, progs, tokens, args.repeats)
    except Exception as exc:
        failure.record(stage, exc)
        summary.update(failed_stage=failure.stage, error=failure.error)
        write_json(args.json, summary, out)
        return 1
    _print(summary, log)
    ok = args.no_weights or (summary["tokens_match"] and summary["logits_allclose"])
    step = None if ok else bisect_step(summary)
    if args.bisect and step is not None:
        _bisect(summary, progs, step, log)
    how = "" if args.bisect else f"; `irviz generate ... --bisect` finds the pass that breaks step {step}"
    if not args.no_weights and not summary["tokens_match"]:
        failure.mismatch(_mismatch(summary) + how)
    elif not ok:
        failure.mismatch(f"the tokens match, but the logits differ beyond rtol 1e-4 (max abs error "
                         f"{summary['logits_max_abs_error']:.3g} at step {step}){how}")
    summary.update(ok=bool(ok), failed_stage=failure.stage, error=failure.error)
    write_json(args.json, summary, out)
    return 0 if ok else 1


def bisect_step(s: dict) -> int | None:
    """The generated token whose step to bisect: the first that differs, else the first whose
    logits differ; None when both match."""
    if s.get("first_mismatch"):
        return int(s["first_mismatch"]["step"])
    return next((int(x["step"]) for x in s.get("logits") or [] if not x["allclose"]), None)


def _bisect(summary: dict, progs, step: int, log) -> None:
    from irviz.core.generate.mismatch_bisect import bisect_generation

    def progress(text, fraction=None, pass_name=None):
        if text.startswith("Bisect:"):
            log(text)

    try:
        found = bisect_generation(progs, step, summary["torch_tokens"], progress=progress)
    except Exception as exc:  # the mismatch stands without its bisect
        from irviz.core.errors import IrvizError

        error = exc.user_message() if isinstance(exc, IrvizError) else f"{type(exc).__name__}: {exc}"
        summary["bisect"] = {"error": error, "token_step": step}
        print(f"irviz: bisect failed: {error}", file=sys.stderr)
        return
    summary["bisect"] = found
    for c in found["steps_checked"]:
        what = "ok" if c["ok"] else f"BAD ({c['stage']})"
        log(f"  {found['program']} step {c['index']:2d} {c['pass']:28} {c['seconds']:6.2f} s  {what}")
    log(found["message"])


def _mismatch(s: dict) -> str:
    from irviz.core.generate.generation import mismatch_message

    return mismatch_message(s)


def _ms(pair: dict | None, key: str) -> str:
    v = finite((pair or {}).get(key))
    return "n/a" if v is None else f"{v:.3f} ms"


def _print(s: dict, log) -> None:
    if s["no_weights"]:
        log(f"estimate prefill {s['estimated_prefill_ms']:.3f} ms, decode {s['estimated_decode_ms_per_token']:.3f} "
            f"ms/token (per-kernel timing, no weights)")
        if s["bandwidth_limit_ms_per_token"] is not None:
            log(f"limit    decode >= {s['bandwidth_limit_ms_per_token']:.3f} ms/token: {s['weight_bytes']:,} "
                f"weight + {s['kv_cache_bytes']:,} cache bytes at {s['bandwidth_gbs']} GB/s measured")
    else:
        log(f"tokens   TVM   {s['tvm_tokens']}")
        log(f"tokens   torch {s['torch_tokens']}")
        log(f"compare  tokens {'match' if s['tokens_match'] else 'DIFFER'}; logits max abs error "
            f"{s['logits_max_abs_error']:.3g}")
        for what, key in (("prefill", "prefill_ms"), ("decode", "decode_ms_per_token")):
            log(f"{what:8s} TVM {_ms(s[key], 'tvm')}, torch eager {_ms(s[key], 'torch')}"
                + (" per token" if what == "decode" else ""))
        tps = s["tokens_per_s"]
        log(f"speed    TVM {tps['tvm']:.1f} tokens/s, torch eager {tps['torch']:.1f} tokens/s "
            f"({s['threads']} threads)")
    if s["reliable"] is False:
        print(f"irviz: timing unreliable: {s['reason']}", file=sys.stderr)
