"""Load a model the user names: a Python model file, FILE.py:FACTORY, a .pt2, or sample:NAME.

Model-file contract: the file defines `get_model()` returning `(module, example_inputs)`, a
torch.nn.Module and a tuple of tensors.  `FILE.py:NAME` calls `NAME()` instead (same contract).
An optional `get_dynamic_shapes()` returns what torch.export's `dynamic_shapes=` expects, and an
optional `get_alt_inputs()` a second tuple of inputs with other sizes for the dynamic dims, so one
build can be checked on two sizes.

Every failure is a LoadError with a specific message and hint; the traceback text goes into
`.detail` only.  Each load executes the file afresh under a unique module name, so editing the
file and loading it again picks up the edits.
"""
from __future__ import annotations

import contextlib
import os
import traceback
from dataclasses import dataclass
from pathlib import Path

import torch

from irviz.core.errors import LoadError
from irviz.core.frontend.course_fx import MAP_NAMES, maps_of
from irviz.core.frontend.files import (
    _forget_new_local_modules,
    _user_frame,
    exec_model_file,
    parse_spec,
    shown_path,
)
from irviz.core.frontend import structure_only as no_weights_mod
from irviz.core.frontend.sample_files import list_samples, sample_path
from irviz.core.user_code import exception_line, importable_folder

DEFAULT_FACTORY = "get_model"
DYNAMIC_SHAPES_FUNC = "get_dynamic_shapes"
ALT_INPUTS_FUNC = "get_alt_inputs"
CONTRACT = "get_model() must return (module, example_inputs): a torch.nn.Module and a tuple of tensors"



@dataclass
class LoadedModel:
    module: torch.nn.Module  # eval mode
    example_inputs: tuple  # tuple[torch.Tensor, ...]
    spec: str  # what the user typed: "path.py", "path.py:factory", "x.pt2", "sample:mlp"
    name: str  # short display name ("mlp", "my_model")
    exported: torch.export.ExportedProgram | None = None  # set when loaded from .pt2
    dynamic_shapes: object = None  # from a model file's get_dynamic_shapes()
    alt_inputs: tuple | None = None  # from a model file's get_alt_inputs(): other sizes, same structure
    capture: str | None = None  # a model file's IRVIZ_CAPTURE ("export" | "symbolic_trace")
    importer: str | None = None  # a model file's IRVIZ_IMPORTER ("exported_program" | "course")
    course_maps: tuple = ()  # a model file's own call_function_map / call_module_map, if any
    notes: tuple = ()  # what irviz changed on the way in, for the log
    # no weights (--no-weights, or a module built on the meta device): module and inputs are meta
    # tensors, and nothing can run
    structure_only: bool = False


def load_model(spec: str, no_weights: bool = False) -> LoadedModel:
    """Load what the user named; LoadError (message + hint, traceback in .detail) on any problem.
    no_weights: get_model() runs under torch.device("meta") and the model is structure only (see
    structure_only); a model file whose module is on the meta device is structure only anyway."""
    loaded = _load(spec, no_weights)
    if loaded.exported is not None and no_weights:  # a .pt2's weights are loaded: just not used
        loaded.structure_only = True
        loaded.notes += ("structure only (--no-weights): the program's weights are not imported",)
    return loaded


def _load(spec: str, no_weights: bool) -> LoadedModel:
    if not isinstance(spec, str) or not spec.strip():
        raise LoadError("No model given.", hint=_usage_hint())
    kind, target, factory = parse_spec(spec)
    if kind == "sample":
        if not target:
            raise LoadError("sample: needs a name.", hint=_known_samples_hint())
        path = sample_path(target)
        loaded = _load_py(path, DEFAULT_FACTORY, spec, no_weights)
        loaded.name = target
        return loaded

    path = Path(target).expanduser()
    if not path.exists():
        raise LoadError(f"No such file: {target}", hint=_missing_hint(path))
    if path.is_dir():
        raise LoadError(
            f"{target} is a directory, not a model file.",
            hint="Give a .py file that defines get_model(), or a .pt2 saved with torch.export.save.",
        )
    suffix = path.suffix.lower()
    if suffix == ".py":
        return _load_py(path.resolve(), factory or DEFAULT_FACTORY, spec, no_weights)
    if suffix == ".pt2":
        if factory:
            raise LoadError(
                f"A .pt2 file has no factories: {spec!r}.",
                hint=f"Load it as {target} (the :NAME form is for .py model files).",
            )
        return _load_pt2(path.resolve(), spec)
    raise LoadError(
        f"Unknown model file type {path.suffix or '(no extension)'!r}: {target}",
        hint="irviz loads a .py model file (defining get_model()), a .pt2 from torch.export.save, "
        "or sample:NAME.",
    )


