"""MetaScheduleTune and MetaScheduleApply: TVM's MetaSchedule as steps of the pipeline
(``core.tuning.meta_schedule`` does the work).

A Tune step whose kernels already have `trials` records in its database applies them without
searching again: replaying a session (the app's cancel and crash recovery) costs a build per kernel,
not a search. Each kernel's before/after times and why it was chosen go into the step's notes and
into the kernel's ``irviz.meta_schedule`` attribute, next to the schedule in the diff.
"""
from __future__ import annotations

import tvm

from irviz.core.errors import PassError
from irviz.core.passes.registry import pass_note, pass_progress
from irviz.core.tuning import meta_schedule as ms_tuning
from irviz.core.tuning import meta_schedule_space as ms_space


def _names(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value if str(v).strip()]
    return [s.strip() for s in str(value).split(",") if s.strip()]


def _note(rep: dict) -> str:
    if not rep.get("applied"):
        return f"{rep['kernel']}: {ms_space.outcome(rep)}"
    times = (f"{rep['before_ms']} ms -> {rep['after_ms']} ms" if rep.get("before_ms") is not None
             else f"best measured {rep.get('db_ms')} ms")
    done = rep.get("measured_now")
    how = f"{done} candidates measured now" if done else "from the database"
    return f"{rep['kernel']}: MetaSchedule's schedule, {times} ({how}; chosen by {rep['why']})"


def _run(mod, db, trials, kernels, top, tune: bool):
    target = tvm.target.Target.current()
    if target is None:
        raise PassError("MetaSchedule needs a target", hint="run the pass through a session or `irviz tune`")
    if tune and int(trials) < 1:
        raise PassError(f"trials must be at least 1, got {trials}")
    if tune and not any(isinstance(f, tvm.tirx.PrimFunc) for f in mod.functions.values()):
        # the hint is in the message: TVM's pass boundary keeps only an exception's text
        raise PassError("MetaScheduleTune tunes TensorIR kernels, and this step has none yet: place it after "
                        "FuseTIR, where the fused kernels exist (e.g. the pipeline "
                        "'tir-cpu,MetaScheduleTune(trials=16)' or '...,FuseOps,FuseTIR,MetaScheduleTune')")
    path = db or str(ms_tuning.default_db_dir(ms_tuning.tuning_target(target)))
    out, reports = ms_tuning.tune_module(mod, target, path, int(trials), kernels=_names(kernels), top=int(top),
                                         progress=pass_progress, tune=tune)
    pass_note(f"database: {path}")
    for rep in reports:
        pass_note(_note(rep))
    return out


def meta_schedule_tune(trials: int = 8, kernels: str = "", top: int = ms_tuning.DEFAULT_TOP, db: str = ""):
    @tvm.ir.transform.module_pass(opt_level=0, name="MetaScheduleTune")
    def _pass(mod, ctx):
        return _run(mod, db, trials, kernels, top, tune=True)

    return _pass


def meta_schedule_apply(db: str = "", kernels: str = ""):
    @tvm.ir.transform.module_pass(opt_level=0, name="MetaScheduleApply")
    def _pass(mod, ctx):
        return _run(mod, db, 0, kernels, 0, tune=False)

    return _pass
