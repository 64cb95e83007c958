"""A repro folder for one pass (or one build) that someone without irviz can run.

    write_repro(out, session, before=steps[k - 1], after=steps[k], ref=ref, stage="compare", ...)

Contents:

* ``before.py`` / ``after.py`` (+ ``.params``): loadable TVMScript of the pass's input and output,
  written as exported steps are (``step_files``); a module TVM cannot parse back is written as
  ``.txt`` for reading, and repro.py says so.
* ``inputs.npz`` (``input_0``, ... then any weights main takes by name), ``expected.npz``
  (``output_0``, ...: the reference's outputs).
* ``irviz_*.py``, when the modules need them: what irviz's build does besides TVM (its lowering of
  ``R.ewise_fma``, its library functions, the functions the opened file registers); see
  ``repro_carry``. Without them plain TVM fails in another way than irviz did (a build failure
  where irviz found wrong numbers).
* ``repro.py``: tvm + numpy only. Builds each module (whatever is left of default_build, then
  ``tvm.compile``), runs main, compares with expected.npz and prints what it found: exit 1 when the
  problem reproduces in the class irviz found ("REPRODUCED: wrong numbers after X, max abs error
  ..."), 3 when the module fails in another class ("NOT REPRODUCED the same way: bisect found wrong
  numbers, plain TVM fails to build: ..."), 0 when it does not fail, 2 when it cannot run at all.
* ``README.txt``: the pass, its parameters, why, the versions.

Three modes: "pass" (before and after are both there), "apply" (the engine died inside the pass:
only before is there, and repro.py applies the pass itself: TVM's passes directly, an irviz or user
pass through irviz when it is installed), "build" (one step alone, as before.py, which repro.py
builds and runs: the step that killed the engine's build, or step 0, which no pass made).
README.txt says the engine died only when ``crashed`` says it did.
"""
from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from irviz.core.backend import step_bisect as bisect_mod
from irviz.core.backend.step_bisect import reference_for
from irviz.core.backend.build import DEFAULT_BUILD_PASSES, default_build_progress
from irviz.core.errors import ExportError, RequestError
from irviz.core.export import repro_carry
from irviz.core.export import step_files as sf
from irviz.core.export.step_files import jsonable
from irviz.core.passes import PassInvocation, apply_pass, find_pass
from irviz.core.target import cpu_info
from irviz.core.tvm_compat import var_name

__all__ = ["write_repro"]


def _write_module(out: Path, session, step, stem: str) -> dict:
    """``stem``.py + .params when it loads back, else ``stem``.txt. -> {file, loadable, note}."""
    text, consts = sf.module_script(step.mod)
    loadable = sf.metadata_count(text) == len(consts)
    note = "" if loadable else "the constants found do not match the script's metadata table"
    written: dict = {}
    files = sf.write_step_file(out, session, step, text, consts, loadable, note, written, stem=stem)
    if loadable:
        loadable, _equal, note = sf.roundtrip_check(out / files["file"], step.mod)
        if not loadable:
            sf.discard_step_file(out, files, written)
            files = sf.write_step_file(out, session, step, text, consts, False, note, written, stem=stem)
    return {"file": files["file"], "loadable": bool(loadable), "note": note or None}


def _main_param_names(mod) -> list[str]:
    return [var_name(p) for p in mod["main"].params]


def _versions() -> dict:
    import tvm

    out = {"python": platform.python_version(), "tvm": getattr(tvm, "__version__", "?"),
           "numpy": np.__version__, "platform": platform.platform()}
    torch = sys.modules.get("torch")
    if torch is not None:
        out["torch"] = torch.__version__
    try:
        out["cpu"] = cpu_info().as_dict().get("name") or cpu_info().as_dict().get("model")
    except Exception:  # a detail of the README
        pass
    return out


def as_step(index: int, pass_name: str, params: dict, mod):
    """A Step-like record for a module that is no recorded step (the input of a crashed pass)."""
    return SimpleNamespace(index=int(index), pass_name=pass_name, params=dict(params or {}), mod=mod)


