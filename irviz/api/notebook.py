"""irviz from a notebook or any Python session: ``irviz.show(obj)`` opens the app on an object the
learner holds, ``irviz.report(obj)`` returns the pass trace as HTML that displays inline.

    import irviz
    irviz.show(MyModule)                         # an IRModule, PrimFunc, Relax function, schedule
    irviz.show(model, (torch.randn(1, 128),))    # an nn.Module with example inputs, or (model, inputs)
    irviz.show(exported_program)                 # a torch.export.ExportedProgram
    irviz.show(MyModule, snapshot="shot.png")    # no window: the app rendered offscreen to a PNG
    irviz.report(MyModule, pipeline="zero")      # the HTML report, shown inline by Jupyter

The object is written to a file the app can open and reopen (see
``irviz.core.export.notebook_files``), and the app runs as its own process: the window never
shares a process with torch or TVM, and the notebook's kernel stays free. ``report`` runs the
pipeline in this process, as ``irviz export`` does.

Importing this module loads neither torch nor TVM: ``import irviz`` stays light.
"""
from __future__ import annotations

import contextlib
import html as _html
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path

ACCEPTS = ("a tvm.IRModule, a TensorIR PrimFunc, a Relax function, a tvm.s_tir.Schedule, a torch.nn.Module "
           "with example inputs (irviz.show(model, inputs) or irviz.show((model, inputs))), a "
           "torch.export.ExportedProgram, or a model file / sample name (a str or Path)")


# ---------------------------------------------------------------------------------------------
# what the object is, and the file that stands for it


def _loaded(top: str) -> bool:
    """Whether `top` (torch, tvm) is imported already: an object of its types cannot exist otherwise,
    and asking about one must not load it."""
    return top in sys.modules


def _caller_name(obj, depth: int = 2) -> str | None:
    """The name the caller's code binds `obj` to (`irviz.show(MyModule)` -> "MyModule"), for the
    window title and the file name; None when it has none (an expression)."""
    frame = sys._getframe(depth)
    if _is_torch_model(obj) or isinstance(obj, (str, os.PathLike)):
        return None  # a model's class names it better than `model` does
    for scope in (frame.f_locals, frame.f_globals):
        for key, value in scope.items():
            if value is obj and not key.startswith("_"):
                return key
    return None


def _split(obj, inputs):
    """(obj, inputs) with a (model, inputs) pair unpacked."""
    if inputs is None and isinstance(obj, tuple) and len(obj) == 2 and _is_torch_model(obj[0]):
        return obj[0], obj[1]
    return obj, inputs


def _is_torch_model(obj) -> bool:
    if not _loaded("torch"):
        return False
    import torch

    return isinstance(obj, torch.nn.Module)


def _is_exported_program(obj) -> bool:
    if not _loaded("torch"):
        return False
    import torch

    return isinstance(obj, torch.export.ExportedProgram)


def _irmodule(obj):
    if not _loaded("tvm"):
        return None
    from irviz.core.export.notebook_files import as_irmodule

    return as_irmodule(obj)


@contextlib.contextmanager
def _new_folder(folder):
    """`folder`, or a new temporary folder that is removed again if nothing could be written."""
    if folder is not None:
        yield folder
        return
    made = tempfile.mkdtemp(prefix="irviz-")
    try:
        yield made
    except BaseException:
        shutil.rmtree(made, ignore_errors=True)
        raise


def _not_accepted(obj, caller: str) -> TypeError:
    return TypeError(f"{caller} cannot open a {type(obj).__module__}.{type(obj).__qualname__}; "
                     f"it opens {ACCEPTS}")


def write_model_file(obj, inputs=None, *, expected=None, name: str | None = None, folder=None,
                     caller: str = "irviz.show()") -> Path | str:
    """The file irviz opens for `obj` (see ``show``), written to `folder` (default: a new temporary
    folder, kept so that the app can reopen it) as NAME (default: "irmodule", the model's class
    name, "exported_program"). A str or Path is a model spec already: returned as a str. TypeError
    for an object irviz cannot open."""
    obj, inputs = _split(obj, inputs)
    if isinstance(obj, (str, os.PathLike)):
        if inputs is not None or expected is not None:
            raise TypeError(f"{caller}: inputs and expected= go with an object; a model file gives its "
                            "own (get_model(), get_inputs(), reference())")
        spec = str(obj)
        head = spec.rpartition(":")[0]
        if not (spec.startswith("sample:") or Path(spec).exists() or (head and Path(head).is_file())):
            raise FileNotFoundError(f"{caller}: no such model file: {spec}")
        return spec
    from irviz.core.export import notebook_files as files  # loads neither torch nor TVM

    mod = _irmodule(obj)
    if mod is not None:
        if expected is not None and inputs is None:
            raise TypeError(f"{caller}: expected= gives the outputs for the inputs given with it: "
                            f"{caller.removesuffix('()')}(mod, inputs, expected=outputs)")
        with _new_folder(folder) as where:
            return files.write_ir_file(mod, where, name or "irmodule", inputs=inputs, expected=expected,
                                       caller=caller)
    if _is_torch_model(obj) or _is_exported_program(obj):
        if expected is not None:
            raise TypeError(f"{caller}: expected= is for an IRModule; a PyTorch model is its own reference")
        if inputs is not None and _is_exported_program(obj):
            raise TypeError(f"{caller}: an ExportedProgram runs on the example inputs it was exported "
                            "with; export it again with other inputs to use those")
        if inputs is None and _is_torch_model(obj):
            call = caller.removesuffix("()")
            raise TypeError(f"{caller}: a torch.nn.Module needs example inputs: "
                            f"{call}(model, (torch.randn(1, 128),)) or {call}((model, inputs))")
        default = type(obj).__name__ if _is_torch_model(obj) else "exported_program"
        with _new_folder(folder) as where:
            return files.write_pt2(obj, inputs, where, name or default)
    raise _not_accepted(obj, caller)