# ---------------------------------------------------------------------------------------------
# .py model files


def _load_py(path: Path, factory: str, spec: str, no_weights: bool = False) -> LoadedModel:
    shown = shown_path(path)
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise LoadError(f"Cannot read {shown}: {e}", hint="Check the file's permissions and encoding (UTF-8).",
                        detail=traceback.format_exc()) from None
    try:
        compile(source, str(path), "exec")
    except SyntaxError as e:
        where = f"{shown}:{e.lineno}" if e.lineno else shown
        code = (e.text or "").strip()
        raise LoadError(
            f"Syntax error in {where}: {e.msg}" + (f"\n    {code}" if code else ""),
            hint="Fix the Python syntax in the model file and load it again.",
            detail=traceback.format_exc(),
        ) from None

    module = exec_model_file(path, shown)

    fn = getattr(module, factory, None)
    if fn is None:
        defined = _defined_callables(module)
        listing = ", ".join(defined) if defined else "none"
        if factory == DEFAULT_FACTORY:
            raise LoadError(
                f"{shown} does not define get_model(). Callables it defines: {listing}.",
                hint="Add get_model() returning (module, example_inputs), or pick another factory with "
                f"{shown}:NAME; for an IR file, define a module-level @I.ir_module class or "
                "get_irmodule().",
            )
        raise LoadError(
            f"{shown} has no factory {factory!r}. Callables it defines: {listing}.",
            hint=f"Use {shown}:NAME with one of the names above; the factory must return "
            "(module, example_inputs).",
        )
    if not callable(fn):
        raise LoadError(
            f"{shown}: {factory} is a {type(fn).__name__}, not a function.",
            hint=f"Define {factory}() as a function returning (module, example_inputs).",
        )

    dirpath = str(path.parent)
    device = (no_weights_mod.on_meta_device() if no_weights else
              no_weights_mod.allocation_guard(no_weights_mod.memory_budget()))
    with importable_folder(dirpath), _forget_new_local_modules(dirpath, drop_earlier=False):
        try:
            with device:  # --no-weights: no weight is ever allocated; else not more than fits
                result = fn()
        except LoadError:
            raise  # already says what is wrong (e.g. hf samples: pip install 'irviz[hf]')
        except no_weights_mod.TooBigError as e:
            raise LoadError(*no_weights_mod.too_big_message(e, factory, shown)) from None
        except Exception as e:  # the user's code can raise anything
            raise LoadError(
                f"{factory}() in {shown} raised {exception_line(e)}{_user_frame(e, path)}"
                + (" (under torch.device('meta'), for --no-weights)" if no_weights else ""),
                hint=(f"with --no-weights, {factory}() runs on the meta device, where tensors have "
                      "no values: it must build the model from shapes alone (no checkpoint, no "
                      ".item()); or open it with its weights" if no_weights else
                      f"Fix {factory}() so it returns (module, example_inputs); run the file with python to debug."),
                detail=traceback.format_exc(),
            ) from None
    module_obj, inputs = _check_result(result, f"{factory}()", shown)
    meta = no_weights_mod.without_weights(module_obj, inputs, no_weights)
    notes = ()
    if meta is not None:
        module_obj, inputs, note = meta
        notes = (note,)

    dynamic_shapes = _call_optional(
        module, DYNAMIC_SHAPES_FUNC, shown, path,
        "get_dynamic_shapes() must return what torch.export's dynamic_shapes= accepts "
        "(e.g. {'x': {0: torch.export.Dim('batch')}}).")
    alt_inputs = _call_optional(
        module, ALT_INPUTS_FUNC, shown, path,
        "get_alt_inputs() must return a tuple of tensors, like get_model()'s inputs.")
    if alt_inputs is not None and meta is None:  # other sizes are for runs
        alt_inputs = (alt_inputs,) if isinstance(alt_inputs, torch.Tensor) else tuple(alt_inputs)
    else:
        alt_inputs = None

    module_obj.eval()
    notes += _without_kv_cache(module_obj)
    if meta is None:  # eager ops on meta tensors cannot read values (.item()); the capture checks
        _check_forward(module_obj, inputs, shown, path)
    name = path.stem if factory == DEFAULT_FACTORY else f"{path.stem}:{factory}"
    capture, importer, course_maps = _frontend_hints(module, shown)
    return LoadedModel(module=module_obj, example_inputs=inputs, spec=spec, name=name,
                       dynamic_shapes=dynamic_shapes, alt_inputs=alt_inputs, capture=capture,
                       importer=importer, course_maps=course_maps, notes=notes,
                       structure_only=meta is not None)


