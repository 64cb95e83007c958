"""``schedule_trace.py``: the learner's ``schedule(sch)`` as a TVM trace that replays in plain TVM.

The file holds the module before the schedule (step 0's TVMScript, or, when it has tensor
constants, step 0's exported file next to it) and ``apply_trace(sch)``, the trace as
``Trace.as_python()`` writes it. ``python schedule_trace.py`` replays it and prints the scheduled
module; ``irviz schedule_trace.py`` opens it with the same steps (it defines ``get_irmodule`` and
``schedule``). The export runs it back and says whether it gave the schedule's last module.
"""
from __future__ import annotations

from pathlib import Path

from irviz.core.export.step_files import module_script, run_step_file, step_stem, string_literal

FILE = "schedule_trace.py"

_HEAD = '''"""schedule() of {source} as a TVM schedule trace ({count} primitives: {names}).

Replays in plain TVM 0.27 (tvm.s_tir.Schedule):
    python {file}     # replays the trace, prints the scheduled module
    irviz {file}      # opens it in irviz, one step per primitive
Written by irviz export.
"""
from typing import TypeVar

import tvm
from tvm import s_tir
from tvm.script import from_source
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

try:  # the printer names Axis (layouts) but imports it only in a comment
    from tvm.tirx.layout import Axis
except ImportError:
    Axis = None

'''

_FROM_SCRIPT = '''SCRIPT = {script}


def get_irmodule():
    """The module before the schedule (step 0)."""
    names = {{"I": I, "R": R, "T": T, "TypeVar": TypeVar, "tvm": tvm, "s_tir": s_tir, "Axis": Axis}}
    return from_source(SCRIPT, extra_vars=names)
'''

_FROM_STEP = '''def get_irmodule():
    """The module before the schedule: step 0's exported file (it has tensor constants)."""
    import os
    import runpy

    here = os.path.dirname(os.path.abspath(__file__))
    return runpy.run_path(os.path.join(here, "{step0}.py"))["load"]()
'''

_TAIL = '''

def schedule(sch):
    apply_trace(sch)


if __name__ == "__main__":
    sch = s_tir.Schedule(get_irmodule())
    apply_trace(sch)
    mod = sch.mod
    print(mod.script())
'''


def write_schedule_trace(session, out: Path) -> dict | None:
    """Write ``schedule_trace.py`` into `out` when the session has the learner's schedule, run it
    back and return its steps.json record: {file, primitives, verified, note}."""
    from irviz.core.tvm_compat import structural_equal

    run = getattr(session, "schedule", None)
    if run is None or run.trace is None or not run.steps:
        return None
    text, consts = module_script(session.steps[0].mod)
    body = (_FROM_STEP.format(step0=step_stem(0, session.steps[0].pass_name)) if consts
            else _FROM_SCRIPT.format(script=string_literal(text)))
    names = ", ".join(dict.fromkeys(s.name for s in run.steps))
    path = Path(out) / FILE
    path.write_text(_HEAD.format(source=Path(run.source).name, count=len(run.steps), names=names, file=FILE)
                    + body + "\n\n" + run.trace_python() + _TAIL, encoding="utf-8")
    back, message = run_step_file(path)
    last = session.steps[session.n_schedule].mod
    if back is None:
        verified, note = False, f"does not replay: {message.strip().splitlines()[-1] if message.strip() else '?'}"
    elif not structural_equal(back, last):
        verified, note = False, "replays, but not to the schedule's last module"
    else:
        verified, note = True, None
    return {"file": FILE, "primitives": [s.name for s in run.steps], "verified": verified, "note": note}
