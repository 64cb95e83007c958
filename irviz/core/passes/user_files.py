"""Users' files: pass files and parameter files for BindParams.

A pass file contributes every pass it defines (see ``examples/my_passes.py``): ``@irviz_pass``
functions, ``IRVIZ_PASSES = [PassSpec, ...]``, and TVM's own kinds (``file_passes``): classes
decorated with ``module_pass`` / ``function_pass`` / ``dataflowblock_pass``, Pass instances and
Sequentials. A pass may take a built-in's name: within the session the name is the user's and the
built-in is ``builtin:NAME``."""
from __future__ import annotations

import inspect
import itertools
import traceback
from pathlib import Path

import numpy as np
import tvm

from irviz.core.errors import LoadError, PassError, traceback_text
from irviz.core.frontend.sample_files import sample_path
from irviz.core.passes.file_passes import params_from_signature, tvm_passes_of
from irviz.core.passes.registry import PassSpec, replace_user_passes
from irviz.core.user_code import exec_file

def _source_of(fn) -> str:
    try:
        return f"{inspect.getsourcefile(fn)}:{inspect.getsourcelines(fn)[1]}"
    except (OSError, TypeError):
        return ""


def irviz_pass(name: str | None = None, description: str = "", *, roundtrip_ok: bool = True):
    """Decorator turning a function into an irviz pass (collected by :func:`load_pass_file`).

    Either ``def f(mod, **params) -> IRModule`` (the first positional parameter without a
    default receives the module; returning a tvm Pass instead applies that pass to it) or a
    factory ``def f(**params) -> tvm.ir.transform.Pass`` (all parameters have defaults).
    ``name`` defaults to the function's name, ``description`` to its docstring's first line. Keyword parameters with defaults become pass
    parameters (bool/int/str defaults give that kind; anything else is "json"). The function is
    returned unchanged, with the PassSpec in ``fn.irviz_spec``.
    """

    def wrap(fn):
        sig = inspect.signature(fn)
        first = next(iter(sig.parameters.values()), None)
        takes_mod = first is not None and first.default is first.empty and first.kind in (
            first.POSITIONAL_ONLY,
            first.POSITIONAL_OR_KEYWORD,
        )
        pass_name = name or fn.__name__
        doc_lines = (inspect.getdoc(fn) or "").strip().splitlines()
        desc = description or (doc_lines[0] if doc_lines else pass_name)

        if takes_mod:

            def make(**params):
                def transform(mod, _ctx):
                    result = fn(mod, **params)
                    if isinstance(result, tvm.ir.transform.Pass):
                        result = result(mod)
                    if not isinstance(result, tvm.IRModule):
                        raise TypeError(
                            f"{pass_name} returned {type(result).__name__}; return an IRModule or a tvm Pass"
                        )
                    return result

                return tvm.ir.transform.module_pass(transform, opt_level=0, name=pass_name)

        else:

            def make(**params):
                return fn(**params)

        fn.irviz_spec = PassSpec(
            name=pass_name,
            description=desc,
            params=params_from_signature(fn, skip_first=takes_mod, owner=fn.__name__),
            make=make,
            category="user",
            roundtrip_ok=roundtrip_ok,
            mutates_input=True,
            source=_source_of(fn),
        )
        return fn

    if callable(name):  # used bare: @irviz_pass
        fn, name = name, None
        return wrap(fn)
    return wrap


_file_counter = itertools.count(1)
_FILE_PASSES: dict[str, list[str]] = {}  # resolved path -> names it registered


def _error_location(exc: BaseException, path: str) -> str:
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}:{exc.lineno}"
    where = f"{path}:?"
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == path:
            where = f"{frame.filename}:{frame.lineno}"
    return where


