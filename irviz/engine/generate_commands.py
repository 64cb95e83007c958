"""The generation commands: a causal LM opened as two programs (prefill and decode) over one static
KV cache, the chooser between them, and greedy generation in TVM against transformers' generate.

The workspace holds one session at a time, as it does for a graph of graph breaks: the program
chosen is installed as the open model (its loaded wrapper, capture, import and session), so every
view, step, diff and build command works on it unchanged. The other program's session waits in
the Programs object with its own steps and cursor."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from irviz.engine.handler_context import EngineContext
from irviz.protocol.commands import BadRequest, GenerateResult, GenerationInfo, State

# irviz.core.generate loads torch and TVM: imported in the handlers (see irviz.engine.session_commands).


@dataclass
class OpenGeneration:
    progs: Any               # irviz.core.generate.programs.Programs
    spec: str
    pipeline: str
    tokens: int
    program: str = "prefill"
    built_from: dict = field(default_factory=dict)  # program -> the IRModule its build is of


def model_name(spec: str) -> str:
    """'hf_llama' for sample:hf_llama, 'my_lm' for /x/my_lm.py or /x/my_lm.py:factory."""
    if spec.startswith("sample:"):
        return spec.split(":", 1)[1]
    return Path(spec.split(":", 1)[0] if ":" in Path(spec).name else spec).stem


def current(ctx: EngineContext) -> OpenGeneration | None:
    """The generation open now (None once another model was opened over it). A session the
    workspace made afresh for the program (set_target, remeasure) becomes the program's."""
    g = ctx.generation
    if g is None:
        return None
    ws = ctx.ws
    prog = g.progs.program(g.program)
    if ws.imported is not prog.imported:
        ctx.generation = None
        return None
    if ws.session is not None and ws.session is not prog.session:
        prog.session = ws.session
    return g


def passes_at(session) -> list[str]:
    """The passes applied up to the cursor as "name {params}": what makes that step that step."""
    return [f"{st.pass_name} {json.dumps(st.params or {}, sort_keys=True, default=str)}"
            for st in session.steps[1:session.cursor + 1]]


def generation_info(ctx: EngineContext) -> GenerationInfo | None:
    from irviz.core.generate.programs import target_name
    from irviz.core.generate.generation_report import by_length, describe_programs

    g = current(ctx)
    if g is None:
        return None
    progs = g.progs
    programs = describe_programs(progs)
    for name, info in programs.items():
        session = progs.program(name).session
        info.update(cursor=session.cursor, at=passes_at(session))
    layout = progs.layout
    return cast(GenerationInfo, {"program": g.program, "programs": programs, "tokens": g.tokens, "max_len": layout.max_len,
            "prompt_len": int(progs.prompt.shape[1]), "kv_cache_bytes": int(layout.bytes),
            "kv_cache_shape": {"tensors": layout.tensors, "each": list(layout.shape),
                               "dtype": str(layout.dtype).replace("torch.", "")},
            "kv_cache_bytes_by_length": by_length(layout), "pipeline": g.pipeline,
            "target": target_name(progs.target), "context_length": progs.context_length,
            "context_reason": progs.context_reason, "decode_reads": progs.decode_reads})


def open_generation(ctx: EngineContext, spec, pipeline="zero", tokens=16, max_len=None,
                    no_weights=False) -> OpenGeneration:
    """Open `spec`'s prefill and decode programs, the prefill installed as the open model."""
    from irviz.core.generate.generation_report import open_for_generation

    if int(tokens) < 1:
        raise BadRequest(f"`tokens` is {tokens}: generate at least one token")
    ctx.progress(f"Capturing {spec} as a prefill and a decode program over a static KV cache", 0.05)
    done = []

    def log(line: str) -> None:
        done.append(line)
        ctx.progress(f"Opened {line}", 0.45 * len(done))

    progs = open_for_generation(spec, tokens=int(tokens), max_len=max_len, pipeline=pipeline or "zero",
                                no_weights=bool(no_weights), log=log)
    name = model_name(spec)
    for p in (progs.prefill, progs.decode):
        p.loaded.name = f"{name} {p.name}"
    ctx.ws.target = progs.target
    g = OpenGeneration(progs, spec, pipeline or "zero", int(tokens))
    install(ctx, g, "prefill")
    return g


