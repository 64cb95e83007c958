"""Write a session's pass trace to a folder (one step's files: :mod:`step_files`; the page:
:mod:`report`).

    out/
      step_00_import.py        TVMScript of the module + a loader (plain Python, see the header)
      step_00_import.params    its tensor constants (tvm.runtime.save_param_dict, print order)
      step_03_CallTIRRewrite.txt   a step TVM's parser cannot read back: text only, says so
      diffs/step_01.diff       unified diff against the previous step (changed functions only)
      steps.json               model, importer, pipeline_text (rerun it with --pipeline), and
                               per step: pass, params, seconds, changed, added/removed/changed functions, files, loadable, verified (its
                               file was run back), equal (what it loaded was structurally equal;
                               null when not run)
                               memory: tokens, planned/tensor/peak bytes of main after memory
                               planning (planned on a copy before StaticPlanBlockMemory)
      report.html              one self-contained page: the trace, diffs, build/run results, memory
      schedule_trace.py        an IR file's schedule(sch) as a TVM trace that replays in plain TVM
                               (steps.json "schedule_trace": whether it was run back to the same module)

A step is written as ``.py`` only when its file was run during this export as
``python step_NN.py`` runs it and loaded a module (structurally equal to the step's, or else with
a NOTE in its header saying where they differ): ``"loadable": true`` is what was seen, never
inferred from the pass.  Otherwise it is written as ``.txt`` with a NOT LOADABLE header,
``"loadable": false`` and the parser's complaint as its note.  A step still calling an op only
irviz's own LegalizeOps lowers (``R.ewise_fma``) says so in its header, in ``irviz_lowers`` and
in report.html: plain ``tvm.compile`` cannot build it.
"""
from __future__ import annotations

import datetime as _dt
import json
import re
import time
from pathlib import Path

from irviz.core.backend.legalize import ops_needing_custom_legalize
from irviz.core.backend.memory import step_memory_summaries
from irviz.core.errors import ExportError
from irviz.core.export.report import html_report, results_by_step, run_dict, step_diff_html
from irviz.core.export.roundtrip_pool import RoundtripPool
from irviz.core.export.schedule_trace import write_schedule_trace
from irviz.core.export.step_files import (
    add_header_note,
    discard_step_file,
    jsonable,
    metadata_count,
    module_script,
    roundtrip_check,
    step_stem,
    write_step_file,
)
from irviz.core.passes import find_pass, pipeline_text
from irviz.core.views import module_diff as diff_mod

__all__ = ["export_trace"]

_STEP_FILE_RE = re.compile(r"^step_\d{2,}_.*\.(py|params|txt)$")
_DIFF_FILE_RE = re.compile(r"^step_\d{2,}\.diff$")


def _pass_roundtrip_flag(name: str) -> bool:
    """The pass's declared PassSpec.roundtrip_ok; an unknown pass (e.g. an unregistered user pass)
    is not ruled out: the check decides."""
    spec = find_pass(name) if name != "import" else None
    return True if spec is None else spec.roundtrip_ok


def irviz_lowers_note(ops) -> str:
    return (f"calls {', '.join(ops)}, which TVM 0.27 cannot legalize: plain tvm.compile(mod) fails "
            "on this module; irviz builds it with its own lowering "
            "(irviz.core.backend.legalize.CUSTOM_LEGALIZE_MAP given to LegalizeOps)")


def _pipeline_text(session) -> str:
    return pipeline_text(session.full_pipeline())


def _settle(out, session, step, rec, checked, text, consts, written_params) -> None:
    """Put what running the step file back showed into its record (and its file): a step that
    did not load is rewritten as a NOT LOADABLE ``.txt`` with the parser's complaint."""
    loadable, equal, note = checked
    rec.update(loadable=bool(loadable), verified=bool(loadable), equal=equal if loadable else None,
               note=note or None)
    if not loadable:
        discard_step_file(out, rec, written_params)
        rec.update(write_step_file(out, session, step, text, consts, False, note, written_params))
    elif note:
        add_header_note(out / rec["file"], note)


