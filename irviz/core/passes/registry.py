"""The pass registry: what a pass is, the registered passes, their parameters, applying one.

* :class:`PassSpec` describes one pass irviz can step: a name, a one-line description, its
  parameters (:class:`PassParam`) and ``make(**params) -> tvm.ir.transform.Pass``.
* :func:`apply_pass` runs one invocation under ``with target, PassContext(opt_level=3)`` and
  turns every failure into :class:`~irviz.core.errors.PassError` carrying TVM's real message.
  A "gpu" pass (dlight's GPU rules) runs under a GPU target: the one chosen, or with none chosen
  ``DEFAULT_GPU_TARGET`` (cuda sm_80); a CPU target is a PassError, as a GPU target is for a "cpu"
  pass (CPU schedules and library dispatch).

The built-in passes are registered by ``catalogue``, named pipelines are ``pipelines``, users'
pass files are ``user_files``; ``irviz.core.passes`` exports all of them.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import json
import threading
import traceback
from dataclasses import dataclass, field
from collections.abc import Callable

import tvm

from irviz.core.errors import PassError, traceback_text, tvm_error_text
from irviz.core.tvm_compat import as_target, shallow_copy

__all__ = [
    "PARAM_KINDS",
    "PassInvocation",
    "PassParam",
    "PassSpec",
    "BUILTIN_PREFIX",
    "apply_pass",
    "builtin_name",
    "coerce_param",
    "find_pass",
    "get_pass",
    "list_passes",
    "register_pass",
    "replace_user_passes",
    "resolve_params",
    "unregister_pass",
]

PARAM_KINDS = ("bool", "int", "float", "str", "choice", "json")


@dataclass
class PassParam:
    name: str
    kind: str  # "bool" | "int" | "float" | "str" | "choice" | "json"
    default: object
    help: str
    choices: list | None = None


@dataclass
class PassSpec:
    name: str
    description: str
    params: list[PassParam]
    make: Callable[..., tvm.ir.transform.Pass]  # make(**params) -> Pass
    category: str = "user"  # "tvm" | "course" | "build" | "user"
    roundtrip_ok: bool = True  # False when TVM's printer output won't parse after it
    # the pass may change its input module in place (dlight ApplyDefaultSchedule, and any user
    # code), so apply_pass hands it a shallow copy: a Session's earlier steps must stay as they were
    mutates_input: bool = False
    source: str = ""  # "file.py:LINE" for user passes
    # check(mod, **params) raises a PassError saying what to do before the pass runs: an error
    # raised inside a TVM pass reaches Python as a bare RuntimeError, without its hint
    check: Callable[..., None] | None = None


@dataclass
class PassInvocation:
    name: str
    params: dict = field(default_factory=dict)


def as_invocation(item) -> PassInvocation:
    """A fresh PassInvocation from one, a name, {name, params} or (name, params)."""
    if isinstance(item, PassInvocation):
        return PassInvocation(item.name, dict(item.params or {}))
    if isinstance(item, str):
        return PassInvocation(item, {})
    if isinstance(item, dict):
        return PassInvocation(item["name"], dict(item.get("params") or {}))
    if isinstance(item, (tuple, list)) and len(item) == 2:
        return PassInvocation(item[0], dict(item[1] or {}))
    raise TypeError(f"not a pass invocation: {item!r}")


# ---------------------------------------------------------------------------------------------
# registry
#
# Built-in passes and users' passes are kept apart: a user pass may take a built-in's name (the
# course's MatmulAddFuse, say); the plain name is then the user's, and the built-in stays
# reachable as BUILTIN_PREFIX + name ("builtin:MatmulAddFuse").

BUILTIN_PREFIX = "builtin:"
_REGISTRY: dict[str, PassSpec] = {}  # built-in passes (category other than "user")
_USER: dict[str, PassSpec] = {}  # users' passes
_QUALIFIED: dict[str, PassSpec] = {}  # "builtin:NAME" -> the built-in under that name
_LOCK = threading.RLock()


def register_pass(spec: PassSpec, *, replace: bool = False) -> PassSpec:
    """Add a pass. A user pass may replace an earlier user pass of the same name and may take a
    built-in's name (the built-in is then "builtin:NAME"); a built-in never replaces another
    unless `replace`."""
    if not isinstance(spec, PassSpec):
        raise PassError(f"register_pass expects a PassSpec, got {type(spec).__name__}")
    if not spec.name or not isinstance(spec.name, str):
        raise PassError("a pass needs a non-empty name")
    if spec.name.startswith(BUILTIN_PREFIX):
        raise PassError(f"pass {spec.name!r}: names starting with {BUILTIN_PREFIX!r} are the "
                        "built-ins' qualified names", hint="give your pass another name")
    if not callable(spec.make):
        raise PassError(f"pass {spec.name}: make is not callable")
    for p in spec.params:
        if p.kind not in PARAM_KINDS:
            raise PassError(
                f"pass {spec.name}: parameter {p.name!r} has unknown kind {p.kind!r}",
                hint=f"use one of {', '.join(PARAM_KINDS)}",
            )
    with _LOCK:
        if spec.category == "user":
            _USER[spec.name] = spec
            return spec
        old = _REGISTRY.get(spec.name)
        if old is not None and not replace:
            raise PassError(
                f"a pass named {spec.name!r} already exists ({old.category})",
                hint="give your pass another name",
            )
        _REGISTRY[spec.name] = spec
        _QUALIFIED.pop(BUILTIN_PREFIX + spec.name, None)
    return spec


def unregister_pass(name: str) -> None:
    """Remove a pass: the user's of that name if there is one (uncovering a built-in it shadowed),
    else the built-in."""
    with _LOCK:
        if _USER.pop(name, None) is None:
            _REGISTRY.pop(name, None)
            _QUALIFIED.pop(BUILTIN_PREFIX + name, None)


def _qualified(name: str) -> PassSpec | None:
    spec = _QUALIFIED.get(BUILTIN_PREFIX + name)
    if spec is None and name in _REGISTRY:
        spec = dataclasses.replace(_REGISTRY[name], name=BUILTIN_PREFIX + name)
        _QUALIFIED[spec.name] = spec
    return spec


def list_passes() -> list[PassSpec]:
    """All passes, in registration order (TVM, build steps, course, then user passes); a built-in
    a user pass shadows is listed under its qualified name "builtin:NAME"."""
    with _LOCK:
        builtins = [_qualified(n) if n in _USER else s for n, s in _REGISTRY.items()]
        return builtins + list(_USER.values())


def find_pass(name: str) -> PassSpec | None:
    """The user's pass `name`, else the built-in; "builtin:NAME" is always the built-in."""
    with _LOCK:
        if name.startswith(BUILTIN_PREFIX):
            return _qualified(name[len(BUILTIN_PREFIX):])
        return _USER.get(name) or _REGISTRY.get(name)