def install(ctx: EngineContext, g: OpenGeneration, program: str) -> None:
    """`program` becomes the open model: every view, step and build command works on it."""
    p = g.progs.program(program)
    ctx.ws.replace_open(g.spec, "exported_program", p.loaded, p.captured, p.imported, p.session)
    g.program = program
    ctx.generation = g


def replay_generation(ctx: EngineContext, spec, generation: dict, no_weights=False, cursor=None,
                      pass_files=()) -> None:
    """A restarted engine's replay of a model open for generation: opened again as it was, the
    program that was shown installed, its cursor where it was (within the steps its pipeline
    records)."""
    from irviz.core.passes import load_pass_file

    for path in pass_files or ():
        load_pass_file(path)
    g = open_generation(ctx, spec, generation.get("pipeline") or "zero", generation.get("tokens") or 16,
                        generation.get("max_len"), no_weights)
    install(ctx, g, str(generation.get("program") or "prefill"))
    s = ctx.ws.need_session()
    if cursor is not None:
        c = max(0, min(int(cursor), len(s.steps) - 1))
        if c != s.cursor:
            s.jump(c)


class GenerateCommands:
    def __init__(self, ctx: EngineContext, state):
        self.ctx = ctx
        self._state = state  # the session commands' state(): what these answer with

    def generate_open(self, spec, pipeline="zero", tokens=16, max_len=None, no_weights=False) -> State:
        open_generation(self.ctx, spec, pipeline, tokens, max_len, no_weights)
        self.ctx.progress("Ready", 1.0)
        return self._state()

    def choose_program(self, program) -> State:
        g = current(self.ctx)
        if g is None:
            raise BadRequest("No model is open for generation: open a causal LM for generation first")
        g.progs.program(program)  # an unknown name fails here, naming the two
        install(self.ctx, g, str(program))
        return self._state()

    def generate(self, tokens=None, repeats=10) -> GenerateResult:
        from irviz.core.generate import generation_report as report
        from irviz.core.generate.generation import mismatch_message
        from irviz.core.generate.programs import target_name

        g = current(self.ctx)
        if g is None:
            raise BadRequest("No model is open for generation: open a causal LM for generation first")
        self.ctx.ws.need_weights("Generating tokens")
        n = int(tokens if tokens is not None else g.tokens)
        room = g.progs.layout.max_len - int(g.progs.prompt.shape[1])
        if not 1 <= n <= room:
            raise BadRequest(f"`tokens` is {n}: the static cache has room for 1 to {room} generated tokens",
                             "open the model for generation again with a larger max_len")
        progs = g.progs
        for p in (progs.prefill, progs.decode):  # a program stepped since its build is built again
            if g.built_from.get(p.name) is not p.session.module():
                p.built = None
        out = report.empty_report(g.spec, g.pipeline, n, progs.layout.max_len, False)
        report.fill_from_programs(out, progs)
        self.ctx.progress("Building prefill and decode, generating in TVM and with transformers", 0.1)
        report.run_generation(out, progs, n, int(repeats))
        for p in (progs.prefill, progs.decode):
            g.built_from[p.name] = p.session.module()
        out["ok"] = bool(out["tokens_match"])
        out["mismatch"] = None if out["tokens_match"] else mismatch_message(out)
        out["stamp"] = {"model": model_name(g.spec), "spec": g.spec, "program": g.program,
                        "max_len": progs.layout.max_len, "target": target_name(progs.target),
                        "steps": {p.name: p.session.cursor for p in (progs.prefill, progs.decode)},
                        "passes": {p.name: passes_at(p.session) for p in (progs.prefill, progs.decode)}}
        self.ctx.progress(f"Generated {n} tokens", 1.0)
        return out  # type: ignore[return-value]