def _without_kv_cache(module) -> tuple[str, ...]:
    """A transformers decoder returns its KV cache beside the logits by default, as a
    ``DynamicCache`` that torch.export cannot put in a program's outputs: the capture failed on a
    causal LM written the usual way.  One forward pass has no use for the cache, so it is turned
    off, and the log says so."""
    config = getattr(module, "config", None)
    if not type(module).__module__.startswith("transformers.") or not getattr(config, "use_cache", False):
        return ()
    config.use_cache = False
    return (f"{type(module).__name__}: config.use_cache set to False: the KV cache a decoder "
            "returns is not a tensor torch.export can output; the logits are compared as before",)


def _frontend_hints(module, shown: str):
    """IRVIZ_CAPTURE / IRVIZ_IMPORTER and the course's map dicts a model file may define, so a
    course-style file opens the course's way without flags."""
    out = []
    for attr, choices in (("IRVIZ_CAPTURE", ("export", "symbolic_trace")),
                          ("IRVIZ_IMPORTER", ("exported_program", "course"))):
        value = getattr(module, attr, None)
        if value is not None and value not in choices:
            raise LoadError(f"{attr} in {shown} is {value!r}",
                            hint=f"set {attr} to one of {', '.join(map(repr, choices))}, or remove it")
        out.append(value)
    maps = ()
    if any(getattr(module, n, None) is not None for n in MAP_NAMES):
        fmap, mmap = maps_of(module, shown)
        maps = ((fmap, mmap, shown),)
    return out[0], out[1], maps


def _call_optional(module, fname: str, shown: str, path: Path, hint: str):
    """What the model file's optional function `fname` returns (None when it has none);
    LoadError naming the file and line when it raises."""
    fn = getattr(module, fname, None)
    if not callable(fn):
        return None
    try:
        return fn()
    except Exception as e:  # the user's code can raise anything
        raise LoadError(
            f"{fname}() in {shown} raised {exception_line(e)}{_user_frame(e, path)}",
            hint=hint,
            detail=traceback.format_exc(),
        ) from None


def _defined_callables(module) -> list[str]:
    out = []
    for k, v in vars(module).items():
        if k.startswith("__") or not callable(v):
            continue
        if getattr(v, "__module__", None) == module.__name__:
            out.append(k)
    return out


