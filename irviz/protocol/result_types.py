"""The shapes of the engine's bigger results and of the generation part of the state, as
TypedDicts (re-exported by irviz.protocol.commands, where the command table names them). Plain
Python only: the GUI imports this."""
from __future__ import annotations

from typing import Any, TypedDict


class Kernel(TypedDict):
    name: str
    calls: int
    ms: float  # per run of the function: the median over the instrumented runs
    binding: str | None
    decision: str | None  # what chose its code (core.views.decisions.kernel_decisions)
    # False when its time in the run and its time alone (`alone_ms`, per run; None when it was not
    # timed alone) disagree; `reason` gives both
    reliable: bool
    reason: str | None
    alone_ms: float | None


class BuildRunResult(TypedDict):
    func: str
    ok: bool
    max_abs_error: float | None
    max_rel_error: float | None
    allclose: bool | None
    verdict: str | None
    not_comparable: str | None
    reference: bool
    reference_name: str | None
    tvm_ms: float
    torch_ms: float | None
    threads: int | None
    torch_threads: int | None
    build_seconds: float
    target: str
    outputs: Any
    per_output: list
    kernels: list[Kernel]
    # False when the kernels add up to more than the run allows or their runs were competed with;
    # `kernels_reason` says which, with the figures
    kernels_reliable: bool
    kernels_reason: str | None
    tvm_timing: dict | None
    torch_timing: dict | None
    # False when something competed for the cores while a shown figure was timed; `reason` says
    # what (the views show it instead of a ratio)
    reliable: bool
    reason: str | None
    cpu: dict
    timing_text: str
    # per kernel FLOPs and bytes (from the TIR) against this CPU's measured peak and bandwidth:
    # core.backend.roofline.roofline(); None when the roofs could not be measured
    roofline: dict | None


class ProgramInfo(TypedDict):
    fx_nodes: int
    steps: int
    inputs: int      # how many of main's parameters are inputs (the rest are the shared weights)
    signature: str   # "main(input_ids, <12 weights>)"
    cursor: int
    at: list[str]    # the passes applied up to the cursor, "name {params json}": what makes the step


class GenerationInfo(TypedDict):
    """A causal LM opened for generation (`generate_open`): two programs over one static KV cache
    and the same weights; `program` is the one the session's panes show (`choose_program`)."""
    program: str                        # "prefill" | "decode"
    programs: dict[str, ProgramInfo]    # by name, in the order prefill, decode
    tokens: int                         # the tokens a `generate` makes by default
    max_len: int                        # positions of the static cache
    context_length: str | int           # "symbolic" (one build serves any max_len) or the constant built for
    context_reason: str | None          # why the context length is a constant, when it is one
    decode_reads: str                   # "used": decode attends over positions 0..position; "all": the whole cache
    prompt_len: int
    kv_cache_bytes: int                 # the whole static cache
    kv_cache_shape: dict                # {tensors, each: [dims], dtype}
    kv_cache_bytes_by_length: dict[str, int]  # context length -> bytes its filled part holds
    pipeline: str                       # as opened; each program steps on its own from there
    target: str                         # "host" or the target's name


class GenerateResult(TypedDict, total=False):
    """`generate`: the dict `irviz generate --json` writes (irviz.core.generate.generation_report), and the
    stamp of the two programs' steps it was run at."""
    ok: bool
    tokens_match: bool | None
    tvm_tokens: list[int] | None
    torch_tokens: list[int] | None
    first_mismatch: dict | None        # {step, tvm, torch} or None
    prefill_ms: dict | None            # {"tvm": ms, "torch": ms}
    decode_ms_per_token: dict | None
    tokens_per_s: dict | None
    kv_cache_bytes: int | None
    kv_cache_bytes_by_length: dict[str, int] | None
    logits_max_abs_error: float | None
    logits_allclose: bool | None
    threads: int | None
    reliable: bool | None
    reason: str | None
    prompt_len: int | None
    max_len: int | None
    context_length: str | int | None   # "symbolic" or the constant cache length the programs were built for
    mismatch: str | None               # the first differing token and step, in words; None when they match
    stamp: dict                        # {model, spec, program, max_len, steps: {prefill, decode}, passes, target}