def write_repro(out_dir, session, *, before, after=None, pass_name: str, params=None, stage: str,
                reason: str = "", ref=None, atol=None, rtol=None, mode: str | None = None,
                pass_files=(), model: str | None = None, crashed: bool = False,
                ir_path=None, found_by: str = "irviz") -> Path:
    """Write the repro folder (see the module doc) and return its path.

    before / after: Steps (or ``as_step``) whose ``mod`` is the pass's input / output.
    ref: a bisect.Reference (inputs, expected outputs). stage: "compare" | "build" | "run" | "pass".
    mode: "pass" when `after` is given, else "apply"; "build" for one step built on its own.
    crashed: the engine died in that pass or build (the README says so only then).
    ir_path: the opened IR file, copied for the functions it registers when the modules call them.
    found_by: who found `stage` ("bisect"), for repro.py's verdict."""
    mode = mode or ("pass" if after is not None else "apply")
    out = Path(os.path.abspath(os.path.expanduser(str(out_dir))))
    try:
        out.mkdir(parents=True, exist_ok=True)
        for stale in ("before", "after"):
            for suffix in (".py", ".params", ".txt"):
                (out / f"{stale}{suffix}").unlink(missing_ok=True)
    except OSError as exc:
        raise ExportError(f"cannot write the repro folder {out}: {exc}",
                          hint="choose a folder you can write to") from exc
    mods = {"before": before}
    if after is not None and mode == "pass":
        mods["after"] = after
    files, build_start, names = {}, {}, set()
    try:
        for stem, st in mods.items():
            files[stem] = _write_module(out, session, st, stem)
            build_start[stem] = default_build_progress(st.mod)
            names.update(_main_param_names(st.mod))
        inputs = {f"input_{i}": np.asarray(x) for i, x in enumerate(ref.inputs)} if ref else {}
        for n in sorted(names):
            if ref is not None and n in ref.params:
                inputs[n] = np.asarray(ref.params[n])
        np.savez(out / "inputs.npz", **inputs)
        # a pass repro.py applies itself may emit the ops irviz lowers: carry their lowering too
        carried = repro_carry.carry(out, [st.mod for st in mods.values()], ir_path,
                                    all_lowerings=mode == "apply")
        expected = list(ref.expected) if ref is not None else []
        np.savez(out / "expected.npz", **{f"output_{i}": e for i, e in enumerate(expected)})
        tol = [list(bisect_mod.tolerances(e, atol, rtol)) for e in expected]
        info = {
            "mode": mode, "crashed": bool(crashed), "pass": pass_name, "params": _jsonable(params or {}), "stage": stage,
            "reason": reason, "reference": ref.what if ref is not None else None,
            "n_inputs": len(ref.inputs) if ref is not None else 0, "tolerances": tol,
            "files": {k: v["file"] if v["loadable"] else None for k, v in files.items()},
            "notes": {k: v["note"] for k, v in files.items() if v["note"]},
            "build_start": build_start, "default_build": list(DEFAULT_BUILD_PASSES),
            "pass_files": [os.path.abspath(p) for p in pass_files or ()],
            "carry": carried, "found_by": found_by,
        }
        (out / "repro.py").write_text(_REPRO_HEAD + "INFO = json.loads(" + repr(json.dumps(info)) + ")\n"
                                      + _REPRO_BODY, encoding="utf-8")
        (out / "README.txt").write_text(_readme(info, session, before, model), encoding="utf-8")
    except OSError as exc:
        raise ExportError(f"cannot write the repro folder {out}: {exc}",
                          hint="choose a folder you can write to") from exc
    return out


def _pass_files(name: str) -> list[str]:
    """The user pass file defining `name`, for a repro that has to apply it through irviz."""
    spec = find_pass(name)
    src = getattr(spec, "source", "") if spec is not None else ""
    path = src.rsplit(":", 1)[0] if src else ""
    return [path] if path and os.path.isfile(path) else []


def _jsonable(obj):
    return jsonable(obj)