def builtin_name(name: str) -> str:
    """The built-in pass's own name: "builtin:FuseOps" -> "FuseOps" (others unchanged)."""
    return name[len(BUILTIN_PREFIX):] if name.startswith(BUILTIN_PREFIX) else name


def replace_user_passes(old_names, specs) -> None:
    """Drop the user passes `old_names` and register `specs`, as one step: a reloaded pass file's
    passes replace what it registered before, and passes it no longer defines disappear."""
    with _LOCK:
        for name in old_names:
            _USER.pop(name, None)
        for s in specs:
            register_pass(s)


def get_pass(name: str) -> PassSpec:
    spec = find_pass(name)
    if spec is None:
        known = [s.name for s in list_passes()]
        raise PassError(f"unknown pass {name!r}", hint="known passes: " + ", ".join(known))
    return spec


# ---------------------------------------------------------------------------------------------
# parameters


def _coerce(spec: PassSpec, p: PassParam, value):
    def bad(why: str):
        return PassError(
            f"{spec.name}: parameter {p.name!r} {why}",
            hint=f"{p.name} ({p.kind}): {p.help}"
            + (f"; choices: {', '.join(map(str, p.choices))}" if p.choices else ""),
        )

    if value is None:
        return None if p.kind in ("str", "json") else p.default
    if p.kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in ("true", "1", "yes", "on", "false", "0", "no", "off"):
            return value.strip().lower() in ("true", "1", "yes", "on")
        raise bad(f"must be true/false, got {value!r}")
    if p.kind == "int":
        if isinstance(value, bool):
            raise bad(f"must be an integer, got {value!r}")
        if isinstance(value, int):
            return value
        try:
            return int(str(value).strip())
        except ValueError:
            raise bad(f"must be an integer, got {value!r}") from None
    if p.kind == "float":
        if isinstance(value, bool):
            raise bad(f"must be a number, got {value!r}")
        if isinstance(value, (int, float)):
            return float(value)
        try:
            return float(str(value).strip())
        except ValueError:
            raise bad(f"must be a number, got {value!r}") from None
    if p.kind == "str":
        if isinstance(value, (list, tuple)):
            return ",".join(str(v) for v in value)
        return str(value)
    if p.kind == "choice":
        if p.choices and value not in p.choices:
            # text gives every value as a string: "3" picks the choice 3
            same = [c for c in p.choices if str(c) == str(value)]
            if not same:
                raise bad(f"must be one of {p.choices}, got {value!r}")
            return same[0]
        return value
    if p.kind == "json":
        if isinstance(value, str):
            text = value.strip()
            if not text:
                return None
            try:
                return json.loads(text)
            except json.JSONDecodeError as e:
                raise bad(f"is not valid JSON ({e})") from None
        return value
    raise bad(f"has unknown kind {p.kind!r}")


