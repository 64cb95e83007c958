"""TVM's own MetaSchedule on the kernels irviz's rules leave slow: the MetaScheduleTune and
MetaScheduleApply passes, and `irviz tune`.

Search, cost model (XGBoost) and database are ``tvm.s_tir.meta_schedule``'s; irviz only picks the
kernels, feeds them one at a time (so progress is per kernel), and puts the schedule MetaSchedule
chose back into the module. One thing differs from ``tune_tir``: candidates are built in this
process (``_InProcessBuilder``). LocalBuilder's worker processes import ``tvm.s_tir.tensor_intrin``
first, which took 35 s on a loaded 2-core machine, longer than its 30 s build timeout, so every
candidate failed.

A kernel already scheduled (by the learner or irviz's rules) is searched from its unscheduled form
when the caller has it; one whose space TVM cannot sample is said so, with TVM's reason and whose
schedule stays (``meta_schedule_space``), before a minute is spent searching.

Databases are TVM's JSONDatabase (two JSON-lines files, appended as each candidate is measured, so
an interrupted run keeps what it measured), in the decision cache's directory, one per target.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import socket
import threading
import time
from dataclasses import dataclass
from collections.abc import Callable
from pathlib import Path

import tvm
from tvm import tirx

from irviz.core.errors import PassError
from irviz.core.tuning import meta_schedule_space as space

# Kernels tuned when the pass is not told which: the ones with the largest share of the measured time.
DEFAULT_TOP = 2
NOTE_ATTR = "irviz.meta_schedule"
_BAD_FFI = ("0.1.15",)  # tvm-ffi releases whose save_json segfaults (MetaSchedule serialises every workload)


def check_requirements() -> None:
    """PassError naming what to install when MetaSchedule cannot run here."""
    missing = []
    for mod, pkg in (("psutil", "psutil"), ("xgboost", "xgboost-cpu"), ("cloudpickle", "cloudpickle"),
                     ("tornado", "tornado")):
        try:
            __import__(mod)
        except ImportError:
            missing.append(pkg)
    if missing:
        raise PassError(f"MetaSchedule needs {', '.join(missing)}, which are not installed",
                        hint="pip install 'irviz[tune]'")
    import tvm_ffi

    version = getattr(tvm_ffi, "__version__", "")
    if version.startswith(_BAD_FFI):
        raise PassError(f"MetaSchedule crashes with apache-tvm-ffi {version} (its save_json segfaults "
                        "on any TIR expression, and MetaSchedule serialises every workload)",
                        hint="pip install 'apache-tvm-ffi==0.1.14.post1' (see constraints.txt)")


# ------------------------------------------------------------------------------------ databases
def _plain(value):
    """A target's export (tvm_ffi Maps and Arrays) as JSON-able Python."""
    if hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    try:
        return [_plain(v) for v in value]
    except TypeError:
        return str(value)


def _target_dict(target) -> dict:
    return {k: v for k, v in _plain(target.export()).items() if k != "tag"}


def target_key(target) -> str:
    """A short readable name for a target's database: kind, mtriple/mcpu, and a hash of the rest."""
    d = _target_dict(target)
    parts = [str(d.get("kind", "target")), str(d.get("mtriple", "")), str(d.get("mcpu", ""))]
    digest = hashlib.sha1(json.dumps(d, sort_keys=True).encode()).hexdigest()[:10]
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(p for p in parts if p)) + "-" + digest


def default_db_dir(target) -> Path:
    from irviz.core.tuning.decision_cache import cache_dir

    return cache_dir() / "meta_schedule" / target_key(target)


def open_db(path):
    from tvm.s_tir import meta_schedule as ms

    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PassError(f"cannot create the MetaSchedule database directory {path}: {exc}",
                        hint="give a writable --db / db=") from exc
    return ms.database.JSONDatabase(path_workload=str(path / "database_workload.json"),
                                    path_tuning_record=str(path / "database_tuning_record.json"),
                                    module_equality="structural")


