"""An IR file's ``schedule(sch)``: the learner's TensorIR schedule, one step per primitive.

    def schedule(sch):                      # sch: tvm.s_tir.Schedule(the file's IRModule)
        block_Y = sch.get_sblock("Y", func_name="mm_relu")
        i, j, k = sch.get_loops(block_Y)
        j0, j1 = sch.split(j, factors=[None, 4])
        ...

``run_schedule`` runs it once on a traced Schedule, takes ``sch.trace`` and replays every prefix
of it on the file's module: one IRModule per primitive that changes the IR (split, reorder,
reverse_compute_at, parallel, ...). Lookups (get_sblock, get_loops, sample_*) change nothing and
fold into the primitive after them. While it runs, a line tracer notes which line of the file
each instruction came from and how long the line took. ``schedule`` may also return a
``Schedule`` or a ``Trace`` to step instead of ``sch``'s.

A primitive that fails (a block that does not exist, a loop that cannot be parallel) ends the
schedule there: the primitives before it are kept, and the error names the file's line.
"""
from __future__ import annotations

import linecache
import re
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from irviz.core.errors import PassError, tvm_error_text
from irviz.core.user_code import exception_line


# The course writes TVM 0.2's names; TVM 0.27 renamed these (AttributeError otherwise).
COURSE_NAMES = {
    "get_block": "get_sblock",
}

# instruction kinds whose Python method is not the snake_case of the kind's name
_KIND_NAMES = {"GetSBlock": "get_sblock", "RFactor": "rfactor"}


@dataclass
class ScheduleStep:
    name: str        # the primitive's method: "split", "reorder", ...
    params: dict     # {"line": N, "code": the file's line, "trace": the call as the trace replays it}
    mod: object      # tvm.IRModule after this primitive
    seconds: float   # what the line took when schedule() ran


@dataclass
class ScheduleRun:
    source: str                      # the file as messages show it
    steps: list[ScheduleStep] = field(default_factory=list)
    trace: object | None = None      # s_tir.Trace of the primitives that ran
    error: PassError | None = None   # the primitive that failed (the steps before it are kept)
    seconds: float = 0.0

    def scheduled_functions(self, before) -> list[str]:
        """The PrimFuncs the schedule changed (by name), against the module `before` it."""
        import tvm_ffi
        from tvm import tirx

        if not self.steps:
            return []
        after = self.steps[-1].mod
        old = {gv.name_hint: f for gv, f in before.functions.items()}
        out = []
        for gv, f in after.functions.items():
            if isinstance(f, tirx.PrimFunc) and not (
                    gv.name_hint in old and tvm_ffi.structural_equal(old[gv.name_hint], f)):
                out.append(gv.name_hint)
        return sorted(out)

    def trace_python(self) -> str:
        """``def apply_trace(sch): ...``: the trace as Python that replays it in plain TVM."""
        lines = list(self.trace.as_python(remove_postproc=False)) if self.trace is not None else []
        body = "\n".join(f"    {ln}" for ln in lines) or "    pass"
        return f"def apply_trace(sch: s_tir.Schedule) -> None:\n{body}\n"


def primitive_name(kind_name: str) -> str:
    """"ReverseComputeAt" -> "reverse_compute_at": the Schedule method an instruction came from."""
    if kind_name in _KIND_NAMES:
        return _KIND_NAMES[kind_name]
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", kind_name).lower()


class _LineClock:
    """A tracer for the learner's file: after each of its lines, how many instructions the trace
    holds, so each instruction has the line it came from and the time that line took."""

    def __init__(self, sch, filename: str):
        self.sch, self.filename = sch, filename
        self.count = 0
        self.line: int | None = None
        self.marks: list[tuple[int, int | None, float]] = []  # (instructions after, line, seconds)
        self.t = time.perf_counter()

    def _seen(self, new_line: int | None) -> None:
        now = time.perf_counter()
        trace = self.sch.trace
        n = len(trace.insts) if trace is not None else 0
        if n > self.count:
            self.marks.append((n, self.line, now - self.t))
            self.count = n
        self.line = new_line
        self.t = time.perf_counter()  # the counting is not the learner's time

    def _global(self, frame, event, arg):
        if event == "call" and frame.f_code.co_filename == self.filename:
            return self._local
        return None

    def _local(self, frame, event, arg):
        if event == "line":
            self._seen(frame.f_lineno)
        elif event == "return":
            back = frame.f_back
            self._seen(back.f_lineno if back is not None and back.f_code.co_filename == self.filename
                       else self.line)
        return self._local

    def __enter__(self):
        self.old = sys.gettrace()
        sys.settrace(self._global)
        return self

    def __exit__(self, *exc):
        sys.settrace(self.old)
        self._seen(None)
        return False

    def line_of(self, index: int) -> tuple[int | None, float, int]:
        """(line, seconds that line took, which run of a line it was) of instruction `index`."""
        for k, (n, line, seconds) in enumerate(self.marks):
            if index < n:
                return line, seconds, k
        return None, 0.0, -1


def _source_line(filename: str, line: int | None) -> str:
    return linecache.getline(filename, line).strip() if line else ""