def coerce_param(spec: PassSpec, name: str, value):
    """One given value converted to its parameter's kind; PassError on an unknown name or a bad
    value (the pipeline-text parser types what it reads with this)."""
    p = next((q for q in spec.params if q.name == name), None)
    if p is None:
        valid = [q.name for q in spec.params]
        raise PassError(
            f"{spec.name} has no parameter {name!r}",
            hint=("valid parameters: " + ", ".join(valid)) if valid else f"{spec.name} takes no parameters",
        )
    return _coerce(spec, p, value)


def resolve_params(spec: PassSpec, given: dict | None) -> dict:
    """Defaults filled in, values coerced to their kind; PassError on unknown names or bad values."""
    given = dict(given or {})
    valid = {p.name: p for p in spec.params}
    unknown = [k for k in given if k not in valid]
    if unknown:
        raise PassError(
            f"{spec.name} has no parameter {', '.join(map(repr, unknown))}",
            hint=("valid parameters: " + ", ".join(valid)) if valid else f"{spec.name} takes no parameters",
        )
    return {name: _coerce(spec, p, given.get(name, p.default)) for name, p in valid.items()}


# ---------------------------------------------------------------------------------------------
# applying a pass


def _user_location(exc: BaseException, spec: PassSpec) -> str:
    """file:line of the deepest frame inside the user's pass file, if any."""
    if not spec.source:
        return ""
    src_file = spec.source.rsplit(":", 1)[0]
    where = ""
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == src_file:
            where = f"{frame.filename}:{frame.lineno}"
    return where


def _as_target(target):
    try:
        return as_target(target)
    except Exception as e:
        raise PassError(f"bad target {target!r}: {tvm_error_text(e)}", hint="e.g. 'llvm'") from e


def target_for(spec: PassSpec, target):
    """The tvm Target pass `spec` runs under when `target` was chosen (None: none was)."""
    from irviz.core.backend.gpu_schedule import DEFAULT_GPU_TARGET
    from irviz.core.target import is_gpu

    if spec.category == "gpu" and target is None:
        return tvm.target.Target(DEFAULT_GPU_TARGET)
    tgt = _as_target(target)
    if spec.category == "gpu" and not is_gpu(tgt):
        cpu = " ".join(str(x) for x in (tgt.kind.name, tgt.attrs.get("mcpu")) if x)
        raise PassError(f"{spec.name} schedules kernels for a GPU, but the target is a CPU ({cpu})",
                        hint="choose a GPU target (--target cuda, 'cuda -arch=sm_86', opencl, ...), "
                             "or a CPU pipeline (zero, tir-cpu, fast-cpu) for this target")
    if spec.category == "cpu" and is_gpu(tgt):
        raise PassError(f"{spec.name} schedules for a CPU, but the target is a GPU ({tgt.kind.name})",
                        hint="use the gpu pipeline (dlight's GPU schedules) or zero for a GPU target, "
                             "or choose a CPU target")
    return tgt


