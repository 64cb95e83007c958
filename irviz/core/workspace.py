"""What is open, and the one place that chains the stages.

    ws = Workspace(progress=print_progress, log=print)
    ws.open("sample:mlp", planned=get_pipeline("zero"))    # load -> capture -> import -> Session
    ws.run_to_end()                                         # every planned pass, one step each
    built, result = ws.build_run()                          # build the cursor step, run, compare

The engine (`python -m irviz.engine`) and the CLI (`irviz check`, `irviz export`) both drive one of
these; neither chains the stages itself. A failed open keeps what was open before, except that a
model whose import fails stays captured (its FX graph is viewable, `reimport` retries it with the
converter files). Results that belong to one opened model (builds, latency measurements) are
dropped in one place, `_forget_results`, whenever the model or its import changes.
"""
from __future__ import annotations

import os
import time
from contextlib import contextmanager

from irviz.core.errors import IrvizError, RequestError

DEFAULT_IMPORTER = "exported_program"


def _quiet(*_args, **_kwargs) -> None:
    return None


class Workspace:
    def __init__(self, progress=None, log=None):
        # progress(text, fraction=None, pass_name=None): what is happening now, for a progress bar
        self.progress = progress or _quiet
        # log(line): one line per finished stage or applied pass, for a terminal
        self.log = log or _quiet
        self.spec: str | None = None
        self.importer: str | None = None
        self.loaded = None
        self.ir_file = None               # an IR file's IRFile (get_inputs, reference), when one is open
        self.dims: dict[str, int] = {}    # values for symbolic sizes when inputs are made up
        self.captured = None
        self.imported = None
        self.session = None
        self.converter_files: list[str] = []
        self.import_error = None          # the IRImportError while the model is captured, not imported
        self.import_planned: list = []    # the pipeline to plan once the import works
        self.stage: str | None = None     # the stage running now: names a failure that is no IrvizError
        self.runs: dict[int, tuple] = {}  # step index -> (Step, RunResult), for the exported report
        self._latency_cache: dict = {}    # module hash -> measurement
        self._latency_last = None         # ({step index: Step}, trace) of the last latency trace
        self._last_build = None           # (Step, BuildResult): the executable of the last build

    # -- what is open ---------------------------------------------------------------------------

    @property
    def model_name(self) -> str | None:
        if self.loaded is not None:
            return self.loaded.name
        if self.ir_file is not None:
            return self.ir_file.name
        if self.spec:
            from pathlib import Path

            return Path(self.spec).stem
        return None

    def need_session(self):
        if self.session is None:
            raise RequestError("No model is open")
        return self.session

    def step_at(self, index=None):
        """The recorded step `index` (None: the cursor; negative counts from the end)."""
        s = self.need_session()
        index = s.cursor if index is None else int(index)
        if index < 0:
            index += len(s.steps)
        if not 0 <= index < len(s.steps):
            raise RequestError(f"No step {index}: the session has steps 0..{len(s.steps) - 1}")
        return s.steps[index]

    def planned(self) -> list:
        """The passes still to apply (while the import has failed: the ones it will plan)."""
        if self.session is None:
            return list(self.import_planned)
        return list(self.session.pipeline)

    def applied(self) -> list:
        """The passes recorded after the import, as PassInvocations."""
        from irviz.core.passes import PassInvocation

        if self.session is None:
            return []
        return [PassInvocation(st.pass_name, dict(st.params or {})) for st in self.session.steps[1:]]

    # -- opening --------------------------------------------------------------------------------

    def open(self, spec: str, importer: str = DEFAULT_IMPORTER, planned=(), fraction_span=(0.0, 1.0)):
        """Load, capture and import `spec`; a new Session with `planned` as its pipeline."""
        from irviz.core.export import step_files
        from irviz.core.frontend import capture as capture_mod
        from irviz.core.frontend import ir_file
        from irviz.core.frontend import model_file

        a, b = fraction_span
        at = lambda x: a + (b - a) * x  # noqa: E731
        self.stage = "load"
        self.progress(f"Loading {spec}", at(0.0))
        if step_files.is_exported_step(spec):
            return self._open_step_file(spec, planned, at)
        ir = ir_file.ir_file_spec(spec)
        if ir is not None:
            return self._open_ir_file(spec, *ir, planned=planned, at=at)
        t = time.perf_counter()
        loaded = model_file.load_model(spec)
        self.log(f"load     {time.perf_counter() - t:7.2f} s  {loaded.name}")
        self.stage = "capture"
        self.progress(f"Capturing {loaded.name} with torch.export", at(0.25))
        captured = capture_mod.capture(loaded)
        self.log(f"capture  {captured.seconds:7.2f} s  {len(captured.graph.nodes)} FX nodes")
        self._import(spec, importer, loaded, captured, planned, at(0.6), at(0.9))

    def open_loaded(self, loaded, importer: str = DEFAULT_IMPORTER, planned=()):
        """Capture and import a model built in memory (a LoadedModel a script made, e.g. from a
        corpus of test modules that no file defines) as open() does for a model file."""
        from irviz.core.frontend import capture as capture_mod

        self.stage = "capture"
        self.progress(f"Capturing {loaded.name} with torch.export", 0.25)
        captured = capture_mod.capture(loaded)
        self.log(f"capture  {captured.seconds:7.2f} s  {len(captured.graph.nodes)} FX nodes")
        self._import(loaded.spec, importer, loaded, captured, planned, 0.6, 0.9)

    def reimport(self):
        """Import the kept capture again with the converter files as they are now: a new session at
        step 0 planning the same passes (applied and planned). No re-capture."""
        if self.captured is None:
            if self.session is not None:
                raise RequestError("This session has no captured PyTorch model to import again")
            raise RequestError("No model is open")
        planned = self.applied() + self.planned()
        self.progress("Loading converters", 0.05)
        self._import(self.spec, self.importer or DEFAULT_IMPORTER, self.loaded, self.captured,
                     planned, 0.2, 0.9)

    def _import(self, spec, importer, loaded, captured, planned, f_import, f_session):
        from irviz.core.frontend import importer as importer_mod
        from irviz.core.session import Session

        self.stage = "import"
        convert_map = self.convert_map(importer)
        self.progress(f"Importing {len(captured.graph.nodes)} FX nodes into Relax ({importer})", f_import)
        try:
            imported = importer_mod.import_model(captured, importer=importer,
                                                 custom_convert_map=convert_map)
        except IrvizError as exc:
            if exc.stage == "import":
                # the capture worked: keep it, so the FX graph stays viewable and reimport retries
                self._replace(spec, importer, loaded, captured, None, None)
                self.import_error = exc
                self.import_planned = list(planned or ())
            raise
        self.log(f"import   {imported.seconds:7.2f} s  ({imported.importer})")
        self.progress("Preparing the session", f_session)
        session = Session(imported, captured)
        session.set_pipeline(list(planned or ()))
        self._replace(spec, importer, loaded, captured, imported, session)

    def _open_step_file(self, spec, planned, at):
        """An exported TVMScript step: a session on its IRModule, with no FX graph or torch model."""
        from irviz.core.export import step_files
        from irviz.core.frontend.imported import Imported
        from irviz.core.session import Session

        self.progress("Parsing the TVMScript step", at(0.3))
        t = time.perf_counter()
        mod = step_files.load_exported(spec)
        imported = Imported(mod=mod, provenance={}, importer="tvmscript", seconds=time.perf_counter() - t)
        session = Session(imported, None)
        session.set_pipeline(list(planned or ()))
        self._replace(spec, "tvmscript", None, None, imported, session)

    def _open_ir_file(self, spec, path, name, planned, at):
        """A Python file defining an IRModule: a session on it, run on get_inputs() (or made-up
        inputs) and compared with its reference(), if it has one."""
        from irviz.core.frontend.imported import Imported
        from irviz.core.frontend.ir_file import load_ir_file
        from irviz.core.session import Session

        self.progress("Running the IR file", at(0.3))
        t = time.perf_counter()
        ir = load_ir_file(path, name, spec)
        imported = Imported(mod=ir.mod, provenance={}, importer="tvmscript", seconds=time.perf_counter() - t)
        self.log(f"load     {imported.seconds:7.2f} s  {ir.name} (an IRModule)")
        session = Session(imported, None)
        session.set_pipeline(list(planned or ()))
        self._replace(spec, "tvmscript", None, None, imported, session, ir)

    def _replace(self, spec, importer, loaded, captured, imported, session, ir=None) -> None:
        # only called once a stage worked: a failed open leaves the previous model usable
        self.ir_file = ir
        self.spec, self.importer = spec, importer
        self.loaded, self.captured, self.imported, self.session = loaded, captured, imported, session
        self.import_error = None
        self.import_planned = []
        self._forget_results()

    def _forget_results(self) -> None:
        self.runs.clear()
        self._last_build = None
        self._latency_cache = {}
        self._latency_last = None

    # -- converter files ------------------------------------------------------------------------

    def add_converter_file(self, path) -> dict:
        """Execute a converter file now (a broken one raises with file:line) and keep it: every later
        import executes it afresh. Later files win for the same op. Returns its table."""
        from irviz.core.frontend.converters import load_converter_file

        table = load_converter_file(path)
        path = os.path.abspath(os.path.expanduser(str(path)))
        if path in self.converter_files:
            self.converter_files.remove(path)
        self.converter_files.append(path)
        return table

    def convert_map(self, importer: str = DEFAULT_IMPORTER):
        if not self.converter_files:
            return None
        from irviz.core.frontend.converters import load_converter_file

        out = {}
        for path in self.converter_files:
            out.update(load_converter_file(path))
        if importer != DEFAULT_IMPORTER:
            return None  # only TVM's exported-program importer takes a custom_convert_map
        return out or None

    # -- stepping -------------------------------------------------------------------------------

    def set_pipeline(self, invocations) -> None:
        self.need_session().set_pipeline(invocations)

    def step(self):
        """One step forward: the next recorded step, or the next planned pass applied."""
        s = self.need_session()
        before = s.error
        with self._reporting_passes(None, (0.0, 0.0)):
            if s.step_forward() is None:
                self._raise_pass_error(before)

    def back(self) -> None:
        self.need_session().step_back()

    def jump(self, index: int) -> None:
        """Go to a recorded step; an index past them applies planned passes up to it."""
        s = self.need_session()
        index = int(index)
        if index < 0:
            index += len(s.steps)
        if not 0 <= index <= len(s.steps) - 1 + len(s.pipeline):
            raise RequestError(f"No step {index}: steps 0..{len(s.steps) - 1} are recorded, "
                               f"{len(s.pipeline)} more planned")
        with self._reporting_passes(max(0, index - (len(s.steps) - 1))):
            if s.jump(index) is None:
                self._raise_pass_error()

    def run_to_end(self, fraction_span=(0.0, 1.0)) -> None:
        s = self.need_session()
        with self._reporting_passes(len(s.pipeline), fraction_span):
            if s.run_to_end() is None:
                self._raise_pass_error()

    def _raise_pass_error(self, before=None):
        err = self.session.error
        if err is not None and err is not before:
            raise err

    @contextmanager
    def _reporting_passes(self, total: int | None, fraction_span=(0.0, 1.0)):
        """Progress before each pass and a log line after it, from the session's own hooks."""
        a, b = fraction_span
        done = [0]

        def on_event(event, payload):
            if event == "applying":
                name = payload["pass"]
                if total is None:
                    self.progress(f"Applying {name}", a, pass_name=name)
                else:
                    n = max(1, total)
                    self.progress(f"Applying {name} ({done[0] + 1}/{n})", a + (b - a) * done[0] / n,
                                  pass_name=name)
            elif event == "stepped" and payload["applied"]:
                done[0] += 1
                st = payload["step"]
                self.log(f"  {st.index:2d} {st.pass_name:28} {st.seconds:7.3f} s  "
                         f"{'changed' if st.changed else 'no change'}")

        self.stage = "pipeline"
        unsubscribe = self.session.subscribe(on_event)
        try:
            yield
        finally:
            unsubscribe()

    def replay(self, spec, importer=DEFAULT_IMPORTER, applied=(), planned=(), cursor=None,
               pass_files=(), converter_files=()) -> None:
        """Rebuild a session from its recipe: load the pass and converter files, open, apply
        `applied`, plan `planned`, go to `cursor`. How the GUI recovers from a crashed engine."""
        from irviz.core.passes import load_pass_file

        for path in pass_files or ():
            self.progress(f"Loading passes from {path}", 0.0)
            load_pass_file(path)
        for path in converter_files or ():
            self.progress(f"Loading converters from {path}", 0.0)
            self.add_converter_file(path)
        applied, planned = list(applied or ()), list(planned or ())
        self.open(spec, importer, planned=applied + planned,
                  fraction_span=(0.0, 0.4 if applied else 0.95))
        s = self.session
        if applied:
            s.set_pipeline(applied)
            self.run_to_end(fraction_span=(0.4, 0.95))
        s.set_pipeline(planned)
        if cursor is not None:
            cursor = max(0, min(int(cursor), len(s.steps) - 1))
            if cursor != s.cursor:
                s.jump(cursor)

    # -- building and running -------------------------------------------------------------------

    def build_run(self, step=None, repeats: int = 10, inputs=None):
        """Build a step, run it and compare it with PyTorch (with no PyTorch model, run it on random
        inputs). Returns (BuildResult, RunResult); the result is kept for the exported report."""
        from irviz.core.backend import build as build_mod
        from irviz.core.backend import run as run_mod

        st = self.step_at(step)
        self.stage = "build"
        if self._last_build is not None and self._last_build[0] is st:
            built = self._last_build[1]   # other inputs for the same step: no second build
        else:
            self.progress(f"Building step {st.index} ({st.pass_name})", 0.05)
            built = build_mod.build(st.mod)
            self.log(f"build    {built.seconds:7.2f} s  ({built.target})")
            self._last_build = (st, built)
        self.stage = "run"
        if self.loaded is None:
            result = self._run_ir(built, st.mod, int(repeats))
        else:
            self.progress(f"Running and comparing with PyTorch (built in {built.seconds:.1f} s)", 0.6)
            program = self.captured.exported if self.captured is not None else None
            result = run_mod.run_built(built, self.loaded, repeats=int(repeats), inputs=inputs,
                                       program=program)
        if inputs is None:
            self.runs[st.index] = (st, result)
        return built, result

    def _run_ir(self, built, mod, repeats: int):
        """An IR file or step file: its get_inputs() or made-up inputs; its reference(), if any."""
        from irviz.core.backend import run as run_mod
        from irviz.core.errors import RunError
        from irviz.core.frontend.ir_file import inputs_for

        inputs = inputs_for(self.ir_file, mod, dims=self.dims)
        reference = None
        if self.ir_file is not None and self.ir_file.reference is not None:
            self.progress("Running reference()", 0.5)
            try:
                reference = self.ir_file.reference(*inputs)
            except Exception as exc:  # noqa: BLE001
                from irviz.core.errors import traceback_text
                from irviz.core.user_code import exception_line

                raise RunError(f"reference() raised {exception_line(exc)}",
                               "run the file in plain Python to see the full error",
                               detail=traceback_text(exc)) from exc
        what = "and comparing with reference()" if reference is not None else "(nothing to compare with)"
        self.progress(f"Running {what}", 0.6)
        return run_mod.run_module(built, inputs, reference=reference, repeats=repeats)

    @property
    def reference_name(self) -> str | None:
        """What a run is compared with: "PyTorch", an IR file's "reference()", or None."""
        if self.loaded is not None:
            return "PyTorch"
        if self.ir_file is not None and self.ir_file.reference is not None:
            return "reference()"
        return None

    @property
    def has_reference(self) -> bool:
        return self.reference_name is not None

    def latency_trace(self, steps=None, repeats: int = 10) -> list[dict]:
        """Build and time every recorded step (or `steps`). A module measured before (same
        structural hash) since this model was opened is not built again."""
        from irviz.core.backend.latency import latency_trace

        s = self.need_session()
        if steps is not None:
            for i in steps:
                self.step_at(i)
        self.stage = "build"
        trace = latency_trace(s, self.loaded, steps=steps, repeats=int(repeats),
                              progress=self.progress, cache=self._latency_cache)
        self._latency_last = ({e["step"]: s.steps[e["step"]] for e in trace}, trace)
        return trace

    def current_latency(self):
        """The last latency trace, while its steps are still the session's steps."""
        s = self.session
        if self._latency_last is None or s is None:
            return None
        steps, trace = self._latency_last
        if any(i >= len(s.steps) or s.steps[i] is not st for i, st in steps.items()):
            return None
        return trace

    def current_runs(self) -> dict:
        """{step index: RunResult} of the builds whose steps are still the session's steps."""
        s = self.session
        if s is None:
            return {}
        return {i: r for i, (st, r) in self.runs.items() if i < len(s.steps) and s.steps[i] is st}

    # -- export ---------------------------------------------------------------------------------

    def export(self, out_dir, steps=None):
        """Write the trace (TVMScript per step, diffs, steps.json, report.html) with the builds and
        the latency trace measured so far. Returns the path written."""
        from irviz.core.export.trace import export_trace

        s = self.need_session()
        self.stage = "export"
        self.progress(f"Exporting to {out_dir}", 0.1)
        return export_trace(s, out_dir, steps=steps, run_results=self.current_runs() or None,
                            latency=self.current_latency())

    # -- warming --------------------------------------------------------------------------------

    @staticmethod
    def warm(spec: str = "sample:mul_add") -> None:
        """Pay the one-time costs (torch.export's first run, TVM's importer) and keep nothing."""
        from irviz.core.frontend import capture as capture_mod
        from irviz.core.frontend import importer as importer_mod
        from irviz.core.frontend import model_file

        importer_mod.import_model(capture_mod.capture(model_file.load_model(spec)))