def _failure(exc: BaseException, filename: str, shown: str) -> PassError:
    """The error of a failing schedule(): its line in the file, TVM's reason in a sentence."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    where = f"{Path(shown).name}:{frames[-1].lineno}" if frames else Path(shown).name
    code = (frames[-1].line or "").strip() if frames else ""
    text = str(exc)
    hint = "fix the line and open the file again; the primitives before it are kept as steps"
    if isinstance(exc, AttributeError):
        m = re.search(r"'Schedule' object has no attribute '(\w+)'", text)
        if m and m.group(1) in COURSE_NAMES:
            new = COURSE_NAMES[m.group(1)]
            hint = (f"TVM 0.27 calls the course's sch.{m.group(1)} sch.{new} (same arguments): "
                    f"write sch.{new}(...)")
        elif "module 'tvm' has no attribute 'tir'" in text:
            hint = "TVM 0.27 has no tvm.tir: a schedule is tvm.s_tir.Schedule, TensorIR is tvm.tirx"
        reason = exception_line(exc)
    elif type(exc).__name__ == "ScheduleError":
        m = re.search(r"Error message: (.*)", text)
        prim = re.search(r"schedule primitive '([\w-]+)'", text)
        reason = (f"ScheduleError in {prim.group(1)}: " if prim else "ScheduleError: ") + (
            m.group(1).strip() if m else tvm_error_text(exc, head=3, tail=0))
    else:
        reason = tvm_error_text(exc, head=3, tail=0, with_type=True)
    return PassError(f"schedule() failed at {where}" + (f" ({code})" if code else "") + f": {reason}",
                     hint=hint, detail="".join(traceback.format_exception(exc)))


def _replayed(trace, mod, ends: list[int]) -> list:
    """The module after each prefix insts[:e + 1] of `trace`, replayed on a fresh Schedule."""
    from tvm import s_tir

    insts = list(trace.insts)
    decisions = dict(trace.decisions.items()) if trace.decisions is not None else {}
    out = []
    for e in ends:
        prefix = insts[:e + 1]
        chosen = {i: d for i, d in decisions.items() if any(i.same_as(p) for p in prefix)}
        sch = s_tir.Schedule(mod)
        s_tir.Trace(prefix, chosen).apply_to_schedule(sch, remove_postproc=False)
        out.append(sch.mod)
    return out


def _work_on_the_one(sch, mod) -> None:
    """The course's TVM looked blocks up in "main" when no func_name was given
    (``sch.get_block("Y")`` on a te.create_prim_func module); TVM 0.27 needs ``work_on`` first.
    Work on the module's one PrimFunc (or its PrimFunc "main"), so the course's calls work."""
    from tvm import tirx

    prims = [gv.name_hint for gv, f in mod.functions.items() if isinstance(f, tirx.PrimFunc)]
    name = prims[0] if len(prims) == 1 else "main" if "main" in prims else None
    if name is not None:
        sch.work_on(name)


def run_schedule(fn, mod, path, shown: str) -> ScheduleRun:
    """Run the file's ``schedule(sch)`` on ``mod`` and step it (see the module docstring)."""
    import tvm
    import tvm_ffi
    from tvm import s_tir

    filename = str(path)
    run = ScheduleRun(source=shown)
    try:
        sch = s_tir.Schedule(mod)
    except Exception as exc:  # e.g. a PrimFunc TVM's schedule cannot hold
        run.error = PassError(f"cannot schedule the module of {Path(shown).name}: "
                              f"{tvm_error_text(exc, head=3, tail=0)}",
                              hint="schedule(sch) works on TensorIR written with T.sblock "
                                   "(@T.prim_func(s_tir=True)) or made by te.create_prim_func",
                              detail="".join(traceback.format_exception(exc)))
        return run
    _work_on_the_one(sch, mod)
    t0 = time.perf_counter()
    clock = _LineClock(sch, filename)
    returned = None
    try:
        with clock:
            returned = fn(sch)
    except Exception as exc:  # a failing primitive: keep what ran before it
        run.error = _failure(exc, filename, shown)
    run.seconds = time.perf_counter() - t0
    trace, lines_known, final = sch.trace, True, sch.mod
    if run.error is None and returned is not None:
        if isinstance(returned, s_tir.Trace):
            trace, lines_known, final = returned, False, None
        elif isinstance(returned, s_tir.Schedule):
            if not returned.same_as(sch):
                trace, lines_known, final = returned.trace, False, returned.mod
        elif not (isinstance(returned, tvm.IRModule) and tvm_ffi.structural_equal(returned, sch.mod)):
            run.error = PassError(
                f"schedule(sch) in {Path(shown).name} returned {type(returned).__name__}",
                hint="change the `sch` it is given and return nothing (or return a Schedule or its trace)")
            return run
    run.trace = trace
    insts = list(trace.insts) if trace is not None else []
    calls = list(trace.as_python(remove_postproc=False)) if trace is not None else []
    ends = [k for k, inst in enumerate(insts) if not inst.kind.is_pure]
    try:
        mods = _replayed(trace, mod, ends) if ends else []
    except Exception as exc:
        run.error = PassError(f"the trace of schedule() in {Path(shown).name} does not replay on its "
                              f"module: {tvm_error_text(exc, head=3, tail=0)}",
                              hint="schedule the `sch` irviz gives schedule(sch)",
                              detail="".join(traceback.format_exception(exc)))
        return run
    for k, m in zip(ends, mods):
        line, seconds, mark = clock.line_of(k) if lines_known else (None, 0.0, -1)
        params = {"line": line, "code": _source_line(filename, line)} if line else {}
        if len(calls) == len(insts):
            params["trace"] = calls[k]
        # a line that made several primitives at once (a helper's call) shares its time among them
        sharing = sum(1 for e in ends if clock.line_of(e)[2] == mark) if line else 1
        run.steps.append(ScheduleStep(primitive_name(insts[k].kind.name), params, m, seconds / sharing))
    if run.error is None and final is not None and mods and not tvm_ffi.structural_equal(mods[-1], final):
        run.error = PassError(f"replaying the trace of schedule() in {Path(shown).name} gave another "
                              "module than the schedule did", hint="schedule the `sch` irviz gives schedule(sch)")
    return run