def _readme(info: dict, session, before, model) -> str:
    applied = [s.pass_name for s in session.steps[1:before.index + 1]]
    if info["crashed"]:
        what = {"apply": f"the engine died inside pass {info['pass']}, applied to before.py",
                "build": "the engine died building before.py"}.get(
            info["mode"], f"the engine died in pass {info['pass']}")
    else:
        what = {"pass": f"pass {info['pass']} turns before.py into after.py",
                "apply": f"pass {info['pass']}, applied to before.py by repro.py",
                "build": f"step {before.index} ({info['pass']}: no pass made it) built and run on "
                         "its own as before.py"}[info["mode"]]
    lines = [
        f"irviz repro: {what}.",
        "",
        f"model:       {model or session.name}",
        f"pass:        {info['pass']}",
        f"parameters:  {json.dumps(info['params'])}",
        f"stage:       {info['stage']} (where it went wrong: compare = wrong numbers, build, run, "
        "pass = the pass itself)",
        f"why:         {info['reason'] or '-'}",
        f"reference:   {info['reference'] or 'none'} (expected.npz)",
        f"passes before it: {', '.join(applied) if applied else '(none: the imported module)'}",
        "",
        "Run it (needs only tvm and numpy):",
        "    python repro.py        # exit 1: it reproduces; 0: it does not; 2: it cannot run;",
        "                           # 3: it fails, in another way than irviz found",
        "",
        "Files: before.py / after.py (+ .params: their tensor constants), inputs.npz (by main's "
        "parameter names, or input_0, ... for a PyTorch model's inputs), expected.npz.",
    ]
    carried = repro_carry.describe(info["carry"])
    if carried:
        lines += ["What irviz does besides TVM, carried here (repro.py uses it):"] + \
            [f"    {line}" for line in carried]
    for k, note in info["notes"].items():
        lines.append(f"NOTE: {k} is written as text only ({k}.txt): {note}")
    if info["mode"] == "apply":
        lines.append("The pass is applied by repro.py: TVM's own passes by name; an irviz or user "
                     "pass needs irviz installed" + (f" and the pass files {info['pass_files']}"
                                                     if info["pass_files"] else "") + ".")
    lines += ["", "Versions:"] + [f"    {k}: {v}" for k, v in _versions().items()]
    return "\n".join(lines) + "\n"


_REPRO_HEAD = '''"""Reproduce what irviz found; see README.txt. Needs tvm and numpy only.

    python repro.py      # exit 1: it reproduces; 0: it does not; 2: it cannot run;
                         # 3: it fails, in another way than irviz found
"""
import importlib.util
import json
import os
import runpy
import sys

import numpy as np
import tvm
from tvm import relax

HERE = os.path.dirname(os.path.abspath(__file__))
'''

