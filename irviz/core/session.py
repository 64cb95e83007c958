"""A compilation session: the imported module, then one snapshot per applied pass.

    s = Session(imported, captured)          # steps[0] is "import", cursor 0
    s.set_pipeline(passes.get_pipeline("zero"))
    s.step_forward(); s.step_back(); s.jump(3); s.run_to_end()

Model of the session
--------------------
``steps`` are the snapshots recorded so far (``steps[0]`` is the import).  ``cursor`` is the step
shown.  ``pipeline`` is the list of *planned* passes that come after ``steps[-1]`` (not applied
yet).  So the whole pipeline is ``[s.pass_name for s in steps[1:]] + pipeline``.

* ``step_forward()``: if the cursor is behind ``steps[-1]`` it just moves to the next recorded
  snapshot; otherwise it applies ``pipeline[0]`` (``passes.apply_pass``), records a Step and moves
  there.  Returns the new current Step, or None (nothing left, or the pass failed).
* ``set_pipeline(invocations)`` replaces everything after the cursor ("replace the rest of the
  pipeline"): recorded steps after the cursor are dropped, except a leading run of them that is
  exactly the same passes with the same params as the start of ``invocations`` (those snapshots are
  still valid and are kept, so re-sending the same pipeline costs nothing).
* A failing pass leaves the session where it was (the last good step), sets ``error`` to a
  PassError, keeps the failed pass at the head of ``pipeline`` (fix it or change the pipeline) and
  notifies listeners with "error".  A later successful move clears ``error``.
* Every step keeps its own IRModule.  Passes return new modules that share unchanged functions
  with their input, so this costs little; modules are never copied (copy/deepcopy segfault).

Listeners: ``subscribe(callback)``; ``callback(event, payload)`` with events
"applying" {"pass", "index"} before a pass runs (progress reports hang on it),
"stepped" {"cursor", "step", "applied": bool}, "error" {"error", "pass", "cursor"},
"pipeline_changed" {"planned", "dropped", "kept"}.  A listener that raises is logged and ignored.

Provenance (fx node name -> binding var names of "main") is carried from step to step by
``carry_provenance`` (see there).

The learner's schedule
----------------------
An IR file's ``schedule(sch)`` (``imported.schedule``, a ``schedule_steps.ScheduleRun``) is
recorded at once as steps 1..n, one per primitive, ``origin == "schedule"``.  They are the
learner's, not passes: ``full_pipeline()`` and ``set_pipeline`` start after them, and the passes
applied later leave the functions they scheduled to their author.  A primitive that failed leaves
the steps before it, the cursor on the last of them and ``schedule_error`` set: no pass runs on a
half-applied schedule.
"""
from __future__ import annotations

import logging
import time
import traceback
import weakref
from dataclasses import dataclass, field

from irviz.core import passes
from irviz.core.schedules import rules as schedules
from irviz.core.errors import IrvizError, PassError
from irviz.core.tvm_compat import host_target
from irviz.core.views import module_diff as diff_mod
from irviz.core.views.provenance import carry_provenance, clear_caches, relax_to_callee

log = logging.getLogger(__name__)

__all__ = ["Step", "Session"]


@dataclass
class Step:
    index: int
    pass_name: str
    params: dict
    seconds: float
    changed: bool
    changes: diff_mod.FunctionChanges
    mod: object  # tvm.IRModule
    provenance: dict[str, list[str]] = field(default_factory=dict)
    # what the pass said about its work, e.g. why it left the module as it was
    notes: list[str] = field(default_factory=list)
    origin: str = "pass"  # "import" | "schedule" (a primitive of the learner's schedule) | "pass"

    @property
    def changed_what(self) -> str:
        """"none", "attrs" (only function attributes changed) or "ir"."""
        return self.changes.what if self.index else "ir"

    def __repr__(self) -> str:  # never print the module
        return (f"Step({self.index}, {self.pass_name!r}, params={self.params}, "
                f"seconds={self.seconds:.4f}, changed={self.changed})")




