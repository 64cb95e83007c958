"""Stepping a Workspace's session: planning passes, applying them one at a time or up to a step,
with progress before each pass and a log line after it (see the package docstring for the lazy
imports)."""
from __future__ import annotations

import time
from contextlib import contextmanager

from irviz.core.backend.timing import tune_seconds
from irviz.core.errors import RequestError
from irviz.core.tuning.decision_cache import set_cache_enabled
from irviz.core.workspace.host import WorkspaceHost


class Stepping:
    """The steps of the open session, for the Workspace `ws` that owns it."""

    def __init__(self, ws: WorkspaceHost):
        self.ws = ws

    def set_pipeline(self, pipeline, *, whole: bool = False) -> None:
        """Plan `pipeline` (a name, a pipeline text, a Pipeline or invocations) after the cursor;
        with `whole`, as the whole pipeline from the import (a pasted text). A text that names
        another target runs the whole pipeline again under it. A bad pipeline, or a pass that
        cannot run under the target, raises and changes nothing."""
        from irviz.core.passes.plan import plan

        s = self.ws.need_session()
        chosen = plan(pipeline, default=self.ws.target)
        if chosen.target.name != self.ws.target.name:  # by name: the session shows the spelling the text uses
            if not whole:
                raise RequestError("a pipeline that names another target replaces the whole pipeline",
                                   "set it as the whole pipeline (a pipeline text), or choose the target first")
            self.ws.set_target(chosen.target, whole=chosen.passes)
        elif whole:
            self._set_whole_pipeline(chosen.passes)
        else:
            s.set_pipeline(chosen.passes)

    def _set_whole_pipeline(self, invocations) -> None:
        """Recorded steps that match the start of `invocations` are kept, and the cursor stays
        where it was if it still can."""
        s = self.ws.need_session()
        cursor = s.cursor
        s.jump(0)
        s.set_pipeline(invocations)
        if min(cursor, len(s.steps) - 1) != s.cursor:
            s.jump(min(cursor, len(s.steps) - 1))

    def step(self):
        """One step forward: the next recorded step, or the next planned pass applied."""
        s = self.ws.need_session()
        before = s.error
        with self.reporting_passes(None, (0.0, 0.0)):
            if s.step_forward() is None:
                self._raise_pass_error(before)

    def back(self) -> None:
        self.ws.need_session().step_back()

    def jump(self, index: int) -> None:
        """Go to a recorded step; an index past them applies planned passes up to it."""
        s = self.ws.need_session()
        index = int(index)
        if index < 0:
            index += len(s.steps)
        if not 0 <= index <= len(s.steps) - 1 + len(s.pipeline):
            raise RequestError(f"No step {index}: steps 0..{len(s.steps) - 1} are recorded, "
                               f"{len(s.pipeline)} more planned")
        with self.reporting_passes(max(0, index - (len(s.steps) - 1))):
            if s.jump(index) is None:
                self._raise_pass_error()

    def run_to_end(self, fraction_span=(0.0, 1.0)) -> None:
        s = self.ws.need_session()
        with self.reporting_passes(len(s.pipeline), fraction_span):
            if s.run_to_end() is None:
                self._raise_pass_error()

    def remeasure(self) -> None:
        """Apply the applied passes again from the import, measuring every CPU decision afresh
        (library or TensorIR, conv2d tiles) instead of reading the cache; the new figures are cached."""
        from irviz.core.session import Session

        self.ws.need_session()
        applied, planned = self.ws.applied(), self.ws.planned()
        session = Session(self.ws.imported, self.ws.captured, target=self.ws.session.chosen_target)
        session.set_pipeline(applied + planned)
        session.cursor = len(session.steps) - 1  # past the learner's schedule steps, recorded already
        self.ws.session = session
        self.ws.forget_results()
        set_cache_enabled(False)
        try:
            with self.reporting_passes(len(applied)):
                for _ in applied:
                    if session.step_forward() is None:
                        raise session.error
        finally:
            set_cache_enabled(True)

    def _raise_pass_error(self, before=None):
        err = self.ws.session.error
        # the schedule's error stands from the open on: a step refused for it says so again
        if err is not None and (err is not before or err is self.ws.session.schedule_error):
            raise err

    @contextmanager
    def reporting_passes(self, total: int | None, fraction_span=(0.0, 1.0)):
        """Progress before each pass and a log line after it, from the session's own hooks."""
        a, b = fraction_span
        done = [0]

        def on_event(event, payload):
            if event == "applying":
                name = payload["pass"]
                if total is None:
                    self.ws.progress(f"Applying {name}", a, pass_name=name)
                else:
                    n = max(1, total)
                    self.ws.progress(f"Applying {name} ({done[0] + 1}/{n})", a + (b - a) * done[0] / n,
                                  pass_name=name)
            elif event == "stepped" and payload["applied"]:
                done[0] += 1
                st = payload["step"]
                what = {"attrs": "attributes only", "none": "no change"}.get(st.changed_what, "changed")
                self.ws.log(f"  {st.index:2d} {st.pass_name:28} {st.seconds:7.3f} s  {what}")
                for note in st.notes:
                    self.ws.log(f"     {note}")

        from irviz.core.passes import reporting_progress  # loads TVM: not when the CLI starts
        in_pass = lambda text, fraction=None: self.ws.progress(  # a long pass's own (MetaScheduleTune)
            text, fraction, pass_name=self.ws.session.pipeline[0].name if self.ws.session.pipeline else None)

        self.ws.stage = "pipeline"
        unsubscribe = self.ws.session.subscribe(on_event)
        t, tuned = time.perf_counter(), tune_seconds()
        try:
            with reporting_progress(in_pass):
                yield
        finally:
            unsubscribe()
            self._add_seconds("pipeline", time.perf_counter() - t)
            self._add_seconds("tune", tune_seconds() - tuned)

    def _add_seconds(self, stage: str, seconds: float) -> None:
        if seconds > 0 or stage not in self.ws.stage_seconds:
            self.ws.stage_seconds[stage] = self.ws.stage_seconds.get(stage, 0.0) + seconds
