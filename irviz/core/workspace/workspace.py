"""The Workspace: what is open, and the one place that chains the stages (see the package
docstring). It owns its parts and hands each of them itself as their WorkspaceHost: `Results`
(builds, runs, measurements, export), `Stepping` (applying passes), `IRFileOpening` (IR files and
step files) and `GraphBreakOpening` (a model cut at its graph breaks). Their methods that callers
use are the Workspace's own, delegating."""
from __future__ import annotations

import os
import time

from irviz.core.errors import CaptureError, IrvizError, RequestError, RunError
from irviz.core.export import step_files
from irviz.core.frontend.converters import load_converter_file
from irviz.core.target import Target
from irviz.core.workspace.frontend_choice import DEFAULT_IMPORTER, choose_frontend
from irviz.core.workspace.open_in_pieces import GraphBreakOpening, GraphBreakSplit
from irviz.core.workspace.ir_files import IRFileOpening
from irviz.core.workspace.results import Results
from irviz.core.workspace.stepping import Stepping


def _quiet(*_args, **_kwargs) -> None:
    return None


_KEEP = object()  # an open's target not yet decided: the session keeps the one it had


class Workspace:
    """What is open, and the parts that work on it (see the package docstring); each part is given
    this Workspace as its WorkspaceHost."""

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
        self._target = Target()  # chosen by name (`irviz targets`); the passes run under it
        self._target_on_replace = _KEEP
        self.converter_files: list[str] = []
        self.importer_maps: list[str] = []  # course map files of the open model (symbolic_trace)
        self.keep_params = False          # the open model keeps its weights as main's parameters
        self.params_dir = None            # where a --keep-params import writes its .npz (None: temp)
        self.import_error = None          # the IRImportError while the model is captured, not imported
        self.import_planned: list = []    # the pipeline to plan once the import works
        self.stage: str | None = None     # the stage running now: names a failure that is no IrvizError
        # seconds per stage of the last open / pipeline / build / run; "tune": measuring on this CPU
        self.stage_seconds: dict[str, float] = {}
        self._results = Results(self)
        self._stepping = Stepping(self)
        self._ir_files = IRFileOpening(self)
        self._graph_breaks = GraphBreakOpening(self)

    # -- what is open ---------------------------------------------------------------------------

    @property
    def target(self) -> Target:
        """The target chosen for the passes and the builds (the host when none was)."""
        return self._target

    @target.setter
    def target(self, value: Target | str | None) -> None:
        # a name is taken as Target.of takes it: a bad one raises and changes nothing
        self._target = Target.of(value)

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
             no_weights: bool = False, graph: int | None = None, target: Target | str | None = None):
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
            return self._ir_files.open_step_file(spec, planned, at)
        ir = ir_file.ir_file_spec(spec)
        if ir is not None:
            return self._ir_files.open_ir_file(spec, *ir, planned=planned, at=at)
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
            self._graph_breaks.open_graph_breaks(spec, loaded, exc, graph, asked_importer, planned, keep_params, at)
            self.stage_seconds["load"] = load_seconds
            return
        self.log(f"capture  {captured.seconds:7.2f} s  {len(captured.graph.nodes)} FX nodes ({captured.method})")
        importer = self.after_fallback(captured, importer, asked_importer)
        self.import_capture(spec, importer, loaded, captured, planned, at(0.6), at(0.9), maps, keep_params)
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
        importer = self.after_fallback(captured, importer, None)
        self.import_capture(loaded.spec, importer, loaded, captured, planned, 0.6, 0.9)

    def after_fallback(self, captured, importer, asked_importer):
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
        self.import_capture(self.spec, self.importer or DEFAULT_IMPORTER, self.loaded, self.captured,
                     planned, 0.2, 0.9, self.importer_maps, self.keep_params)

    def _map_layer(self, path):
        """(call_function_map, call_module_map, origin) of a course map file, executed afresh."""
        from irviz.core.frontend.course_fx import load_map_file

        self.stage = "import"
        fmap, mmap = load_map_file(path)
        return fmap, mmap, os.path.basename(path)

    def import_capture(self, spec, importer, loaded, captured, planned, f_import, f_session, maps=(),
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
                imported.params_file = self._ir_files.write_params(loaded, imported.params)
        except IrvizError as exc:
            if exc.stage == "import":
                # the capture worked: keep it, so the FX graph stays viewable and reimport retries
                self.replace_open(spec, importer, loaded, captured, None, None)
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
        self.replace_open(spec, importer, loaded, captured, imported, session)
        self.importer_maps = list(maps)
        self.keep_params = keep_params
        self.stage_seconds["import"] = imported.seconds

    def replace_open(self, spec, importer, loaded, captured, imported, session, ir=None) -> None:
        # only called once a stage worked: a failed open leaves the previous model usable
        self._graph_breaks.split = self._graph_breaks.split_of(loaded)
        self.ir_file = ir
        self.importer_maps = []
        self.spec, self.importer = spec, importer
        self.loaded, self.captured, self.imported, self.session = loaded, captured, imported, session
        if self._target_on_replace is not _KEEP:
            self.target = self._target_on_replace
        if not self.target.is_host and session is not None:
            session.target = self.target.for_passes
        self.import_error = None
        self.import_planned = []
        self.keep_params = False  # _import sets it once its session is in place
        self.forget_results()

    def forget_results(self) -> None:
        """Drop what belongs to the model opened before: its builds, runs, measurements, timings."""
        self._results.forget()
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

    # -- stepping (Stepping) --------------------------------------------------------------------

    def set_pipeline(self, pipeline, *, whole: bool = False) -> None:
        self._stepping.set_pipeline(pipeline, whole=whole)

    def step(self) -> None:
        self._stepping.step()

    def back(self) -> None:
        self._stepping.back()

    def jump(self, index: int) -> None:
        self._stepping.jump(index)

    def run_to_end(self, fraction_span=(0.0, 1.0)) -> None:
        self._stepping.run_to_end(fraction_span)

    def remeasure(self) -> None:
        self._stepping.remeasure()

    def reporting_passes(self, total: int | None, fraction_span=(0.0, 1.0)):
        return self._stepping.reporting_passes(total, fraction_span)

    # -- the target, builds, runs, measurements, export (Results) -------------------------------

    @property
    def builds_for(self) -> Target:
        return self._results.builds_for

    @property
    def target_name(self) -> str | None:
        return self._results.target_name

    def build_target(self):
        return self._results.build_target()

    def not_run_reason(self) -> str | None:
        return self._results.not_run_reason()

    def runnable_target(self, what: str):
        return self._results.runnable_target(what)

    def set_target(self, text: Target | str | None, whole=None) -> None:
        self._results.set_target(text, whole)

    def build_run(self, step=None, repeats: int = 10, inputs=None, func: str = "main", dims=None):
        return self._results.build_run(step, repeats, inputs, func, dims)

    def build_step(self, step=None):
        return self._results.build_step(step)

    def compare_intermediates(self, step=None, rtol=None, atol=None):
        return self._results.compare_intermediates(step, rtol, atol)

    def run_sizes(self, step=None, func: str = "main") -> dict:
        return self._results.run_sizes(step, func)

    def latency_trace(self, steps=None, repeats: int = 10) -> list[dict]:
        return self._results.latency_trace(steps, repeats)

    def estimate(self, step=None, func: str = "main", fresh: bool = False) -> dict:
        return self._results.estimate(step, func, fresh)

    def memory(self, step=None, func: str = "main") -> dict:
        return self._results.memory(step, func)

    def current_runs(self) -> dict:
        return self._results.current_runs()

    def current_latency(self):
        return self._results.current_latency()

    def export(self, out_dir, steps=None):
        return self._results.export(out_dir, steps)

    @property
    def runs(self) -> dict[int, tuple]:
        return self._results.runs

    @property
    def _last_build(self):
        return self._results.last_build

    @property
    def kept_params(self) -> dict | None:
        return self._results.kept_params

    @property
    def params_file(self) -> str | None:
        return self._results.params_file

    @property
    def reference_name(self) -> str | None:
        """What a run is compared with: "PyTorch" (on one graph, for a model cut at its graph
        breaks), an IR file's "reference()", or None."""
        return self._graph_breaks.reference_name or self._results.reference_name

    @property
    def has_reference(self) -> bool:
        return self.reference_name is not None

    # what irviz.core.pipeline_compare and irviz.core.backend.step_bisect run an IR file with
    def _build_run_prim(self, mod, func: str, repeats: int, dims=None):
        return self._results.build_run_prim(mod, func, repeats, dims)

    def _run_ir(self, built, inputs, func: str, repeats: int, dims=None, device=None):
        return self._results.run_ir(built, inputs, func, repeats, dims, device)

    def _ir_inputs(self, mod, func: str, dims=None) -> list:
        return self._results.ir_inputs(mod, func, dims)

    def _ir_named_inputs(self, mod, func: str, dims=None) -> dict | None:
        return self._results.ir_named_inputs(mod, func, dims)

    def _ir_reference_inputs(self, mod, func: str, dims=None) -> list:
        return self._results.ir_reference_inputs(mod, func, dims)

    # -- graph breaks (GraphBreakOpening) -------------------------------------------------------

    @property
    def graph_breaks(self) -> GraphBreakSplit | None:
        """The graph-break cut the open model is a graph of (None: captured whole)."""
        return self._graph_breaks.split

    @property
    def capture_fallback(self) -> str | None:
        return self._graph_breaks.capture_fallback

    @property
    def capture_notes(self) -> list[str]:
        return self._graph_breaks.capture_notes

    def choose_graph(self, graph: int) -> None:
        self._graph_breaks.choose_graph(graph)