def tuning_target(target):
    """MetaSchedule's CPU rules need the core count in the target."""
    d = _target_dict(target)
    if int(d.get("num-cores", 0) or 0) > 0:
        return target
    return tvm.target.Target({**d, "num-cores": os.cpu_count() or 1})


# ------------------------------------------------------------------------------------ one kernel
def workload(func) -> tvm.IRModule:
    """The kernel as MetaSchedule keys it: alone, named main (so the same computation in another
    model finds the same records)."""
    func = func.with_attr("global_symbol", "main").with_attr("tirx.noalias", True)
    return tvm.IRModule({"main": func})


def best_record(db, func, target):
    wl = workload(func)
    if not db.has_workload(wl):
        return None
    top = db.get_top_k(db.commit_workload(wl), 1)
    return top[0] if top else None


def measured_count(db, func) -> int:
    wl = workload(func)
    if not db.has_workload(wl):
        return 0
    return len(db.get_top_k(db.commit_workload(wl), 1 << 20))


def scheduled(db, func, target):
    """The kernel as the best record in `db` schedules it, attributes kept; None without records."""
    sch = db.query_schedule(workload(func), target, workload_name="main")
    if sch is None:
        return None
    out = sch.mod["main"]
    attrs = dict(func.attrs or {})
    if "global_symbol" not in attrs:  # a private kernel stays private (its module has a main)
        out = out.without_attr("global_symbol")
    for key, value in attrs.items():
        out = out.with_attr(key, value)
    return out


def _builder():
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.builder import BuilderResult, PyBuilder
    from tvm.s_tir.meta_schedule.builder.local_builder import default_build, default_export

    @derived_object
    class _InProcessBuilder(PyBuilder):
        def build(self, build_inputs):
            out = []
            for bi in build_inputs:
                try:
                    out.append(BuilderResult(default_export(default_build(bi.mod, bi.target, None)), None))
                except Exception as exc:  # a candidate that does not build is skipped, with why
                    out.append(BuilderResult(None, f"build failed: {str(exc).strip().splitlines()[0][:300]}"))
            return out

    return _InProcessBuilder()


def _space():
    from tvm.s_tir import meta_schedule as ms

    return ms.space_generator.PostOrderApply(sch_rules="llvm", postprocs="llvm", mutator_probs="llvm")


# Ctrl-C sets this and the search stops after the batch being measured: a KeyboardInterrupt raised
# wherever the signal lands can be inside TVM's C++, which then calls std::terminate
STOP = threading.Event()


class TuneInterrupted(Exception):
    pass


def _stop_callback():
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

    @derived_object
    class StopWhenAsked(PyMeasureCallback):
        def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):
            if STOP.is_set():
                raise TuneInterrupted("tuning stopped (Ctrl-C); the measured candidates are in the database")

    return StopWhenAsked()


@dataclass
class TrackerRunner:
    """MetaSchedule's RPC runner and the tracker it asks for devices, which is watched between
    batches: with every board gone, each candidate would wait out its session timeout in turn."""
    runner: object
    host: str
    port: int
    key: str


def tracker_servers(host: str, port: int, key: str) -> int:
    """How many servers (free or busy) are connected to the tracker under `key`."""
    from tvm import rpc

    info = rpc.connect_tracker(host, port).summary().get("server_info") or []
    return sum(1 for s in info if s.get("key") == "server:" + key)


def _devices_callback(tracker: TrackerRunner):
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

    where = f"{tracker.host}:{tracker.port}"

    @derived_object
    class StopWhenNoDevice(PyMeasureCallback):
        def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):
            try:
                n = tracker_servers(tracker.host, tracker.port, tracker.key)
            except Exception as exc:
                raise PassError(f"the RPC tracker at {where} stopped answering during tuning ({exc}); "
                                "the measured candidates are in the database",
                                hint="restart the tracker and the boards' rpc_server, then tune again with "
                                     "the same --db: it continues from the database") from exc
            if n == 0:
                raise PassError(f"every device under key {tracker.key!r} left the tracker at {where} during "
                                "tuning; the measured candidates are in the database",
                                hint=f"restart `python -m tvm.exec.rpc_server --tracker {where} --key "
                                     f"{tracker.key}` on the board, then tune again with the same --db")

    return StopWhenNoDevice()