def _check_result(result, what: str, shown: str) -> tuple[torch.nn.Module, tuple]:
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        got = _describe(result)
        raise LoadError(
            f"{what} in {shown} returned {got}; expected a pair (module, example_inputs).",
            hint=f"{CONTRACT}, e.g. `return MyNet().eval(), (torch.randn(1, 3, 224, 224),)`.",
        )
    module, inputs = result
    if not isinstance(module, torch.nn.Module):
        raise LoadError(
            f"{what} in {shown} returned {_describe(module)} as the module; expected a torch.nn.Module.",
            hint=CONTRACT + ".",
        )
    if isinstance(inputs, torch.Tensor):
        raise LoadError(
            f"{what} in {shown} returned a single tensor as example_inputs; expected a tuple of tensors.",
            hint="Wrap it in a tuple: `return model, (x,)`.",
        )
    if isinstance(inputs, list):
        inputs = tuple(inputs)
    if not isinstance(inputs, tuple):
        raise LoadError(
            f"{what} in {shown} returned {_describe(inputs)} as example_inputs; expected a tuple of tensors.",
            hint="Return `model, (x,)` with one tensor per forward() argument.",
        )
    for i, t in enumerate(inputs):
        if not isinstance(t, torch.Tensor):
            raise LoadError(
                f"example_inputs[{i}] from {what} in {shown} is {_describe(t)}; every example input must be "
                "a torch.Tensor.",
                hint="Pass tensors only (constants belong inside the module); one tensor per forward() argument.",
            )
    return module, inputs


def _check_forward(module, inputs, shown: str, path: Path | None) -> None:
    try:
        with torch.no_grad():
            module(*inputs)
    except Exception as e:
        shapes = ", ".join(f"{tuple(t.shape)} {str(t.dtype).replace('torch.', '')}" for t in inputs)
        raise LoadError(
            f"The model's forward raised {exception_line(e)} on the example inputs ({shapes})"
            f"{_user_frame(e, path) if path else ''}",
            hint="The example inputs must run through forward() in plain PyTorch; check their shapes and dtypes.",
            detail=traceback.format_exc(),
        ) from None


# ---------------------------------------------------------------------------------------------
# .pt2


def _load_pt2(path: Path, spec: str) -> LoadedModel:
    shown = shown_path(path)
    quiet = _quiet_logger("torch.export")
    try:
        with quiet, _without_arbitrary_code():
            ep = torch.export.load(str(path))
    except _UnsafePayload as e:
        raise LoadError(
            f"{shown} holds pickled Python objects, which irviz does not load: {e}",
            hint=f"Unpickling can run any code. If you trust the file, set {TRUST_PT2_ENV}=1 and open it "
            "again; better, re-save it with torch.export.save from a model with tensor weights only.",
        ) from None
    except Exception as e:
        logged = "\n".join(quiet.messages)
        cause = exception_line(e)
        if "check the warnings above" in cause and logged:  # the real error was only logged
            cause = logged.strip().splitlines()[-1].strip().split(". This is an internal")[0]
            if len(cause) > 300:
                cause = cause[:300] + "..."
        raise LoadError(
            f"{shown} is not a readable torch.export archive: {cause}",
            hint="Save the program with torch.export.save(torch.export.export(model, args), 'model.pt2') "
            "(with a compatible torch version); torch.save checkpoints are not .pt2 programs.",
            detail=(logged + "\n" if logged else "") + traceback.format_exc(),
        ) from None
    ex = getattr(ep, "example_inputs", None)
    if not ex:
        raise LoadError(
            f"{shown} has no example inputs stored.",
            hint="Export with torch.export.export(model, args) and save that program, so the inputs are kept.",
        )
    args, kwargs = ex
    if kwargs:
        raise LoadError(
            f"{shown} was exported with keyword inputs ({', '.join(kwargs)}); irviz passes inputs positionally.",
            hint="Export with positional example inputs only.",
        )
    try:
        module = ep.module()
    except Exception as e:
        raise LoadError(f"Cannot rebuild a module from {shown}: {exception_line(e)}",
                        hint="Re-export the model with this torch version.", detail=traceback.format_exc()) from None
    _pt2_eval(module)
    inputs = tuple(args)
    for i, t in enumerate(inputs):
        if not isinstance(t, torch.Tensor):
            raise LoadError(f"Example input {i} stored in {shown} is {_describe(t)}, not a tensor.",
                            hint="Export with tensor inputs only.")
    _check_forward(module, inputs, shown, None)
    return LoadedModel(module=module, example_inputs=inputs, spec=spec, name=path.stem, exported=ep)


TRUST_PT2_ENV = "IRVIZ_TRUST_PT2"


class _UnsafePayload(Exception):
    pass


