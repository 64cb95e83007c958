"""What the GUI and the engine say to each other (docs/engine_protocol.md).

The command table, the state a session command answers with, and the encoding of results and
errors as strict JSON. The engine, the GUI's bridge and the pane tests' fake bridge all build from
here, so a change to the schema shows up in all three. Plain Python only: the GUI imports this and
must never load torch or TVM.
"""
from __future__ import annotations

import math
import os
import traceback
from dataclasses import dataclass

from irviz.core.errors import IrvizError, RequestError, tvm_error_text


@dataclass(frozen=True)
class Command:
    name: str
    # the result is a state; a failure reply carries the state as well (the session is unchanged)
    returns_state: bool = False
    # the stage an unexpected (non-IrvizError) exception is reported in
    stage: str = "engine"
    # a newer request supersedes (drops) an older one of the same command by default
    supersede: bool = False


COMMANDS: dict[str, Command] = {c.name: c for c in (
    Command("open", returns_state=True, stage="load"),
    Command("state", returns_state=True),
    Command("set_pipeline", returns_state=True, stage="pipeline"),
    Command("step", returns_state=True, stage="pipeline"),
    Command("back", returns_state=True),
    Command("jump", returns_state=True, stage="pipeline"),
    Command("run_to_end", returns_state=True, stage="pipeline"),
    Command("replay", returns_state=True, stage="load"),
    Command("reimport", returns_state=True, stage="import"),
    Command("remeasure", returns_state=True, stage="pipeline"),
    Command("load_converters", stage="load"),
    Command("load_pass_file", stage="pipeline"),
    Command("fx_graph"),
    Command("relax_graph", supersede=True),
    Command("tir_functions"),
    Command("function_text"),
    Command("module_text"),
    Command("diff", supersede=True),
    Command("provenance"),
    Command("query", stage="query"),
    Command("memory", stage="build"),
    Command("build_run", stage="build"),
    Command("intermediates", stage="run"),
    Command("run_sizes", stage="run"),
    Command("latency_trace"),
    Command("export", stage="export"),
    Command("compare", stage="pipeline"),
    Command("compare_diff"),
    Command("compare_graphs"),
    Command("bisect", stage="build"),
    Command("write_repro", stage="export"),
    Command("list_samples"),
    Command("list_passes"),
    Command("list_pipelines"),
    Command("warm"),
    Command("ping"),
    Command("crash"),
    Command("shutdown"),
)}

# relax_graph / function_text with this function name: every Relax function of the step at once
# (irviz.core.views.graph.ALL_FUNCTIONS)
ALL_FUNCTIONS = "*"

STATE_CMDS = frozenset(c.name for c in COMMANDS.values() if c.returns_state)
DEFAULT_SUPERSEDE = frozenset(c.name for c in COMMANDS.values() if c.supersede)


class BadRequest(RequestError):
    """The request line itself is wrong: an unknown command, arguments that do not fit it."""


# ----------------------------------------------------------------------------------------------
# the state


def step_entry(index: int, pass_name: str, params: dict, seconds: float, changed: bool,
               added=(), removed=(), changed_funcs=(), size: dict | None = None) -> dict:
    """One recorded step as the state lists it. `size`: {bindings, prim_funcs, tir_lines} of the
    step's module (core.views.ir_size), None when not computed."""
    return {"index": int(index), "pass": pass_name, "params": clean(dict(params or {})),
            "seconds": float(seconds), "changed": bool(changed), "added": list(added),
            "removed": list(removed), "changed_funcs": list(changed_funcs),
            "size": dict(size) if size else None}


def invocation(name: str, params: dict | None = None) -> dict:
    """A planned pass: {name, params}."""
    return {"name": name, "params": clean(dict(params or {}))}


def make_state(*, model=None, spec=None, importer=None, cursor: int = 0, error=None, steps=(),
               planned=(), relax_functions=(), tir_functions=(), import_error=None,
               converter_files=(), run_functions=None, capture=None, importer_maps=(),
               pipeline_text="", keep_params=False, params_file=None) -> dict:
    """The whole session as the GUI sees it. `error`: the error of the last failed pass or import;
    `import_error`: set while a model is captured but its import failed (then `steps` is empty);
    `capture`: "export" | "symbolic_trace" (None without an FX graph); `importer_maps`: the course
    map files the import used. `pipeline_text`: applied + planned passes as one line (`--pipeline`
    takes it); `keep_params`: main takes the weights as parameters, kept in `params_file`."""
    return {"model": model, "spec": spec, "importer": importer, "cursor": int(cursor),
            "error": error, "steps": list(steps), "planned": list(planned),
            "relax_functions": list(relax_functions), "tir_functions": list(tir_functions),
            "import_error": import_error, "converter_files": list(converter_files),
            # the Relax functions a build can run (no fused sub-functions); main first
            "run_functions": list(run_functions if run_functions is not None else
                                  [f for f in relax_functions if f == "main"]),
            "capture": capture, "importer_maps": list(importer_maps),
            "pipeline_text": pipeline_text, "keep_params": bool(keep_params), "params_file": params_file}


def empty_state() -> dict:
    """No model open."""
    return make_state()


STATE_KEYS = frozenset(empty_state())


# ----------------------------------------------------------------------------------------------
# messages


def progress_message(rid, text: str, fraction: float | None = None, pass_name: str | None = None) -> dict:
    """`pass` names the pass being applied, so a reader never parses the English text for it."""
    msg = {"id": rid, "progress": text}
    if fraction is not None:
        msg["fraction"] = float(max(0.0, min(1.0, fraction)))
    if pass_name is not None:
        msg["pass"] = pass_name
    return msg


def error_dict(exc: BaseException, cmd: str = "") -> dict:
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    if isinstance(exc, IrvizError):
        out = {"stage": exc.stage, "message": exc.message, "hint": exc.hint,
               "detail": exc.detail or tb}
        for extra in ("node", "op"):
            if getattr(exc, extra, None) is not None:
                out[extra] = str(getattr(exc, extra))
        return out
    command = COMMANDS.get(cmd)
    return {"stage": command.stage if command else "engine",
            "message": tvm_error_text(exc, head=0, tail=12, with_type=True),
            "hint": None, "detail": tb}


def import_error_fields(exc, loaded) -> dict:
    """What the state and the FX graph say about a failed import."""
    err = error_dict(exc)
    return {"node": err.get("node"), "op": err.get("op"), "message": err["message"],
            "hint": err.get("hint"), "model": getattr(loaded, "name", None)}


def json_default(obj):
    # numpy scalars and arrays, tuples of TVM ints, paths: whatever the json module does not know
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "__fspath__"):
        return os.fspath(obj)
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=str)
    try:
        return int(obj)
    except Exception:  # noqa: BLE001
        return str(obj)


def clean(obj):
    """NaN and inf become None, so every reply is strict JSON."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean(v) for v in obj]
    return obj