def tune_kernel(func, target, db, trials: int, runner="local", seed: int = 1, work_dir: str | None = None) -> int:
    """Run MetaSchedule's search for one kernel, `trials` candidates (fewer when `db` already holds
    some for it); the number of candidates measured now."""
    from tvm.s_tir import meta_schedule as ms
    import tvm.s_tir.tensor_intrin  # noqa: F401  (the CPU rules look its intrinsics up)

    todo = trials - measured_count(db, func)
    if todo <= 0:
        return 0
    logger, warnings = space.task_logger("main")
    ctx = ms.TuneContext(mod=workload(func), target=target, space_generator=_space(),
                         search_strategy=_strategy(todo), task_name="main", rand_state=seed,
                         num_threads=max(1, int(_target_dict(target).get("num-cores", 1))), logger=logger)
    failure = space.sampling_failure(ctx, seed)
    if failure is not None:
        raise space.CannotSample(failure)
    before = measured_count(db, func)
    callbacks = [*ms.measure_callback.MeasureCallback.create("default"), _stop_callback()]
    if isinstance(runner, TrackerRunner):
        callbacks.append(_devices_callback(runner))
        runner = runner.runner
    ms.tune.tune_tasks(tasks=[ctx], task_weights=[1.0], work_dir=work_dir or ".", max_trials_global=todo,
                       max_trials_per_task=todo, num_trials_per_iter=min(todo, 8), builder=_builder(),
                       runner=runner, database=db, cost_model="xgb", task_scheduler="round-robin",
                       measure_callbacks=callbacks)
    done = measured_count(db, func) - before
    warning = space.sampling_warning(warnings.messages)
    if done == 0 and warning is not None:
        raise space.CannotSample(f"TVM: {warning}")
    return done