_REPRO_BODY = '''

def load(stem):
    name = INFO["files"].get(stem)
    if name is None:
        sys.exit(f"{stem}: TVM cannot parse this module back ({INFO['notes'].get(stem, '')}); "
                 f"read {stem}.txt")
    return runpy.run_path(os.path.join(HERE, name))["load"]()


def make_pass(name, params=None):
    if name == "LegalizeOps" and LOWERINGS and not params:
        return relax.transform.LegalizeOps(customize_legalize_map=dict(LOWERINGS))
    for ns in (relax.transform, relax.backend):
        if hasattr(ns, name):
            return getattr(ns, name)(**(params or {}))
    return None


LOWERINGS = {}   # op name -> legalization irviz gives LegalizeOps (irviz_lowerings.py)
ADDED = []       # what this run does besides plain TVM, as irviz's build does


def load_carried():
    """What irviz does besides TVM, from the files it wrote here (README.txt lists them)."""
    carried = INFO.get("carry") or {}
    low = carried.get("lowerings")
    if low and os.path.isfile(os.path.join(HERE, low["file"])):
        LOWERINGS.update(runpy.run_path(os.path.join(HERE, low["file"]))["CUSTOM_LEGALIZE_MAP"])
        ADDED.append(f"irviz's lowering of {', '.join(low['ops'])} ({low['file']})")
    elif low:
        print(f"note:   {low['file']} is missing: {', '.join(low['ops'])} will not be lowered")
    ext = carried.get("externs")
    if ext and os.path.isfile(os.path.join(HERE, ext["file"])):
        make = runpy.run_path(os.path.join(HERE, ext["file"]))["_torch_function"]
        for name in ext["names"]:
            tvm.register_global_func(name, make(name), override=True)
        ADDED.append(f"irviz's library functions ({ext['file']})")
    for f in carried.get("register_files") or ():
        path = os.path.join(HERE, f["file"])
        if not os.path.isfile(path):
            continue
        sys.path[:0] = [f["folder"], HERE]
        name = os.path.splitext(f["file"])[0]
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # TVMScript in the file looks itself up by module name
        spec.loader.exec_module(module)
        ADDED.append(f"the functions {f['file']} registers")
    missing = [n for n in carried.get("registered") or ()
               if tvm.get_global_func(n, allow_missing=True) is None]
    if missing:
        sys.exit(f"the module calls {', '.join(missing)}, which irviz's process had registered "
                 "and this one has not: register them (see README.txt), then run again")


def calls_ops(mod, names):
    found = []

    def visit(e):
        if isinstance(e, relax.Call) and getattr(e.op, "name", None) in names:
            found.append(e.op.name)

    for f in mod.functions.values():
        if isinstance(f, relax.Function):
            relax.analysis.post_order_visit(f, visit)
    return bool(found)


def apply_pass(mod):
    target = tvm.target.Target.from_device(tvm.cpu())
    # a user's pass (it has its pass file) may bear a TVM pass's name; builtin:NAME is built-in NAME
    p = None if INFO["pass_files"] else make_pass(INFO["pass"].split(":")[-1], INFO["params"])
    if p is not None:
        with target, tvm.transform.PassContext(opt_level=3):
            return p(mod)
    try:
        from irviz.core.passes import PassInvocation, apply_pass as irviz_apply, load_pass_file
    except ImportError:
        sys.exit(f"{INFO['pass']} is an irviz pass, not one of TVM's: install irviz to apply it")
    for path in INFO["pass_files"]:
        load_pass_file(path)
    return irviz_apply(PassInvocation(INFO["pass"], INFO["params"]), mod)


def build(mod, start):
    """What is left of default_build (the module may be part-way through it), then compile."""
    target = tvm.target.Target.from_device(tvm.cpu())
    names = INFO["default_build"][start:]
    if "LegalizeOps" not in names and LOWERINGS and calls_ops(mod, LOWERINGS):
        names = ["LegalizeOps"] + names  # as irviz's build: its ops are lowered wherever they are
    with target:
        for name in names:
            mod = make_pass(name)(mod)
    return tvm.compile(mod, target=target, relax_pipeline=None)


def flatten(x):
    if isinstance(x, tvm.runtime.Tensor):
        return [x.numpy()]
    if isinstance(x, (list, tuple)) or hasattr(x, "__len__") and not hasattr(x, "shape"):
        return [y for v in x for y in flatten(v)]
    return [np.asarray(x)]


def check(stem, mod, start):
    """("ok" / "build" / "run" / "compare", what happened, max abs error or None)."""
    inputs = np.load(os.path.join(HERE, "inputs.npz"))
    expected = np.load(os.path.join(HERE, "expected.npz"))
    try:
        ex = build(mod, start)
    except Exception as exc:
        return "build", first_lines(exc), None
    names = [p.name for p in mod["main"].params]
    n = INFO["n_inputs"]
    args = [inputs[f"input_{i}"] for i in range(n)] + [inputs[k] for k in names[n:]]
    dev = tvm.cpu()
    try:
        out = relax.VirtualMachine(ex, dev)["main"](*[tvm.runtime.tensor(a, dev) for a in args])
    except Exception as exc:
        return "run", first_lines(exc), None
    got = flatten(out)
    want = [expected[f"output_{i}"] for i in range(len(expected.files))]
    if not want:
        return "ok", "ran (nothing to compare with)", None
    if len(got) != len(want):
        return "compare", f"{len(got)} outputs, expected {len(want)}", None
    worst, bad = 0.0, []
    for i, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape:
            return "compare", f"output {i}: shape {g.shape}, expected {w.shape}", None
        atol, rtol = INFO["tolerances"][i]
        err = float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64)))) if g.size else 0.0
        worst = max(worst, err)
        if not np.allclose(g, w, atol=atol, rtol=rtol, equal_nan=True):
            bad.append(f"output {i}: max abs error {err:.3g} (atol {atol:.3g}, rtol {rtol:.3g})")
    if bad:
        return "compare", "; ".join(bad), worst
    return "ok", f"matches expected.npz (max abs error {worst:.3g})", worst


def first_lines(exc):
    lines = [ln for ln in str(exc).splitlines() if ln.strip() and "TVM_BACKTRACE" not in ln]
    return (type(exc).__name__ + ": " + " | ".join(lines[:6]))[:1500]


CLASS = {"compare": "wrong numbers", "build": "a build failure", "run": "a run failure",
         "pass": "a failing pass"}
FAILS = {"compare": "gives wrong numbers", "build": "fails to build", "run": "fails to run"}


def verdict(stage, what, err, where):
    """Exit status of a failing module: 1 when it fails as irviz found it would (or irviz did not
    check it), 3 when it fails in another way."""
    found = INFO["stage"]
    if found not in CLASS or found == stage:
        if stage == "compare":
            size = f", max abs error {err:.3g}" if err is not None else f": {what}"
            print(f"REPRODUCED: wrong numbers {where}{size}")
        else:
            print(f"REPRODUCED: {where}, {stage} fails: {what}")
        return 1
    tvm_is = "TVM with " + ", ".join(ADDED) if ADDED else "plain TVM"
    print(f"NOT REPRODUCED the same way: {INFO.get('found_by', 'irviz')} found {CLASS[found]}, "
          f"{tvm_is} {FAILS[stage]}: {what}")
    return 3


def main():
    print(f"irviz repro: {INFO['mode']} {INFO['pass']} {json.dumps(INFO['params'])}; irviz saw: "
          f"{INFO['stage']}: {INFO['reason']}")
    load_carried()
    before = load("before")
    if INFO["mode"] == "build":
        stage, what, err = check("before", before, INFO["build_start"]["before"])
        print(f"step:   {stage}: {what}")
        if stage != "ok":
            return verdict(stage, what, err, f"in step {INFO['pass']}")
        print("did not reproduce: the step builds, runs and matches expected.npz")
        return 0
    stage_b, what_b, _ = check("before", before, INFO["build_start"]["before"])
    print(f"before: {stage_b}: {what_b}")
    if INFO["mode"] == "apply":
        try:
            after = apply_pass(before)
        except Exception as exc:
            print(f"after:  pass: {INFO['pass']} failed: {first_lines(exc)}")
            return 1
        start = 0
    else:
        after, start = load("after"), INFO["build_start"]["after"]
    stage_a, what_a, err_a = check("after", after, start)
    print(f"after:  {stage_a}: {what_a}")
    if stage_a != "ok":
        if stage_b != "ok":
            print("note:   before.py fails too: the problem is older than this pass")
        return verdict(stage_a, what_a, err_a, f"after {INFO['pass']}")
    print("did not reproduce: the module after the pass matches")
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''


def repro_for_step(ws, out_dir, index=None, *, verdict=None, atol=None, rtol=None, ref=None) -> Path:
    """The repro folder of recorded step `index` (None: the cursor): its pass, with the step before
    as input. Step 0 has no pass: its module alone, built and run ("build" mode).
    verdict: the bisect's StepCheck of that step, for README.txt's why."""
    st = ws.step_at(index)
    ref = ref if ref is not None else reference_for(ws)
    stage = verdict.stage if verdict is not None and verdict.stage else "unchecked"
    reason = verdict.reason if verdict is not None else "written on request; run repro.py to check it"
    s = ws.session
    found_by = "bisect" if verdict is not None else "irviz"
    if st.index == 0:
        return write_repro(out_dir, s, before=st, pass_name="import", params=st.params, stage=stage,
                           reason=reason, ref=ref, atol=atol, rtol=rtol, mode="build",
                           model=ws.model_name, ir_path=_ir_path(ws), found_by=found_by)
    return write_repro(out_dir, s, before=s.steps[st.index - 1], after=st, pass_name=st.pass_name,
                       params=st.params, stage=stage, reason=reason, ref=ref, atol=atol, rtol=rtol,
                       pass_files=_pass_files(st.pass_name), model=ws.model_name,
                       ir_path=_ir_path(ws), found_by=found_by)


def _ir_path(ws):
    ir = getattr(ws, "ir_file", None)
    return getattr(ir, "path", None)


def repro_for_crash(ws, out_dir, pass_name=None, params=None, *, stage: str = "pass",
                    step=None, reason: str = "") -> Path:
    """After a crash and a replay to the last good step: the repro folder of what killed the engine.

    stage "pass": `pass_name` was being applied at or after the cursor; the passes planned before it
    are applied (to a copy: the session is unchanged) to get its input. stage "build": the step
    `step` (None: the cursor) was being built."""
    s = ws.need_session()
    ref = reference_for(ws)
    if stage == "build":
        st = ws.step_at(step)
        return write_repro(out_dir, s, before=st, pass_name=f"build of step {st.index}", params={},
                           stage="build", reason=reason, ref=ref, mode="build", model=ws.model_name,
                           crashed=True, ir_path=_ir_path(ws))
    cur = s.steps[s.cursor]
    mod, index = cur.mod, cur.index
    ahead = [PassInvocation(t.pass_name, dict(t.params or {})) for t in s.steps[s.cursor + 1:]]
    for inv in ahead + list(s.pipeline):
        if inv.name == pass_name and (params is None or dict(inv.params or {}) == dict(params or {})):
            params = dict(inv.params or {})
            break
        mod = s.steps[index + 1].mod if index + 1 < len(s.steps) else apply_pass(inv, mod, s.chosen_target)
        index += 1
    else:
        if pass_name is None:
            raise RequestError("no pass named to write a crash repro for")
    before = s.steps[index] if index < len(s.steps) and s.steps[index].mod is mod else \
        as_step(index, "(planned passes)", {}, mod)
    return write_repro(out_dir, s, before=before, pass_name=pass_name, params=params or {},
                       stage="pass", reason=reason, ref=ref, mode="apply",
                       pass_files=_pass_files(pass_name), model=ws.model_name, crashed=True,
                       ir_path=_ir_path(ws))