# ---------------------------------------------------------------------------------------------
# show: the app as its own process


@dataclass
class App:
    """The app ``show`` started: `process` (a Popen; None after a snapshot, which has ended),
    the `file` it opened, its `log` (the app's stdout and stderr), and the `snapshot` PNG if one
    was asked for. In a notebook a snapshot displays inline."""

    file: Path | str
    process: subprocess.Popen | None = None
    log: Path | None = None
    snapshot: Path | None = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait(self, timeout: float | None = None) -> int | None:
        return None if self.process is None else self.process.wait(timeout)

    def close(self, timeout: float = 10.0) -> None:
        """End the app and its engine (the process group `show` started), if still running."""
        p = self.process
        if p is None or p.poll() is not None:
            return
        try:
            os.killpg(p.pid, signal.SIGTERM)   # the app leads its own group: its engine goes too
        except (ProcessLookupError, PermissionError, AttributeError):
            p.terminate()
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout)

    def _repr_png_(self):
        if self.snapshot is not None and self.snapshot.exists():
            return self.snapshot.read_bytes()
        return None

    def __repr__(self) -> str:
        if self.snapshot is not None:
            return f"<irviz snapshot of {self.file}: {self.snapshot}>"
        state = "running" if self.running else f"exited {self.process.returncode}" if self.process else "not started"
        return f"<irviz app on {self.file}: {state}; log {self.log}>"


def _irviz_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "irviz", *args]


def _pipeline_text(pipeline) -> str | None:
    if pipeline is None:
        return None
    if isinstance(pipeline, (list, tuple)):
        return ",".join(str(p) for p in pipeline)
    return str(pipeline)


def show(obj, inputs=None, *, pipeline=None, steps: int = 0, snapshot=None, expected=None,
         name: str | None = None, size: str = "1600x1000", timeout: float = 600.0) -> App:
    """Open the irviz app on `obj` without writing a file yourself.

    `obj`: an IRModule, a TensorIR PrimFunc, a Relax function or a tvm.s_tir.Schedule (written as
    an IR file; `inputs` become its get_inputs() and `expected` the outputs its reference() gives);
    a torch.nn.Module with example `inputs` (a tensor or a tuple of them; or pass `(model, inputs)`)
    or a torch.export.ExportedProgram (written as a .pt2); or a model file / "sample:NAME".
    `pipeline`: a named pipeline or a pipeline text (default "zero"), planned, not applied.

    The app is a process of its own; this returns at once with an ``App`` (its Popen, the file,
    a log). With `snapshot="shot.png"` no window opens: the app is rendered offscreen after
    `steps` steps, this waits for the PNG (at most `timeout` seconds), and the ``App`` displays it
    inline in a notebook. TypeError for an object irviz cannot open; RuntimeError when there is
    no display to open a window on (a snapshot still works) or the snapshot fails."""
    obj, inputs = _split(obj, inputs)
    if name is None:
        name = _caller_name(obj)
    text = _pipeline_text(pipeline)
    if text is not None and _loaded("tvm"):
        from irviz.core.passes import parse_pipeline

        parse_pipeline(text)  # a misspelt pass fails here, with its name, not later in the window
    path = write_model_file(obj, inputs, expected=expected, name=name)
    folder = Path(path).parent if isinstance(path, Path) else Path(tempfile.mkdtemp(prefix="irviz-"))
    log = folder / "irviz-app.log"
    if snapshot is not None:
        return _snapshot(path, Path(snapshot), text, steps, size, timeout, log)
    from irviz.ui.display_check import display_problem  # standard library only: no Qt is loaded

    problem = display_problem()
    if problem:
        raise RuntimeError(f"{problem}\nFrom Python: irviz.show(obj, snapshot='shot.png') renders the "
                           "window offscreen instead")
    args = _irviz_command("gui", str(path)) + (["--pipeline", text] if text else [])
    with open(log, "wb") as out:
        process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    return App(file=path, process=process, log=log)