def _strategy(trials: int):
    """TVM's evolutionary search, its population scaled to the trials asked for: a quick tune of a
    few candidates need not draw and evolve TVM's default 512 (seconds each on a small machine)."""
    from tvm.s_tir import meta_schedule as ms

    population = max(64, min(512, 32 * trials))
    return ms.search_strategy.EvolutionarySearch(population_size=population,
                                                 init_min_unmeasured=min(50, population // 2))


# ------------------------------------------------------------------------------------ the passes
def kernel_times(mod) -> dict[str, float]:
    """ms of each kernel of `mod` run alone (measuring), for the kernels that can be."""
    from irviz.core.tuning import measuring

    out = {}
    for gv, func in mod.functions.items():
        if not isinstance(func, tirx.PrimFunc):
            continue
        single = measuring.kernel_module(mod, gv)
        if single is None:
            continue
        try:
            out[gv.name_hint] = measuring.build_and_time(single[0], single[1])[0]
        except Exception:  # a kernel that does not run alone is not a candidate
            continue
    return out


def _kernel_ms(mod, gv, func) -> float | None:
    from irviz.core.tuning import measuring
    from irviz.core.schedules.rules import with_functions

    single = measuring.kernel_module(with_functions(mod, {gv: func}), gv)
    if single is None:
        return None
    return measuring.build_and_time(single[0], single[1])[0]


def choose_kernels(mod, db, kernels: list[str], top: int, target, measure: bool = True) -> tuple[list[str], str]:
    """(kernel names, why): the named ones; else those `db` already has records for; else the
    `top` with the largest measured time share."""
    names = [g.name_hint for g, f in mod.functions.items() if isinstance(f, tirx.PrimFunc)]
    if kernels:
        unknown = [k for k in kernels if k not in names]
        if unknown:
            raise PassError(f"no kernel named {', '.join(unknown)}",
                            hint="kernels in this step: " + ", ".join(sorted(names)[:30]))
        return list(kernels), "named"
    known = [g.name_hint for g, f in mod.functions.items()
             if isinstance(f, tirx.PrimFunc) and best_record(db, f, target) is not None]
    if known or not measure:
        return known, "records in the database"
    times = kernel_times(mod)
    if not times and names:
        return names[:max(1, top)], "none of the module's kernels could be timed alone, so the first of them"
    total = sum(times.values()) or 1.0
    ranked = sorted(times, key=times.get, reverse=True)[:max(1, top)]
    why = ", ".join(f"{k} {100 * times[k] / total:.0f}%" for k in ranked)
    return ranked, f"largest measured time share ({why})"


Progress = Callable[[str, float], None]


def tune_module(mod, target, db_path, trials: int, kernels=(), top: int = DEFAULT_TOP, runner="local",
                progress: Progress | None = None, tune: bool = True, sources: dict | None = None,
                authored: dict | None = None) -> tuple[tvm.IRModule, list[dict]]:
    """Tune (`tune`) or only apply the database to the chosen kernels; the new module and one report
    per kernel {kernel, owner, before_ms, after_ms, trials, measured_now, applied, why, sample_error}
    (``meta_schedule_space.outcome`` says it in words).

    `sources`: {kernel name: the kernel before irviz's rules or the learner's schedule() scheduled
    it}. MetaSchedule searches from that (its rules expect unscheduled loops), and "before" is still
    the kernel in `mod`. `authored`: {kernel name: why} for the kernels the learner scheduled."""
    from irviz.core.schedules.rules import authored as authored_by

    check_requirements()
    progress = progress or (lambda text, fraction: None)
    target = tuning_target(target)
    db = open_db(db_path)
    names, why = choose_kernels(mod, db, list(kernels), top, target, measure=tune)
    by_name = {g.name_hint: g for g in mod.functions.keys()}
    updates, reports = {}, []
    for i, name in enumerate(names):
        gv = by_name[name]
        progress(f"MetaSchedule {name} ({i + 1}/{len(names)})", i / max(1, len(names)))
        if tune and STOP.is_set():
            raise TuneInterrupted("tuning stopped (Ctrl-C) before kernel " + name)
        # a session's passes already run inside its learner's names: only a caller's own replace them
        with authored_by(authored) if authored is not None else contextlib.nullcontext():
            rep = _tune_one(mod, gv, (sources or {}).get(name), target, db, db_path, trials, runner, tune)
        rep["why"] = why
        if rep["applied"]:
            updates[gv] = rep.pop("new").with_attr(NOTE_ATTR, json.dumps(rep, sort_keys=True))
        rep.pop("new", None)
        reports.append(rep)
    progress("MetaSchedule done", 1.0)
    from irviz.core.schedules.rules import with_functions

    return with_functions(mod, updates), reports


def _tune_one(mod, gv, source, target, db, db_path, trials, runner, tune) -> dict:
    from irviz.core.schedules.rules import user_scheduled

    name, current = gv.name_hint, mod[gv]
    owner = space.schedule_owner(current, name, NOTE_ATTR)
    func = current
    rep = {"kernel": name, "trials": trials, "owner": owner, "applied": False}
    # e.g. weights prepacked by the rules: that source computes something else
    if source is not None and owner != space.UNSCHEDULED:
        if _signature(source) == _signature(current):
            func = source
            rep["searched_from"] = "its unscheduled form"
        else:
            rep["source_differs"] = True
    t0 = time.perf_counter()
    if tune:
        try:
            rep["measured_now"] = tune_kernel(func, target, db, trials, runner=runner, work_dir=str(db_path))
        except space.CannotSample as exc:
            rep["measured_now"] = 0
            rep["sample_error"] = str(exc)
            if func is current and owner != space.UNSCHEDULED:
                rep["already_scheduled"] = user_scheduled(current) or owner
    new = scheduled(db, func, target)
    rep["seconds"] = round(time.perf_counter() - t0, 2)
    if new is None:
        if "sample_error" not in rep:
            rep["note"] = "no valid record in the database"
        return rep
    rec = best_record(db, func, target)
    rep["db_ms"] = round(1e3 * min(float(s) for s in rec.run_secs), 4) if rec is not None else None
    if _is_host(target):
        if owner != space.UNSCHEDULED:
            rep["before_ms"], rep["before_is"] = _round(_kernel_ms(mod, gv, current)), owner
        else:
            # a kernel the rules have not scheduled yet (the pass placed before them) is compared
            # with what the rules would make of it, not with its plain loops
            rules_ms = _rules_ms(mod, gv)
            if rules_ms is not None:
                rep["before_ms"], rep["before_is"] = _round(rules_ms), "irviz's rules' schedule of it"
            else:
                rep["before_ms"], rep["before_is"] = _round(_kernel_ms(mod, gv, current)), "its plain loops"
        rep["after_ms"] = _round(_kernel_ms(mod, gv, new))
        # the kernel stays as it was when MetaSchedule's is slower here (noise included)
        rep["applied"] = rep["after_ms"] is not None and (rep["before_ms"] is None
                                                          or rep["after_ms"] <= rep["before_ms"])
    else:
        rep["applied"] = True
    rep["new"] = new
    return rep


def _rules_ms(mod, gv) -> float | None:
    """ms of kernel `gv` as tir-cpu's rules schedule it (alone, weights prepacked)."""
    from irviz.core.tuning import measuring
    from irviz.core.tuning.tile_search import CONV2D

    single = measuring.kernel_module(mod, gv)
    if single is None:
        return None
    try:
        return measuring.build_and_time(measuring.apply_steps(single[0], CONV2D.rules), single[1])[0]
    except Exception:  # a rule that fails on this kernel: it is compared with its plain loops instead
        return None


def _signature(func) -> list:
    return [(str(p.ty.dtype), [str(d) for d in p.ty.shape]) if isinstance(p.ty, tirx.BufferType) else str(p.ty)
            for p in func.params]


def _round(x):
    return None if x is None else round(float(x), 4)


def _is_host(target) -> bool:
    d = _target_dict(target)
    host = _target_dict(tvm.target.Target.from_device(tvm.cpu()))
    return d.get("kind") == "llvm" and d.get("mtriple", host.get("mtriple")) == host.get("mtriple")


# ------------------------------------------------------------------------------------ RPC tracker
def rpc_runner(address: str, key: str, timeout_sec: int = 30):
    """(a TrackerRunner: MetaSchedule's RPCRunner on the devices a TVM RPC tracker at HOST:PORT has
    under `key`, and how many are free); PassError when the tracker cannot be reached or has no device under that key."""
    from tvm import rpc
    from tvm.s_tir import meta_schedule as ms

    host, sep, port = str(address).rpartition(":")
    if not sep or not host or not port.isdigit():
        raise PassError(f"--rpc wants HOST:PORT, got {address!r}", hint="e.g. --rpc 127.0.0.1:9190")
    if not key:
        raise PassError("--rpc needs --key: the key the boards registered with (rpc_server --key)")
    try:
        # TVM's own connect retries for a minute: a tracker that is not there says so at once
        socket.create_connection((host, int(port)), timeout=5).close()
        summary = rpc.connect_tracker(host, int(port)).summary()
    except Exception as exc:  # refused, unreachable, not a tracker
        raise PassError(f"cannot reach the RPC tracker at {host}:{port}: {str(exc).strip().splitlines()[-1]}",
                        hint="start one with `python -m tvm.exec.rpc_tracker --host HOST --port PORT`") from exc
    queues = summary.get("queue_info") or {}
    free = int((queues.get(key) or {}).get("free", 0))
    if free < 1:
        keys = sorted(k for k in queues if k != key)
        raise PassError(f"the tracker at {host}:{port} has no free device under key {key!r}"
                        + (f" (other keys: {', '.join(keys)})" if keys else ""),
                        hint=f"start `python -m tvm.exec.rpc_server --tracker {host}:{port} --key {key}` "
                             "on the board, or wait for a busy one")
    config = ms.runner.RPCConfig(tracker_host=host, tracker_port=int(port), tracker_key=key,
                                 session_timeout_sec=timeout_sec)
    return TrackerRunner(ms.runner.RPCRunner(rpc_config=config, max_workers=1), host, int(port), key), free

