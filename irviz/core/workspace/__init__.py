"""What is open, and the one place that chains the stages.

    ws = Workspace(progress=print_progress, log=print)
    ws.open("sample:mlp", planned=get_pipeline("zero"))    # load -> capture -> import -> Session
    ws.run_to_end()                                         # every planned pass, one step each
    built, result = ws.build_run()                          # build the cursor step, run, compare

The engine (`python -m irviz.engine`) and the CLI (`irviz check`, `irviz export`) both drive one of
these; neither chains the stages itself. A failed open keeps what was open before, except that a
model whose import fails stays captured (its FX graph is viewable, `reimport` retries it with the
converter files). Results that belong to one opened model (builds, latency measurements) are
dropped in one place, `_forget_results`, whenever the model or its import changes. Building,
running, measuring and exporting are in `results.py`; opening IR files and step files in
`ir_files.py`; a model nothing captures whole, one graph of its graph breaks at a time, in
`graph_breaks.py`.

Stages are imported inside the methods that use them: opening an IR file or a step file never
loads torch, and importing this module loads neither torch nor TVM (the engine and the CLI import
it before they know what will be opened).
"""
from __future__ import annotations

import os
import time
from contextlib import contextmanager

from irviz.core.backend.timing import tune_seconds
from irviz.core.errors import CaptureError, IRImportError, IrvizError, RequestError, RunError
from irviz.core.export import step_files
from irviz.core.frontend.converters import load_converter_file
from irviz.core.tuning.decision_cache import set_cache_enabled
from irviz.core.workspace.graph_breaks import GraphBreakOpening
from irviz.core.workspace.ir_files import IRFileOpening
from irviz.core.workspace.results import Results

DEFAULT_IMPORTER = "exported_program"


def _quiet(*_args, **_kwargs) -> None:
    return None


_KEEP = object()  # an open's target not yet decided: the session keeps the one it had


def choose_frontend(loaded, capture=None, importer=None, maps=()) -> tuple[str, str, str]:
    """(capture, importer, why): what was asked, else the model file's IRVIZ_CAPTURE /
    IRVIZ_IMPORTER, else: symbolic_trace when course maps are given, and the course importer for
    a symbolic_trace graph (TVM's exported_program importer reads torch.export graphs only).
    `why` says what was chosen and why when it was not asked for ("" otherwise)."""
    why = []
    has_maps = bool(maps) or bool(getattr(loaded, "course_maps", ()))
    if capture is None:
        if getattr(loaded, "capture", None):
            capture = loaded.capture
            why.append(f"capture {capture} (the model file's IRVIZ_CAPTURE)")
        elif has_maps:
            capture = "symbolic_trace"
            why.append("capture symbolic_trace (course maps call_module_map / call_function_map "
                       "work on symbolic_trace graphs)")
        else:
            capture = "export"
    if importer is None:
        if getattr(loaded, "importer", None):
            importer = loaded.importer
            why.append(f"importer {importer} (the model file's IRVIZ_IMPORTER)")
        elif capture == "symbolic_trace":
            importer = "course"
            why.append("importer course (a symbolic_trace graph is imported with the course's from_fx)")
        else:
            importer = DEFAULT_IMPORTER
    if capture == "symbolic_trace" and importer != "course":
        raise IRImportError(f"the {importer} importer reads torch.export graphs, not symbolic_trace graphs",
                            hint="use --importer course with --capture symbolic_trace (or leave "
                                 "--importer out, and the course importer is chosen)")
    if maps and capture != "symbolic_trace":
        raise IRImportError("importer map files (call_function_map / call_module_map) apply to "
                            "symbolic_trace graphs; this model is captured with torch.export",
                            hint="use --capture symbolic_trace with --importer-map, or leave --capture out")
    return capture, importer, "; ".join(why)


