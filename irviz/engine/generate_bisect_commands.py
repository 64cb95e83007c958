"""The bisect of a generation's first wrong token: the program that made it (prefill, or decode at
that step) checked step by step on the step's inputs as torch computed them
(core.generate.mismatch_bisect). Its reply carries the same stamp as `generate`'s, so the GUI
greys it by the same rule."""
from __future__ import annotations

from irviz.engine.handler_context import EngineContext
from irviz.protocol.commands import BadRequest

# irviz.core.generate loads torch and TVM: imported in the handler (see irviz.engine.session_commands).


class GenerateBisectCommands:
    def __init__(self, ctx: EngineContext):
        self.ctx = ctx

    def generate_bisect(self, step, torch_tokens=None, atol=None, rtol=None) -> dict:
        from irviz.core.generate.mismatch_bisect import bisect_generation
        from irviz.core.generate.programs import target_name
        from irviz.engine.generate_commands import current, model_name, passes_at

        g = current(self.ctx)
        if g is None:
            raise BadRequest("No model is open for generation: open a causal LM for generation first")
        self.ctx.ws.need_weights("Bisecting a generation step")
        progs = g.progs
        room = progs.layout.max_len - int(progs.prompt.shape[1])
        if not 0 <= int(step) <= room:
            raise BadRequest(f"`step` is {step}: the generated tokens' steps run from 0 to {room}")
        stamp = {"model": model_name(g.spec), "spec": g.spec, "program": g.program,
                 "max_len": progs.layout.max_len, "target": target_name(progs.target),
                 "steps": {p.name: p.session.cursor for p in (progs.prefill, progs.decode)},
                 "passes": {p.name: passes_at(p.session) for p in (progs.prefill, progs.decode)}}
        result = bisect_generation(progs, int(step), torch_tokens, atol=atol, rtol=rtol,
                                   progress=self.ctx.progress)
        result["stamp"] = stamp
        self.ctx.progress("Bisect: done", 1.0)
        return result
