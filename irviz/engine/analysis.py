"""Comparing two pipelines, bisecting a wrong build, repro folders, pattern queries."""
from __future__ import annotations

import os
from types import SimpleNamespace

from irviz.core.backend.step_bisect import bisect, reference_for
from irviz.core.backend.diverging import diverging_at
from irviz.core.export import repro
from irviz.core import pipeline_compare as compare_mod
from irviz.engine.session_commands import pipeline_text
from irviz.protocol.commands import BadRequest, error_dict
from irviz.engine.handler_context import EngineContext

# irviz.core imports that load torch or TVM stay in the handlers (see irviz.engine.session_commands).


class AnalysisCommands:
    """The commands that compare pipelines, bisect a wrong build, write repro folders and query."""

    def __init__(self, ctx: EngineContext):
        self.ctx = ctx

    def compare(self, pipeline_b, pipeline_a=None, measure=True, repeats=5) -> dict:
        """Run two pipelines on the open model's import (A: by default the session's own pipeline)
        and align their steps; `measure` builds and runs the last step of each."""
        self.ctx.ws.need_session()
        if pipeline_a is None:
            pipeline_a = pipeline_text(self.ctx.ws.session)
        cmp = compare_mod.compare_pipelines(self.ctx.ws, [pipeline_a, pipeline_b], progress=self.ctx.progress)
        self.ctx.comparison = cmp
        if measure:
            compare_mod.measure(self.ctx.ws, cmp, repeats=int(repeats), progress=self.ctx.progress)
        self.ctx.progress("Compared", 1.0)
        return compare_mod.comparison_dict(cmp)

    def compare_diff(self, a, b, mode="pair") -> dict:
        """`pair`: the IR at A's step a against B's step b (text and graph); `pass`: what the pass
        at those steps did under A against under B (diff of diffs)."""
        cmp = self._open_comparison()
        if mode not in ("pair", "pass"):
            raise BadRequest(f"compare_diff mode is 'pair' or 'pass', not {mode!r}")
        fn = compare_mod.pair_diff if mode == "pair" else compare_mod.pass_diff
        return fn(cmp, int(a), int(b))

    def compare_graphs(self, a, b, func="main") -> dict:
        """`func` at A's step a and B's step b, both laid out, with the nodes only in A / only in B /
        changed (compare.pair_graphs)."""
        return compare_mod.pair_graphs(self._open_comparison(), int(a), int(b), str(func))

    def _open_comparison(self):
        cmp = self.ctx.comparison
        if cmp is None or self.ctx.ws.imported is None or not cmp.steps[0][0].mod.same_as(self.ctx.ws.imported.mod):
            raise BadRequest("No comparison of the open model", "run Compare with pipeline… again")
        return cmp

    def bisect(self, atol=None, rtol=None) -> dict:
        """Apply the planned passes, then find the first step whose build mismatches the reference
        or fails to build or run (core.backend.bisect); one progress message per step checked."""
        s = self.ctx.ws.need_session()
        if s.pipeline:
            try:
                self.ctx.ws.run_to_end()
            except Exception:  # a pass that fails is the bisect's "pass" verdict
                pass
        ref = reference_for(self.ctx.ws)
        result = bisect(s, ref, atol=atol, rtol=rtol, progress=self.ctx.progress,
                        target=self.ctx.ws.runnable_target("Find first bad pass")).as_dict()
        result["diverging"] = self._diverging(result.get("first_bad"), atol, rtol)
        # a repro folder written later of a checked step says what the bisect found there
        self.ctx.last_bisect = (self._passes_of(s), {c["index"]: c for c in result["steps_checked"]})
        self.ctx.progress("Bisect: done", 1.0)
        return result

    @staticmethod
    def _passes_of(s, upto: int | None = None) -> list:
        return [(st.pass_name, dict(st.params or {})) for st in s.steps[1:None if upto is None else upto + 1]]

    def _bisect_verdict(self, index: int):
        """The last bisect's check of step `index`, while the steps up to it are the same."""
        last = self.ctx.last_bisect or ([], {})
        passes, checks = last
        check = checks.get(index)
        s = self.ctx.ws.need_session()
        if check is None or passes[:index] != self._passes_of(s, index):
            return None
        return SimpleNamespace(stage=check.get("stage") or "none (outputs matched)",
                               reason=check.get("reason") or "Find first bad pass: this step matched")

    def _diverging(self, fb, atol, rtol):
        """The bad step's diverging bindings, for its diff (only wrong numbers have any)."""
        if not fb or fb.get("stage") != "compare" or self.ctx.ws.captured is None:
            return None
        self.ctx.progress(f"Bisect: comparing intermediates at step {fb['index']}", 0.97)
        try:
            return diverging_at(self.ctx.ws, fb["index"], atol=atol, rtol=rtol)
        except Exception as exc:  # the verdict stands without the marks
            return {"error": (error_dict(exc, "intermediates")["message"] or "failed").splitlines()[0]}

    def write_repro(self, out_dir, step=None, pass_name=None, params=None, stage=None, reason="",
                    atol=None, rtol=None) -> dict:
        """The repro folder of a step's pass (`step`, None: the cursor), or, after a crash (stage
        "pass" with `pass_name`, or "build"), of what killed the engine (core.export.repro)."""
        if stage == "pass" and pass_name:
            path = repro.repro_for_crash(self.ctx.ws, out_dir, pass_name, params, stage="pass",
                                         reason=reason)
        elif stage == "build":
            path = repro.repro_for_crash(self.ctx.ws, out_dir, stage="build", step=step, reason=reason)
        else:
            index = self.ctx.ws.step_at(step).index
            path = repro.repro_for_step(self.ctx.ws, out_dir, index, verdict=self._bisect_verdict(index),
                                        atol=atol, rtol=rtol)
        return {"path": os.fspath(path), "files": sorted(p.name for p in path.iterdir())}

    def query(self, pattern) -> dict:
        """The pattern's matches at every recorded step (irviz.core.views.graph_query)."""
        from irviz.core.views.graph_query import query_steps

        return query_steps(self.ctx.ws.need_session().steps, pattern)