class Workspace(GraphBreakOpening, IRFileOpening, Results):
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
        # the target chosen by name (`irviz targets`); a CPU one is also the passes' target
        self.target: str | None = None
        self._target_on_replace = _KEEP
        self.converter_files: list[str] = []
        self.importer_maps: list[str] = []  # course map files of the open model (symbolic_trace)
        self.keep_params = False          # the open model keeps its weights as main's parameters
        self.params_dir = None            # where a --keep-params import writes its .npz (None: temp)
        self.import_error = None          # the IRImportError while the model is captured, not imported
        self.import_planned: list = []    # the pipeline to plan once the import works
        self.stage: str | None = None     # the stage running now: names a failure that is no IrvizError
        self.runs: dict[int, tuple] = {}  # step index -> (Step, RunResult), for the exported report
        self._latency_cache: dict = {}    # (module hash, target) -> measurement
        self._latency_last = None         # ({step index: Step}, trace) of the last latency trace
        self._last_build = None           # (Step, BuildResult): the executable of the last build
        # seconds per stage of the last open / pipeline / build / run; "tune": measuring on this CPU
        self.stage_seconds: dict[str, float] = {}

    # -- what is open ---------------------------------------------------------------------------

    @property
    def capture(self) -> str | None:
        """How the open model was captured: "export" | "symbolic_trace" (None: no FX graph)."""
        return getattr(self.captured, "method", None)

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

    @property
    def structure_only(self) -> bool:
        """The open model has no weights (--no-weights, or built on the meta device): its graph,
        passes, builds and memory work; nothing that needs values runs."""
        return bool(getattr(self.imported, "structure_only", False))

    def need_weights(self, what: str) -> None:
        """RunError saying `what` needs the weights, when the open model has none."""
        if self.structure_only:
            from irviz.core.frontend.structure_only import needs_weights

            raise RunError(needs_weights(what),
                           "build (compile only), memory, diffs and queries work without weights")

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
        return [PassInvocation(st.pass_name, dict(st.params or {})) for st in self.session.pass_steps()]

    def keep_builtins(self, names) -> None:
        """A pass file has just taken the names `names` from built-ins: the steps and planned passes
        of those names were the built-ins, and stay them, as builtin:NAME."""
        from irviz.core.passes import BUILTIN_PREFIX

        names = set(names)
        for st in self.session.pass_steps() if self.session is not None else ():
            if st.pass_name in names:
                st.pass_name = BUILTIN_PREFIX + st.pass_name
        for inv in self.planned():  # the same objects the session or the import plan holds
            if inv.name in names:
                inv.name = BUILTIN_PREFIX + inv.name

    # -- opening --------------------------------------------------------------------------------

    def open(self, spec: str, importer: str | None = None, planned=(), fraction_span=(0.0, 1.0),
             capture: str | None = None, importer_maps=None, keep_params: bool = False,
             no_weights: bool = False, graph: int | None = None, target: str | None = None):
        """Load, capture and import `spec`; a new Session with `planned` as its pipeline.

        `planned`: a pipeline name or text (which may name its target), a Pipeline or a list of
        invocations; `target`: the target chosen besides it (both, when they differ, is an error).
        With neither naming one, the session keeps its target. A bad pipeline or target fails
        first, with the stage "pipeline", before anything loads; the target changes only when
        the open works.

        `capture` ("export" | "symbolic_trace") and `importer` ("exported_program" | "course"):
        None takes the model file's IRVIZ_CAPTURE / IRVIZ_IMPORTER, else the defaults (see
        `choose_frontend`). `importer_maps`: course map files (call_function_map /
        call_module_map), kept and executed afresh by every later import.
        keep_params: main takes the weights as parameters, written to `params_file`.
        no_weights: structure only: get_model() on the meta device, no weight ever allocated (a
        model file that builds on the meta device is structure only without it).
        graph: when nothing captures the whole model, cut it at its graph breaks and open this
        graph of them (from 1; see graph_breaks.py); None: the capture failure is the answer."""
        from irviz.core.passes.plan import plan

        self.stage = "pipeline"
        chosen = plan(planned, target, default=self.target)
        self._target_on_replace = chosen.target
        try:
            return self._open(spec, importer, chosen.passes, fraction_span, capture, importer_maps,
                              keep_params, no_weights, graph)
        finally:
            self._target_on_replace = _KEEP

    def _open(self, spec, importer, planned, fraction_span, capture, importer_maps, keep_params,
              no_weights, graph):
        from irviz.core.frontend import capture as capture_mod
        from irviz.core.frontend import ir_file, model_file

        a, b = fraction_span
        at = lambda x: a + (b - a) * x
        self.stage = "load"
        self.progress(f"Loading {spec}", at(0.0))
        if step_files.is_exported_step(spec) or ir_file.ir_file_spec(spec) is not None:
            if no_weights:
                raise RequestError(f"--no-weights is for PyTorch models; {spec} is an IRModule, "
                                   "which holds no torch weights to leave out",
                                   "open it without --no-weights")
            if keep_params:
                raise RequestError(f"--keep-params is for PyTorch models; {spec} is an IRModule, whose "
                                   "functions take what parameters it gives them",
                                   "open it without --keep-params: its get_params() gives the weights "
                                   "BindParams binds (or BindParams(params=FILE.npz))")
        if step_files.is_exported_step(spec):
            return self._open_step_file(spec, planned, at)
        ir = ir_file.ir_file_spec(spec)
        if ir is not None:
            return self._open_ir_file(spec, *ir, planned=planned, at=at)
        maps = [os.path.abspath(os.path.expanduser(str(p))) for p in (importer_maps or ())]
        for path in maps:  # a broken map file fails now, before the model is loaded
            self._map_layer(path)
        self.stage = "load"
        t = time.perf_counter()
        loaded = model_file.load_model(spec, no_weights=no_weights)
        load_seconds = time.perf_counter() - t
        self.log(f"load     {load_seconds:7.2f} s  {loaded.name}")
        for note in loaded.notes:
            self.log(f"note     {note}")
        asked_importer = importer
        capture, importer, why = choose_frontend(loaded, capture, importer, maps)
        if why:
            self.log(f"frontend {why}")
        if loaded.structure_only:
            from irviz.core.frontend.structure_only import check_frontend

            self.stage = "import"
            check_frontend(capture, importer)
        self.stage = "capture"
        how = "torch.fx.symbolic_trace" if capture == "symbolic_trace" else "torch.export"
        self.progress(f"Capturing {loaded.name} with {how}", at(0.25))
        try:
            captured = capture_mod.capture(loaded, capture)
        except CaptureError as exc:
            if graph is None or capture != "export" or loaded.structure_only:
                raise
            self._open_graph_breaks(spec, loaded, exc, graph, asked_importer, planned, keep_params, at)
            self.stage_seconds["load"] = load_seconds
            return
        self.log(f"capture  {captured.seconds:7.2f} s  {len(captured.graph.nodes)} FX nodes ({captured.method})")
        importer = self._after_fallback(captured, importer, asked_importer)
        self._import(spec, importer, loaded, captured, planned, at(0.6), at(0.9), maps, keep_params)
        self.stage_seconds.update(load=load_seconds, capture=captured.seconds)

    def open_loaded(self, loaded, importer: str = DEFAULT_IMPORTER, planned=()):
        """Capture and import a model built in memory (a LoadedModel a script made, e.g. from a
        corpus of test modules that no file defines) as open() does for a model file."""
        from irviz.core.frontend import capture as capture_mod
        from irviz.core.passes.plan import plan

        self.stage = "pipeline"
        chosen = plan(planned, default=self.target)
        self.target, planned = chosen.target, chosen.passes
        self.stage = "capture"
        self.progress(f"Capturing {loaded.name} with torch.export", 0.25)
        captured = capture_mod.capture(loaded)
        self.log(f"capture  {captured.seconds:7.2f} s  {len(captured.graph.nodes)} FX nodes")
        importer = self._after_fallback(captured, importer, None)
        self._import(loaded.spec, importer, loaded, captured, planned, 0.6, 0.9)

    def _after_fallback(self, captured, importer, asked_importer):
        """Log what a capture fallback did; a symbolic_trace graph goes to the course importer
        (unless another importer was asked for, which then names the mismatch)."""
        for note in captured.notes:
            self.log(f"note     {note}")
        if captured.method == "symbolic_trace" and asked_importer is None:
            return "course"
        return importer

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
                     planned, 0.2, 0.9, self.importer_maps, self.keep_params)

    def _map_layer(self, path):
        """(call_function_map, call_module_map, origin) of a course map file, executed afresh."""
        from irviz.core.frontend.course_fx import load_map_file

        self.stage = "import"
        fmap, mmap = load_map_file(path)
        return fmap, mmap, os.path.basename(path)

    def _import(self, spec, importer, loaded, captured, planned, f_import, f_session, maps=(),
                keep_params=False):
        from irviz.core.frontend import importer as importer_mod
        from irviz.core.session import Session

        self.stage = "import"
        convert_map = self.convert_map(importer)
        layers = list(getattr(loaded, "course_maps", ()) or ()) + [self._map_layer(p) for p in maps]
        self.progress(f"Importing {len(captured.graph.nodes)} FX nodes into Relax ({importer})", f_import)
        try:
            imported = importer_mod.import_model(captured, importer=importer,
                                                 custom_convert_map=convert_map, course_maps=layers,
                                                 keep_params=keep_params,
                                                 structure_only=loaded.structure_only)
            if imported.params:
                imported.params_file = self._write_params(loaded, imported.params)
        except IrvizError as exc:
            if exc.stage == "import":
                # the capture worked: keep it, so the FX graph stays viewable and reimport retries
                self._replace(spec, importer, loaded, captured, None, None)
                self.importer_maps = list(maps)
                self.keep_params = keep_params
                self.import_error = exc
                self.import_planned = list(planned or ())
            raise
        self.log(f"import   {imported.seconds:7.2f} s  ({imported.importer})")
        if imported.params_file:
            self.log(f"params   {len(imported.params)} weights kept as main's parameters, "
                     f"written to {imported.params_file}")
        self.progress("Preparing the session", f_session)
        session = Session(imported, captured)
        session.set_pipeline(list(planned or ()))
        self._replace(spec, importer, loaded, captured, imported, session)
        self.importer_maps = list(maps)
        self.keep_params = keep_params
        self.stage_seconds["import"] = imported.seconds

    def _replace(self, spec, importer, loaded, captured, imported, session, ir=None) -> None:
        # only called once a stage worked: a failed open leaves the previous model usable
        self.graph_breaks = self._split_of(loaded)
        self.ir_file = ir
        self.importer_maps = []
        self.spec, self.importer = spec, importer
        self.loaded, self.captured, self.imported, self.session = loaded, captured, imported, session
        if self._target_on_replace is not _KEEP:
            self.target = self._target_on_replace
        if self.target is not None and session is not None:  # lazy: the target module loads TVM
            from irviz.core.target import pass_target

            session.target = pass_target(self.target)
        self.import_error = None
        self.import_planned = []
        self.keep_params = False  # _import sets it once its session is in place
        self._forget_results()

    def _forget_results(self) -> None:
        self.runs.clear()
        self._last_build = None
        self._latency_cache = {}
        self._latency_last = None
        self.stage_seconds = {}

    # -- converter files ------------------------------------------------------------------------

    def add_converter_file(self, path) -> dict:
        """Execute a converter file now (a broken one raises with file:line) and keep it: every later
        import executes it afresh. Later files win for the same op. Returns its table."""
        table = load_converter_file(path)
        path = os.path.abspath(os.path.expanduser(str(path)))
        if path in self.converter_files:
            self.converter_files.remove(path)
        self.converter_files.append(path)
        return table

    def convert_map(self, importer: str = DEFAULT_IMPORTER):
        if not self.converter_files:
            return None

        out = {}
        for path in self.converter_files:
            out.update(load_converter_file(path))
        if importer != DEFAULT_IMPORTER:
            return None  # only TVM's exported-program importer takes a custom_convert_map
        return out or None

    # -- stepping -------------------------------------------------------------------------------

    def set_pipeline(self, pipeline, *, whole: bool = False) -> None:
        """Plan `pipeline` (a name, a pipeline text, a Pipeline or invocations) after the cursor;
        with `whole`, as the whole pipeline from the import (a pasted text). A text that names
        another target runs the whole pipeline again under it. A bad pipeline, or a pass that
        cannot run under the target, raises and changes nothing."""
        from irviz.core.passes.plan import plan

        s = self.need_session()
        chosen = plan(pipeline, default=self.target)
        if chosen.target != self.target:
            if not whole:
                raise RequestError("a pipeline that names another target replaces the whole pipeline",
                                   "set it as the whole pipeline (a pipeline text), or choose the target first")
            self.set_target(chosen.target, whole=chosen.passes)
        elif whole:
            self._set_whole_pipeline(chosen.passes)
        else:
            s.set_pipeline(chosen.passes)

    def _set_whole_pipeline(self, invocations) -> None:
        """Recorded steps that match the start of `invocations` are kept, and the cursor stays
        where it was if it still can."""
        s = self.need_session()
        cursor = s.cursor
        s.jump(0)
        s.set_pipeline(invocations)
        if min(cursor, len(s.steps) - 1) != s.cursor:
            s.jump(min(cursor, len(s.steps) - 1))

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

    def remeasure(self) -> None:
        """Apply the applied passes again from the import, measuring every CPU decision afresh
        (library or TensorIR, conv2d tiles) instead of reading the cache; the new figures are cached."""
        from irviz.core.session import Session

        self.need_session()
        applied, planned = self.applied(), self.planned()
        session = Session(self.imported, self.captured, target=self.session.chosen_target)
        session.set_pipeline(applied + planned)
        session.cursor = len(session.steps) - 1  # past the learner's schedule steps, recorded already
        self.session = session
        self._forget_results()
        set_cache_enabled(False)
        try:
            with self._reporting_passes(len(applied)):
                for _ in applied:
                    if session.step_forward() is None:
                        raise session.error
        finally:
            set_cache_enabled(True)

    def _raise_pass_error(self, before=None):
        err = self.session.error
        # the schedule's error stands from the open on: a step refused for it says so again
        if err is not None and (err is not before or err is self.session.schedule_error):
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
                what = {"attrs": "attributes only", "none": "no change"}.get(st.changed_what, "changed")
                self.log(f"  {st.index:2d} {st.pass_name:28} {st.seconds:7.3f} s  {what}")
                for note in st.notes:
                    self.log(f"     {note}")

        from irviz.core.passes import reporting_progress  # loads TVM: not when the CLI starts
        in_pass = lambda text, fraction=None: self.progress(  # a long pass's own (MetaScheduleTune)
            text, fraction, pass_name=self.session.pipeline[0].name if self.session.pipeline else None)

        self.stage = "pipeline"
        unsubscribe = self.session.subscribe(on_event)
        t, tuned = time.perf_counter(), tune_seconds()
        try:
            with reporting_progress(in_pass):
                yield
        finally:
            unsubscribe()
            self._add_seconds("pipeline", time.perf_counter() - t)
            self._add_seconds("tune", tune_seconds() - tuned)

    def _add_seconds(self, stage: str, seconds: float) -> None:
        if seconds > 0 or stage not in self.stage_seconds:
            self.stage_seconds[stage] = self.stage_seconds.get(stage, 0.0) + seconds

    def replay(self, spec, importer=None, applied=(), planned=(), cursor=None,
               pass_files=(), converter_files=(), capture=None, importer_maps=(),
               keep_params=False, no_weights=False, graph=None, target=None) -> None:
        """Rebuild a session from its recipe: load the pass and converter files, open under
        `target` (None: the one it has), apply `applied`, plan `planned`, go to `cursor`. How the
        GUI recovers from a crashed engine."""
        from irviz.core.passes import load_pass_file

        for path in pass_files or ():
            self.progress(f"Loading passes from {path}", 0.0)
            load_pass_file(path)
        for path in converter_files or ():
            self.progress(f"Loading converters from {path}", 0.0)
            self.add_converter_file(path)
        applied, planned = list(applied or ()), list(planned or ())
        self.open(spec, importer, planned=applied + planned,
                  fraction_span=(0.0, 0.4 if applied else 0.95), capture=capture,
                  importer_maps=importer_maps, keep_params=keep_params, no_weights=no_weights,
                  graph=graph, target=target)
        s = self.session
        if applied:
            s.set_pipeline(applied)
            self.run_to_end(fraction_span=(0.4, 0.95))
        s.set_pipeline(planned)
        if cursor is not None:
            cursor = max(0, min(int(cursor), len(s.steps) - 1))
            if cursor != s.cursor:
                s.jump(cursor)

    # -- warming --------------------------------------------------------------------------------

    @staticmethod
    def warm(spec: str = "sample:mul_add") -> None:
        """Pay the one-time costs (torch.export's first run, TVM's importer) and keep nothing."""
        from irviz.core.frontend import capture as capture_mod
        from irviz.core.frontend import importer as importer_mod
        from irviz.core.frontend import model_file

        importer_mod.import_model(capture_mod.capture(model_file.load_model(spec)))