def _snapshot(path, out: Path, pipeline: str | None, steps: int, size: str, timeout: float, log: Path) -> App:
    out = out.expanduser().resolve()
    args = _irviz_command("snapshot", str(path), "--out", str(out), "--steps", str(int(steps)),
                          "--size", size, "--timeout", str(timeout))
    if pipeline:
        args += ["--pipeline", pipeline]
    env = {**os.environ}
    env.setdefault("QT_QPA_PLATFORM", "offscreen")
    try:
        done = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout + 60, env=env)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"irviz snapshot of {path} did not finish in {timeout:.0f} s") from None
    log.write_text(done.stdout + done.stderr, encoding="utf-8")
    if done.returncode != 0 or not out.exists():
        said = "\n".join(done.stderr.strip().splitlines()[-8:]) or f"exit status {done.returncode}"
        raise RuntimeError(f"irviz snapshot of {path} failed:\n{said}")
    return App(file=path, log=log, snapshot=out)


# ---------------------------------------------------------------------------------------------
# report: the pass trace as HTML


@dataclass
class Report:
    """The HTML report of a pass trace (``irviz export``'s report.html): `html` is the page, `str()`
    too; a notebook shows it inline (in a frame, so its styles stay its own). `steps`: (pass,
    changed) per step after the import; `error`: why the pipeline or the build stopped, if it did;
    `allclose`, `max_abs_error`: how the built last step compared with its reference."""

    html: str
    file: Path | str
    steps: list[tuple[str, bool]] = field(default_factory=list)
    error: str | None = None
    target: str = "host"                 # the target the passes ran under and the build was for
    allclose: bool | None = None         # the last step's outputs against the reference (None: not run or not judged)
    max_abs_error: float | None = None
    height: int = 600

    def __str__(self) -> str:
        return self.html

    def save(self, path) -> Path:
        path = Path(path)
        path.write_text(self.html, encoding="utf-8")
        return path

    def _repr_html_(self) -> str:
        note = (f'<p style="color:#cf222e">irviz: {_html.escape(self.error)}</p>' if self.error else "")
        return (f'{note}<iframe srcdoc="{_html.escape(self.html, quote=True)}" '
                f'style="width:100%;height:{int(self.height)}px;border:1px solid #d1d9e0"></iframe>')

    def __repr__(self) -> str:
        passes = ", ".join(p for p, _ in self.steps) or "no passes"
        return f"<irviz report on {self.file}: {passes}{'; ' + self.error if self.error else ''}>"


def _compared(run) -> float | None:
    """The run's max abs error; None where nothing was compared (its NaN)."""
    err = getattr(run, "max_abs_error", None)
    return None if err is None or math.isnan(err) else float(err)


def report(obj, inputs=None, *, pipeline="zero", build: bool = True, expected=None, func: str = "main",
           dims: dict | None = None, name: str | None = None) -> Report:
    """The pass trace of `obj` (what ``show`` accepts) through `pipeline` (a name or a pipeline
    text, default "zero") as an HTML report: the passes, what each changed, their diffs, and with
    `build` the last step built, run and compared (with PyTorch, or with `expected`), for the
    target the pipeline text names (`target=x86-avx2; ...`), as the CLI and the app take it. Runs
    in this process. A pass or build that fails ends the trace there; the report shows the steps before it
    and says why (`Report.error`)."""
    from irviz.core.errors import IrvizError
    from irviz.core.export.report import html_report
    from irviz.core.workspace import Workspace

    obj, inputs = _split(obj, inputs)
    if name is None:
        name = _caller_name(obj)
    path = write_model_file(obj, inputs, expected=expected, name=name, caller="irviz.report()")
    ws = Workspace()
    ws.dims = dict(dims or {})
    with warnings.catch_warnings():  # torch.export's deprecation chatter, as the CLI hides it
        warnings.simplefilter("ignore", FutureWarning)
        ws.open(str(path), planned=_pipeline_text(pipeline) or "")
    error = None
    try:
        ws.run_to_end()
    except Exception as exc:
        error = exc.user_message() if isinstance(exc, IrvizError) else f"{type(exc).__name__}: {exc}"
    if build and error is None:
        try:
            ws.build_run(func=func)
        except Exception as exc:
            what = exc.user_message() if isinstance(exc, IrvizError) else f"{type(exc).__name__}: {exc}"
            error = f"{ws.stage or 'build'} failed: {what}"
    session, runs = ws.session, ws.current_runs()
    last = runs[max(runs)] if runs else None
    return Report(html=html_report(session, runs or None, name=ws.model_name), file=path, error=error,
                  target=ws.builds_for.name or "host",
                  steps=[(s.pass_name, bool(s.changed)) for s in session.steps[1:]],
                  allclose=getattr(last, "allclose", None), max_abs_error=_compared(last))
