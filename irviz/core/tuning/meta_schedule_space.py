"""Can MetaSchedule sample a kernel's space, and whose schedule stays when it cannot (or loses).

TVM's evolutionary search starts from an initial population: it replays each design space with
fresh random decisions and runs the postprocessors on it, and when too few candidates survive it
logs "Cannot sample enough initial population" and measures nothing. On an already scheduled kernel
every candidate fails the same way (RewriteParallelVectorizeUnroll refuses a loop that is already
parallel), and TVM spends a minute or more finding that out. ``sampling_failure`` replays a few
candidates the same way first: when none survives, irviz says why at once instead of searching.
"""
from __future__ import annotations

import logging
from collections import Counter

# whose schedule a kernel has; `kept_words` says which one stays
LEARNER = "the learner's schedule"
RULES = "irviz's rules' schedule"
UNSCHEDULED = "unscheduled"
EARLIER = "MetaSchedule's earlier schedule"

# candidates replayed per design space before the search is given up (TVM tries up to 2560)
PROBE_SAMPLES = 16


def schedule_owner(func, name: str | None, note_attr: str) -> str:
    """Whose schedule `func` has: MetaSchedule's (an earlier tune), the learner's (their schedule()
    changed it, or its loops are parallel, vectorized or split without irviz's rules' mark), irviz's
    rules', or none."""
    from irviz.core.schedules.rules import DONE_ATTR, user_scheduled

    attrs = func.attrs or {}
    if note_attr in attrs:
        return EARLIER
    if DONE_ATTR in attrs:
        return RULES
    return LEARNER if user_scheduled(func, name) is not None else UNSCHEDULED


def kept_words(owner: str) -> str:
    return "kept the kernel unscheduled" if owner == UNSCHEDULED else f"kept {owner}"


def short_kept(owner: str) -> str:
    """The table's word for what stays."""
    return {LEARNER: "learner's kept", RULES: "rules' kept", UNSCHEDULED: "unscheduled kept",
            EARLIER: "earlier MS kept"}.get(owner, "kept")


def outcome(rep: dict) -> str:
    """One sentence for a kernel's report: what MetaSchedule did and whose schedule the kernel has now."""
    if rep.get("applied"):
        return "MetaSchedule's schedule"
    owner = rep.get("owner", UNSCHEDULED)
    if rep.get("sample_error"):
        why = f"MetaSchedule could not sample this kernel's space: {rep['sample_error']}"
        if rep.get("already_scheduled"):
            why += (f"; the kernel was already scheduled ({rep['already_scheduled']}) and MetaSchedule's "
                    "rules start from plain loops")
            if rep.get("source_differs"):
                why += ", but its unscheduled form takes other operands (e.g. weights prepacked)"
    elif rep.get("note"):
        why = rep["note"]
    elif rep.get("after_ms") is not None:
        why = (f"MetaSchedule's schedule was not faster here ({rep.get('before_ms')} ms with "
               f"{rep.get('before_is', 'the kernel as it was')}, {rep['after_ms']} ms with MetaSchedule's)")
    else:
        why = "MetaSchedule's schedule could not be timed here"
    return f"{why}; {kept_words(owner)}"


class CannotSample(Exception):
    """MetaSchedule cannot draw a single candidate from this kernel's space; the text is why."""


def _name(obj) -> str:
    return type(obj).__name__


def sampling_failure(ctx, seed: int = 1) -> str | None:
    """Why `ctx`'s search would find no valid candidate (the postprocessor that rejects every
    replayed candidate, or the error building the space); None as soon as one candidate survives."""
    from tvm import s_tir
    from tvm.s_tir.schedule import Trace

    try:
        spaces = ctx.generate_design_space()
    except Exception as exc:  # the space generator's rules failed on this kernel
        return f"TVM could not build its design space ({_first_line(exc)})"
    if not spaces:
        return "TVM's space generator made no design space for it"
    postprocs = list(ctx.space_generator.postprocs or [])
    rejected: Counter = Counter()
    for space in spaces:
        trace = Trace(space.trace.insts, {})  # fresh random decisions, as the search draws them
        for i in range(PROBE_SAMPLES):
            sch = s_tir.Schedule(ctx.mod, seed=seed + i, debug_mask=0)
            try:
                trace.apply_to_schedule(sch, remove_postproc=True)
                sch.enter_postproc()
            except Exception as exc:
                rejected[f"replaying its trace failed ({_first_line(exc)})"] += 1
                continue
            failed = None
            for p in postprocs:
                try:
                    ok = p.apply(sch)
                except Exception as exc:
                    ok, failed = False, f"TVM's postprocessor {_name(p)} raised {_first_line(exc)}"
                if not ok:
                    failed = failed or f"TVM's postprocessor {_name(p)} rejected every candidate"
                    break
            if failed is None:
                return None
            rejected[failed] += 1
    return rejected.most_common(1)[0][0]


def _first_line(exc: Exception) -> str:
    lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
    msg = next((ln for ln in lines if "Error" in ln or "Check failed" in ln), lines[-1] if lines else _name(exc))
    return msg.strip()[:240]


class WarningsKept(logging.Handler):
    """Keeps the warnings MetaSchedule logs for one task (e.g. "Cannot sample enough initial
    population"), so irviz can say them in its own words instead of TVM printing them bare."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record):
        msg = record.getMessage()
        self.messages.append(msg.split("] ", 1)[1] if msg.startswith("[") and "] " in msg else msg)


def task_logger(name: str) -> tuple[logging.Logger, WarningsKept]:
    logger = logging.getLogger(f"irviz.meta_schedule.{name}")
    logger.propagate = False
    logger.setLevel(logging.WARNING)
    for h in list(logger.handlers):
        logger.removeHandler(h)
    kept = WarningsKept()
    logger.addHandler(kept)
    return logger, kept


def sampling_warning(messages: list[str]) -> str | None:
    return next((m for m in messages if "Cannot sample" in m or "sample" in m.lower()), None)


def unscheduled_sources(session) -> tuple[dict, dict]:
    """({kernel: it before the learner's schedule() or the pipeline's first CPU schedule rule},
    {kernel the learner's schedule() changed: why}) for a session's steps. MetaSchedule's rules
    expect plain loops, so a search starts from these."""
    import tvm_ffi
    from tvm import tirx

    def kernels(mod):
        return {g.name_hint: f for g, f in mod.functions.items() if isinstance(f, tirx.PrimFunc)}

    sources, authored = {}, {}
    steps = session.pass_steps()
    first = next((i for i, st in enumerate(steps) if st.pass_name.startswith("CPU")), None)
    if first is not None:
        sources = kernels((session.steps[session.n_schedule] if first == 0 else steps[first - 1]).mod)
    if session.n_schedule:
        plain = kernels(session.steps[0].mod)
        for name, f in kernels(session.steps[session.n_schedule].mod).items():
            if name in plain and not tvm_ffi.structural_equal(plain[name], f):
                sources[name] = plain[name]
                authored[name] = "schedule() of the loaded file"
    return sources, authored