_NOTES: contextvars.ContextVar[list | None] = contextvars.ContextVar("irviz_pass_notes", default=None)


def pass_note(text: str) -> None:
    """Called from inside a pass: say why it did what it did, or nothing (shown with the step).
    Outside apply_pass_noted it goes nowhere."""
    sink = _NOTES.get()
    if sink is not None and text not in sink:
        sink.append(text)


_PROGRESS: contextvars.ContextVar = contextvars.ContextVar("irviz_pass_progress", default=None)


def pass_progress(text: str, fraction: float | None = None) -> None:
    """Called from inside a long pass (MetaScheduleTune): what it is doing now, for the progress
    bar; goes nowhere unless someone listens (reporting_progress)."""
    sink = _PROGRESS.get()
    if sink is not None:
        sink(text, fraction)


@contextlib.contextmanager
def reporting_progress(callback):
    """While passes run here: pass_progress(text, fraction) calls `callback(text, fraction)`."""
    token = _PROGRESS.set(callback)
    try:
        yield
    finally:
        _PROGRESS.reset(token)


def apply_pass_noted(inv: PassInvocation | str, mod: tvm.IRModule,
                     target=None) -> tuple[tvm.IRModule, list[str]]:
    """apply_pass, and the notes the pass gave with pass_note."""
    sink: list[str] = []
    token = _NOTES.set(sink)
    try:
        out = apply_pass(inv, mod, target)
    finally:
        _NOTES.reset(token)
    return out, sink


def apply_pass(inv: PassInvocation | str, mod: tvm.IRModule, target=None) -> tvm.IRModule:
    """Run one pass on ``mod`` (never changed) and return the new module; PassError on failure."""
    if isinstance(inv, str):
        inv = PassInvocation(inv)
    spec = get_pass(inv.name)
    params = resolve_params(spec, inv.params)
    if spec.check is not None and isinstance(mod, tvm.IRModule):
        spec.check(mod, **params)
    tgt = target_for(spec, target)
    try:
        with tgt:
            the_pass = spec.make(**params)
        if not isinstance(the_pass, tvm.ir.transform.Pass):
            raise PassError(
                f"{spec.name}: make() returned {type(the_pass).__name__}, not a tvm Pass",
                hint=f"defined at {spec.source}" if spec.source else None,
            )
    except PassError:
        raise
    except Exception as e:
        where = _user_location(e, spec)
        raise PassError(
            f"{spec.name}: cannot create the pass" + (f" at {where}" if where else "") + f": {tvm_error_text(e)}",
            hint=f"parameters were {params}" if params else None,
            detail=traceback.format_exc(),
        ) from e
    if not isinstance(mod, tvm.IRModule):
        raise PassError(f"{spec.name}: expected an IRModule, got {type(mod).__name__}")
    inp = shallow_copy(mod) if spec.mutates_input else mod
    try:
        with tgt, tvm.transform.PassContext(opt_level=3):
            out = the_pass(inp)
    except PassError:
        raise
    except Exception as e:
        where = _user_location(e, spec)
        msg = f"{spec.name} failed" + (f" at {where}" if where else "") + f": {tvm_error_text(e)}"
        raise PassError(
            msg,
            hint=_hint_for(spec, e),
            detail=traceback_text(e),
        ) from e
    if not isinstance(out, tvm.IRModule):
        raise PassError(f"{spec.name} returned {type(out).__name__}, not an IRModule")
    return out


def _hint_for(spec: PassSpec, exc: BaseException) -> str:
    text = str(exc)
    if spec.category == "user":
        return f"the pass is defined in {spec.source}; fix it and reload the file"
    if builtin_name(spec.name) == "FuseTIR" or "call_tir" in text:
        return "FuseTIR and the build steps expect lowered ops: run LegalizeOps (or LowerToTensorIR) first"
    if builtin_name(spec.name) == "FuseOps":
        return "FuseOps needs AnnotateTIROpPattern after LegalizeOps"
    return "step back, or try the passes before it in another order (see Details for TVM's trace)"