def load_pass_file(path) -> list[PassSpec]:
    """Execute a user pass file (or sample:NAME, a sample that is also a pass file) and register its
    passes (category "user"); PassError with file:line."""
    if str(path).startswith("sample:"):
        try:
            path = sample_path(str(path)[len("sample:"):])
        except LoadError as e:
            raise PassError(e.message, hint=e.hint) from None
    path = Path(str(path)).expanduser().resolve()
    spath = str(path)
    if not path.is_file():
        raise PassError(f"pass file not found: {spath}", hint="give the path of a .py file")
    mod_name = f"irviz_user_passes_{next(_file_counter)}_{path.stem}"
    try:
        module = exec_file(path, mod_name)
    except BaseException as e:  # (SystemExit from a script too
        where = _error_location(e, spath)
        kind = "syntax error" if isinstance(e, SyntaxError) else type(e).__name__
        msg = e.msg if isinstance(e, SyntaxError) else str(e)
        raise PassError(
            f"{where}: {kind}: {msg}",
            hint="fix the pass file and load it again",
            detail=traceback_text(e),
        ) from None

    specs: list[PassSpec] = []
    declared = getattr(module, "IRVIZ_PASSES", None)
    if declared is not None:
        if not isinstance(declared, (list, tuple)):
            raise PassError(
                f"{spath}: IRVIZ_PASSES must be a list of PassSpec, got {type(declared).__name__}"
            )
        for i, item in enumerate(declared):
            if isinstance(item, PassSpec):
                specs.append(item)
            elif callable(item) and isinstance(getattr(item, "irviz_spec", None), PassSpec):
                specs.append(item.irviz_spec)
            else:
                raise PassError(
                    f"{spath}: IRVIZ_PASSES[{i}] is {type(item).__name__}, not a PassSpec",
                    hint="build entries with PassSpec(name=..., description=..., params=[...], make=...)",
                )
    for value in vars(module).values():
        s = getattr(value, "irviz_spec", None)
        if isinstance(s, PassSpec) and getattr(value, "__module__", None) == mod_name:
            if all(s is not x for x in specs):
                specs.append(s)
    specs.extend(tvm_passes_of(module, mod_name, path))
    if not specs:
        raise PassError(
            f"{spath}: defines no passes",
            hint="decorate a class with @tvm.ir.transform.module_pass(opt_level=0, name=...) (or "
                 "relax.transform.function_pass), bind a tvm.transform.Sequential to a name, "
                 "decorate functions with @irviz_pass(name=...), or set IRVIZ_PASSES = [PassSpec(...)]",
        )
    for s in specs:
        s.category = "user"
        s.mutates_input = True
        if not s.source:
            s.source = _source_of(s.make) or f"{spath}:1"
    names = [s.name for s in specs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        where = "; ".join(f"{n} at " + ", ".join(s.source.rsplit(":", 1)[-1] for s in specs if s.name == n)
                          for n in dup)
        raise PassError(f"{spath}: pass names used twice: {where}",
                        hint="give each pass its own name (the name= of its decorator)")
    replace_user_passes(_FILE_PASSES.get(spath, []), specs)
    _FILE_PASSES[spath] = [s.name for s in specs]
    return specs


def load_params_file(path) -> dict[str, np.ndarray]:
    """Parameter dict from a ``.npz`` (numpy.savez) or a TVM ``save_param_dict`` file."""
    path = Path(str(path)).expanduser()
    if not str(path).strip() or not path.is_file():
        raise PassError(
            f"parameter file not found: {path}",
            hint="give a .npz (numpy.savez) or .params (tvm.runtime.save_param_dict) file",
        )
    try:
        if path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as data:
                return {k: np.asarray(data[k]) for k in data.files}
        blob = path.read_bytes()
        return {k: v.numpy() for k, v in tvm.runtime.load_param_dict(blob).items()}
    except PassError:
        raise
    except Exception as e:
        raise PassError(
            f"cannot read parameters from {path}: {e}",
            hint="give a .npz (numpy.savez) or .params (tvm.runtime.save_param_dict) file",
        ) from e