@contextlib.contextmanager
def _without_arbitrary_code():
    """torch.export.load (torch 2.13) has no weights_only switch: it unpickles some payloads with
    torch.load(weights_only=False) or pickle.loads, and falls back to weights_only=False for the
    example inputs.  While it runs, every torch.load is weights_only=True (tensors, containers and
    plain values only) and a plain unpickle is refused, so opening a .pt2 cannot run code; the
    graph itself is JSON.  IRVIZ_TRUST_PT2=1 loads with torch's own settings."""
    if os.environ.get(TRUST_PT2_ENV) == "1":
        yield
        return
    import pickle

    from torch.export.pt2_archive import _package

    real_load = torch.load

    def weights_only_load(f, *args, **kwargs):
        kwargs["weights_only"] = True
        try:
            return real_load(f, *args, **kwargs)
        except pickle.UnpicklingError as e:
            raise _UnsafePayload(str(e).splitlines()[0]) from None

    class _NoPlainUnpickle:
        def __getattr__(self, name):
            return getattr(pickle, name)

        @staticmethod
        def loads(*_args, **_kwargs):
            raise _UnsafePayload("an opaque object stored with pickle")

    saved_pickle = _package.pickle
    torch.load, _package.pickle = weights_only_load, _NoPlainUnpickle()
    try:
        yield
    finally:
        torch.load, _package.pickle = real_load, saved_pickle


def _pt2_eval(module) -> None:
    """ep.module() refuses .eval(); the exported graph already fixed train/eval behaviour."""
    try:
        module.eval()
    except NotImplementedError:
        for m in module.modules():  # flag only: the exported graph is already specialised
            m.training = False


# ---------------------------------------------------------------------------------------------
# helpers


def _describe(x) -> str:
    if isinstance(x, torch.Tensor):
        return f"a tensor of shape {tuple(x.shape)}"
    if isinstance(x, (tuple, list)):
        inner = ", ".join(type(v).__name__ for v in list(x)[:4]) + (", ..." if len(x) > 4 else "")
        return f"a {type(x).__name__} of {len(x)} item(s) ({inner})"
    if x is None:
        return "None"
    name = type(x).__name__ if type(x).__module__ == "builtins" else f"{type(x).__module__}.{type(x).__qualname__}"
    return ("an " if name[0] in "aeiouAEIOU" else "a ") + name


class _quiet_logger:
    """torch.export.load logs a full traceback before raising; the LoadError carries it instead."""

    def __init__(self, name: str):
        import logging

        self.logger = logging.getLogger(name)
        self.messages: list[str] = []
        outer = self

        class _Keep(logging.Handler):
            def emit(self, record):
                outer.messages.append(logging.Formatter().format(record))

        self.handler = _Keep()

    def __enter__(self):
        self.saved = (list(self.logger.handlers), self.logger.propagate)
        for h in self.saved[0]:  # torch attaches a stderr handler to torch.export itself
            self.logger.removeHandler(h)
        self.logger.propagate = False
        self.logger.addHandler(self.handler)

    def __exit__(self, *exc):
        self.logger.removeHandler(self.handler)
        handlers, self.logger.propagate = self.saved
        for h in handlers:
            self.logger.addHandler(h)
        return False


def _missing_hint(path: Path) -> str:
    if not path.suffix and len(path.parts) == 1:
        try:
            if str(path) in {n for n, _ in list_samples()}:
                return f"Did you mean sample:{path}?"
        except Exception:
            pass
    if path.suffix == "" and path.with_suffix(".py").exists():
        return f"Did you mean {path.with_suffix('.py')}?"
    if not path.suffix and ":" not in str(path):
        return "Give a .py model file, a .pt2, or sample:NAME. " + _known_samples_hint()
    return "Check the path (relative paths are from the current directory: " f"{Path.cwd()})."


def _known_samples_hint() -> str:
    try:
        return "Known samples: " + ", ".join(n for n, _ in list_samples()) + "."
    except Exception:
        return ""


def _usage_hint() -> str:
    return "Give a model file (FILE.py or FILE.py:FACTORY), a .pt2 from torch.export.save, or sample:NAME."