def export_trace(session, out_dir, steps=None, run_result=None, run_results=None,
                 latency=None) -> Path:
    """Write the trace (see the module docstring) to ``out_dir``; returns its Path.

    steps: indices to export (default all).  run_result: a build.RunResult for the cursor step, or
    run_results {step index: RunResult}; shown in report.html and steps.json.
    Every step written as ``.py`` is run back (its ``load()`` and ``__main__`` block, as
    ``python step_NN.py`` would) and compared with the step's module, in forked copies of this
    process on the other cores (:mod:`roundtrip_pool`): slow on big models (the TVMScript parser
    takes seconds per step), but a flag inferred from the pass once called files loadable that
    TVM could not parse.  A step whose pass has
    roundtrip_ok=False is never written as .py.
    latency: a trace from ``irviz.core.backend.latency.latency_trace`` (one entry per step): report.html
    shows it as a chart and a table, steps.json keeps it under "latency".
    """
    out = Path(out_dir)
    n = len(session.steps)
    indices = list(range(n)) if steps is None else sorted({(int(i) + n) % n if int(i) < 0 else int(i)
                                                          for i in steps})
    bad = [i for i in indices if not 0 <= i < n]
    if bad:
        raise ExportError(f"no step {bad[0]} to export: the session has steps 0..{n - 1}")
    results = results_by_step(session, run_result, run_results)
    try:
        (out / "diffs").mkdir(parents=True, exist_ok=True)
        for p in out.iterdir():  # stale files of an earlier export into the same folder
            if p.is_file() and _STEP_FILE_RE.match(p.name):
                p.unlink()
        for p in (out / "diffs").iterdir():
            if p.is_file() and _DIFF_FILE_RE.match(p.name):
                p.unlink()
    except OSError as exc:
        raise ExportError(f"cannot write to {out}: {exc}", hint="choose a folder you can write to") from exc

    memory = step_memory_summaries([session.steps[i] for i in indices])
    records = []
    files: dict[int, dict] = {}
    written_params: dict = {}  # constant handles -> a .params file already holding exactly them
    checks = RoundtripPool(roundtrip_check)
    pending = {}  # step index -> (text, consts), for rewriting a step that did not load as .txt
    for i in indices:
        step = session.steps[i]
        flag_ok = _pass_roundtrip_flag(step.pass_name)
        stem = step_stem(i, step.pass_name)
        t0 = time.perf_counter()
        text, consts = module_script(step.mod)
        count_ok = metadata_count(text) == len(consts)
        if not flag_ok:
            loadable, note = False, (f"{step.pass_name} is marked as not round-tripping "
                                     "(PassSpec.roundtrip_ok=False).")
        elif not count_ok:
            loadable, note = False, "the constants found do not match the script's metadata table"
        else:
            loadable, note = True, ""
        try:
            rec_files = write_step_file(out, session, step, text, consts, loadable, note,
                                        written_params)
            if loadable:
                checks.submit(i, out / rec_files["file"], step.mod)
                pending[i] = (text, consts)
            if i > 0:
                udiff = diff_mod.unified_diff(session.steps[i - 1].mod, step.mod)
                (out / "diffs" / f"step_{i:02d}.diff").write_text(udiff, encoding="utf-8")
                rec_files["diff_file"] = f"diffs/step_{i:02d}.diff"
            else:
                rec_files["diff_file"] = None
        except OSError as exc:
            raise ExportError(f"cannot write {stem} in {out}: {exc}") from exc
        ch = step.changes
        rec = {
            "index": i, "pass": step.pass_name, "origin": step.origin, "params": jsonable(step.params),
            "seconds": round(float(step.seconds), 6), "changed": bool(step.changed),
            "changed_what": step.changed_what, "pass_notes": list(step.notes),
            "added": list(ch.added), "removed": list(ch.removed), "changed_funcs": list(ch.changed),
            **rec_files, "loadable": bool(loadable), "verified": False, "equal": None,
            "constants": len(consts), "note": note or None,
            "irviz_lowers": ops_needing_custom_legalize(step.mod),
            "export_seconds": round(time.perf_counter() - t0, 4),
        }
        rec["memory"] = memory.get(i)
        if i in results:
            rec["run"] = run_dict(results[i])
        records.append(rec)
        files[i] = rec
    # rendered while the children parse: it needs no file, and it is the other slow part
    diff_html = {i: step_diff_html(session, i, between=checks.poll) for i in indices
                 if i > 0 and session.steps[i].changed}
    checked = checks.results()
    for rec in records:
        i = rec["index"]
        try:
            if i in checked:
                _settle(out, session, session.steps[i], rec, checked[i], *pending[i],
                        written_params)
            if rec["irviz_lowers"]:
                add_header_note(out / rec["file"], irviz_lowers_note(rec["irviz_lowers"]))
        except OSError as exc:
            raise ExportError(f"cannot write {rec['file']} in {out}: {exc}") from exc

    try:
        schedule = write_schedule_trace(session, out)
    except OSError as exc:
        raise ExportError(f"cannot write {out}/schedule_trace.py: {exc}") from exc
    summary = {
        "irviz_export": 1,
        "model": session.name,
        "spec": getattr(getattr(session.captured, "loaded", None), "spec", None),
        "importer": getattr(session.imported, "importer", None),
        "target": str(session.target),
        "created": _dt.datetime.now().isoformat(timespec="seconds"),
        "cursor": session.cursor,
        "planned": [{"name": inv.name, "params": jsonable(inv.params)} for inv in session.pipeline],
        # applied + planned, as `irviz check/export --pipeline` takes it: rerun exactly this
        "pipeline_text": _pipeline_text(session),
        "error": session.error.user_message() if getattr(session, "error", None) is not None else None,
        "steps": records,
        # the learner's schedule() as a trace that replays in plain TVM (None without one)
        "schedule_trace": schedule,
    }
    if latency:
        summary["latency"] = [{k: jsonable(v) for k, v in e.items() if k != "error_detail"}
                              for e in latency]
    try:
        (out / "steps.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        (out / "report.html").write_text(
            html_report(session, results, files=files, steps=indices, latency=latency, memory=memory,
                        diff_html=diff_html),
            encoding="utf-8")
    except OSError as exc:
        raise ExportError(f"cannot write to {out}: {exc}") from exc
    return out