class Session:
    def __init__(self, imported, captured=None, target=None):
        self.imported = imported
        self.captured = captured
        self._target = target  # chosen for the passes; None: none chosen (the host, and for GPU passes
        self._host = None       # the default GPU target, see passes.registry)
        mod = imported.mod
        self.steps: list[Step] = [Step(
            index=0, pass_name="import", params={"importer": getattr(imported, "importer", "")},
            seconds=float(getattr(imported, "seconds", 0.0) or 0.0), changed=True,
            changes=diff_mod.FunctionChanges(added=diff_mod.function_names(mod)), mod=mod,
            provenance={k: list(v) for k, v in (getattr(imported, "provenance", None) or {}).items()},
            origin="import",
        )]
        self.cursor = 0
        self.pipeline: list = []
        self.error: IrvizError | None = None
        self._listeners: list = []
        self.schedule = getattr(imported, "schedule", None)
        self.schedule_error: IrvizError | None = None
        self.n_schedule = 0
        self._authored: dict[str, str] = {}  # function name -> whose schedule it is
        if self.schedule is not None:
            self._record_schedule(self.schedule)
        # the hash/bindings caches keep functions (and their weights) alive: drop them with us
        weakref.finalize(self, clear_caches)

    # -- info ----------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        loaded = getattr(self.captured, "loaded", None)
        return getattr(loaded, "name", None) or "module"

    @property
    def target(self):
        """The target the passes run under (the host when none was chosen)."""
        if self._target is not None:
            return self._target
        if self._host is None:
            self._host = host_target()
        return self._host

    @target.setter
    def target(self, value) -> None:
        self._target = value  # before any pass is applied: the steps do not follow a change

    @property
    def chosen_target(self):
        """The target chosen for this session, or None (the host; GPU passes: their default)."""
        return self._target

    @property
    def current(self) -> Step:
        return self.steps[self.cursor]

    def module(self, i: int | None = None):
        return self.steps[self.cursor if i is None else i].mod

    def _record_schedule(self, run) -> None:
        for prim in run.steps:
            prev = self.steps[-1]
            changes = diff_mod.compare_modules(prev.mod, prim.mod)
            where = f"line {prim.params['line']}: {prim.params.get('code', '')}" if prim.params.get("line") else ""
            self.steps.append(Step(
                index=len(self.steps), pass_name=prim.name, params=dict(prim.params), seconds=prim.seconds,
                changed=changes.changed_any, changes=changes, mod=prim.mod,
                provenance={k: list(v) for k, v in prev.provenance.items()},
                notes=[f"your schedule() in {run.source}" + (f", {where}" if where else "")],
                origin="schedule"))
        self.n_schedule = len(run.steps)
        names = [s.pass_name for s in self.steps[1:]]
        why = f"schedule() in {run.source}: {', '.join(dict.fromkeys(names))}"
        self._authored = {f: why for f in run.scheduled_functions(self.steps[0].mod)}
        if run.error is not None:
            self.schedule_error = self.error = run.error
            self.cursor = self.n_schedule

    def pass_steps(self) -> list[Step]:
        """The steps the pipeline's passes made (after the import and the learner's schedule)."""
        return self.steps[1 + self.n_schedule:]

    def pipeline_remaining(self) -> int:
        """How many step_forward() calls can still move: recorded steps ahead + planned passes."""
        return (len(self.steps) - 1 - self.cursor) + len(self.pipeline)

    def full_pipeline(self) -> list:
        """Applied passes (steps[1:]) followed by the planned ones, as PassInvocations."""
        return [passes.PassInvocation(s.pass_name, dict(s.params)) for s in self.pass_steps()] + list(self.pipeline)

    def diff(self, i: int, j: int):
        """(unified diff text, list[FunctionDiff]) from step i to step j."""
        a, b = self.steps[i].mod, self.steps[j].mod
        return diff_mod.unified_diff(a, b), diff_mod.side_by_side(a, b)

    def relax_to_callee(self, i: int | None = None, func: str = "main") -> dict[str, str]:
        return relax_to_callee(self.steps[self.cursor if i is None else i], func)

    # -- listeners -----------------------------------------------------------------------------

    def subscribe(self, callback):
        """callback(event: str, payload: dict). Returns a function that unsubscribes."""
        self._listeners.append(callback)

        def unsubscribe():
            if callback in self._listeners:
                self._listeners.remove(callback)

        return unsubscribe

    def _emit(self, event: str, payload: dict):
        for cb in list(self._listeners):
            try:
                cb(event, payload)
            except Exception:  # a broken listener must not break the session
                log.exception("session listener failed on %s", event)

    # -- pipeline ------------------------------------------------------------------------------

    def set_pipeline(self, invocations) -> None:
        """Replace the passes after the cursor (see the module docstring); the learner's schedule
        steps stay."""
        invs = [self._with_defaults(passes.as_invocation(x)) for x in (invocations or [])]
        base = max(self.cursor, self.n_schedule)
        ahead = self.steps[base + 1:]
        kept = 0
        while (kept < len(ahead) and kept < len(invs) and ahead[kept].pass_name == invs[kept].name
               and ahead[kept].params == invs[kept].params):
            kept += 1
        dropped = len(ahead) - kept
        del self.steps[base + 1 + kept:]
        self.pipeline = invs[kept:]
        self.error = self.schedule_error
        self._emit("pipeline_changed", {"planned": list(self.pipeline), "dropped": dropped, "kept": kept})

    def _with_defaults(self, inv):
        """BindParams with no file binds the weights the import kept as parameters (--keep-params):
        the planned pass then names the file, so the pipeline text reruns the same thing."""
        params_file = getattr(self.imported, "params_file", None)
        if inv.name == "BindParams" and params_file and not inv.params.get("params"):
            inv.params["params"] = params_file
        return inv

    # -- moving --------------------------------------------------------------------------------

    def _moved(self, applied: bool) -> Step:
        self.error = None
        st = self.steps[self.cursor]
        self._emit("stepped", {"cursor": self.cursor, "step": st, "applied": applied})
        return st

    def _apply_next(self) -> Step | None:
        inv = self.pipeline[0]
        prev = self.steps[-1]
        if self.schedule_error is not None:  # no pass on a schedule that stopped half-way
            self.error = self.schedule_error
            self._emit("error", {"error": self.error, "pass": inv.name, "cursor": self.cursor, "seconds": 0.0})
            return None
        self._emit("applying", {"pass": inv.name, "index": len(self.steps)})
        t0 = time.perf_counter()
        try:
            with schedules.authored(self._authored):
                new_mod, notes = passes.apply_pass_noted(inv, prev.mod, self._target)
        except Exception as exc:  # every failure becomes a PassError
            seconds = time.perf_counter() - t0
            if isinstance(exc, IrvizError):
                err = exc
            else:
                err = PassError(f"{inv.name} failed: {type(exc).__name__}: {exc}",
                                hint="step back, or change the pipeline",
                                detail="".join(traceback.format_exception(exc)))
            self.error = err
            self._emit("error", {"error": err, "pass": inv.name, "cursor": self.cursor,
                                 "seconds": seconds})
            return None
        seconds = time.perf_counter() - t0
        changes = diff_mod.compare_modules(prev.mod, new_mod)
        try:
            prov = carry_provenance(prev.mod, new_mod, prev.provenance)
        except Exception:  # provenance is a nicety, never fail a step for it
            log.exception("provenance after %s", inv.name)
            prov = {k: [] for k in prev.provenance}
        step = Step(index=len(self.steps), pass_name=inv.name, params=dict(inv.params or {}),
                    seconds=seconds, changed=changes.changed_any, changes=changes, mod=new_mod,
                    provenance=prov, notes=notes)
        self.steps.append(step)
        self.pipeline.pop(0)
        self.cursor = step.index
        return self._moved(applied=True)

    def step_forward(self) -> Step | None:
        if self.cursor < len(self.steps) - 1:
            self.cursor += 1
            return self._moved(applied=False)
        if not self.pipeline:
            return None
        return self._apply_next()

    def step_back(self) -> Step | None:
        if self.cursor == 0:
            return None
        self.cursor -= 1
        return self._moved(applied=False)

    def jump(self, i: int) -> Step | None:
        """Go to step i (negative counts from the end of the recorded steps).  An index past the
        recorded steps applies planned passes up to it; None if one fails (error is set)."""
        if i < 0:
            i += len(self.steps)
        last = len(self.steps) - 1 + len(self.pipeline)
        if not 0 <= i <= last:
            raise IndexError(f"no step {i}: steps 0..{len(self.steps) - 1}, "
                             f"{len(self.pipeline)} more planned")
        if i < len(self.steps):
            self.cursor = i
            return self._moved(applied=False)
        self.cursor = len(self.steps) - 1
        while len(self.steps) - 1 < i:
            if self._apply_next() is None:
                return None
        return self.current

    def run_to_end(self) -> Step | None:
        """Apply every planned pass; the cursor ends on the last step.  None if a pass fails."""
        if self.cursor < len(self.steps) - 1:
            self.cursor = len(self.steps) - 1
            self._moved(applied=False)
        while self.pipeline:
            if self._apply_next() is None:
                return None
        return self.current
