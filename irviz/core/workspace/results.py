"""What a Workspace builds, runs, measures and writes: the half of the Workspace that works on the
steps a session already has (see the package docstring for the lazy imports)."""
from __future__ import annotations

import time

from irviz.core.errors import RequestError, RunError, traceback_text
from irviz.core.target import Target
from irviz.core.user_code import exception_line
from irviz.core.workspace.host import WorkspaceHost


class Results:
    """The builds, runs and measurements of the Workspace `ws` that owns it, kept while the model
    they belong to is open (`forget` drops them)."""

    def __init__(self, ws: WorkspaceHost):
        self.ws = ws
        self.runs: dict[int, tuple] = {}  # step index -> (Step, RunResult), for the exported report
        self._latency_cache: dict = {}    # (module hash, target) -> measurement
        self._latency_last = None         # ({step index: Step}, trace) of the last latency trace
        self.last_build = None            # (Step, BuildResult): the executable of the last build

    def forget(self) -> None:
        self.runs.clear()
        self.last_build = None
        self._latency_cache = {}
        self._latency_last = None

    # -- the target -----------------------------------------------------------------------------

    @property
    def builds_for(self) -> Target:
        """The target builds are for: the one chosen (`self.ws.target`); with none chosen, "cuda"
        (sm_80, where the GPU passes ran) for a pipeline with dlight's GPU passes, else the host."""
        if self.ws.target.is_host and self.ws.session is not None:
            from irviz.core.passes import find_pass

            if any(getattr(find_pass(inv.name), "category", None) == "gpu"
                   for inv in self.ws.session.full_pipeline()):
                return Target.of("cuda")
        return self.ws.target

    @property
    def target_name(self) -> str | None:
        """The name of the target builds are for (see `builds_for`); None: the host."""
        return self.builds_for.name

    def build_target(self):
        """The tvm Target builds are for (see `builds_for`); None: the host."""
        return self.builds_for.for_passes

    def not_run_reason(self) -> str | None:
        """Why a build for the target cannot run on this machine (no such CPU features, no such
        GPU); None when it can (always for the host)."""
        return self.builds_for.not_runnable_here

    def runnable_target(self, what: str):
        """The target to build for when `what` must run every build (a bisect): None for the host;
        a RunError when the target's device is not here."""
        why = self.not_run_reason()
        if why is not None:
            raise RunError(f"{what} runs each step it checks, and {self.target_name} is not here ({why})",
                           hint=f"{what} for a target this machine runs, e.g. host; `check --target` builds without running")
        return self.build_target()

    def _run_device(self, st, func: str):
        """The tvm Device runs go to (None: the CPU). When the target's device is not here, the
        step is built (a build error says so first) and the run refused with a RunError."""
        from irviz.core.backend import prim_run

        target = self.builds_for
        if target.is_host:
            return None
        if prim_run.is_prim_func(st.mod, func) and target.kind != "llvm":
            raise RequestError(f"the PrimFunc {func} runs alone on the CPU only, not on {target.name}",
                               "run main, or choose a CPU target")
        why = target.not_runnable_here
        if why is not None:
            if prim_run.is_prim_func(st.mod, func):
                self.ws.stage = "build"
                prim_run.build_prim(st.mod, func, target.for_passes)
            else:
                self.build_step(st)
            self.ws.stage = "run"
            err = RunError(f"built for {target.name}; no such device here, not run ({why})",
                           "build only (`irviz check --target` stops after the build), or run on a "
                           "machine that has it")
            err.not_run = target.name  # the build worked: no failure of the model
            raise err
        return target.device

    def set_target(self, text: Target | str | None, whole=None) -> None:
        """Choose the target by name ("host" or None: the default) and apply the passes again under
        it, back to the same step, as a change of pipeline does; `whole`: a new whole pipeline
        (a pasted text that names its target) instead of today's. A bad target, or a pass that
        cannot run or fails under it, raises and changes nothing."""
        from irviz.core.passes import check_target
        from irviz.core.session import Session

        target = Target.of(text)  # a bad name or JSON: target_spec's RequestError
        if self.ws.session is None:
            self.ws.target = target
            return
        old_session, old_target = self.ws.session, self.ws.target
        invs = list(whole) if whole is not None else self.ws.applied() + self.ws.planned()
        check_target(invs, target.for_passes)
        if target.name == old_target.name and whole is None:
            return
        session = Session(self.ws.imported, self.ws.captured, target=target.for_passes)
        session.set_pipeline(invs)
        session.cursor = len(session.steps) - 1  # past the learner's schedule steps
        want = min(old_session.cursor, session.cursor + len(invs)) if whole is not None else None
        self.ws.session, self.ws.target = session, target
        try:
            with self.ws.reporting_passes(len(old_session.pass_steps()) if whole is None
                                        else want - session.cursor):
                if whole is None:
                    for _ in old_session.pass_steps():
                        if session.step_forward() is None:
                            raise session.error
                    want = old_session.cursor
                if want != session.cursor and session.jump(want) is None:
                    raise session.error
        except BaseException:
            self.ws.session, self.ws.target = old_session, old_target
            raise
        self.ws.forget_results()

    # -- building and running -------------------------------------------------------------------

    def build_run(self, step=None, repeats: int = 10, inputs=None, func: str = "main", dims=None):
        """Build a step, run its Relax function `func` and compare it with PyTorch (an IR file: with
        its reference(), if any). `dims` gives symbolic sizes for made-up inputs (default: the
        workspace's `dims`). Returns (BuildResult, RunResult); the result is kept for the exported
        report."""
        from irviz.core.backend import prim_run
        from irviz.core.backend import run as run_mod

        st = self.ws.step_at(step)
        func = prim_run.resolve_func(st.mod, func)
        self.ws.stage = "run"
        self.ws.need_weights("a run")
        run_mod.check_func(st.mod, func)
        if self.ws.loaded is not None and func != "main":
            raise RequestError(f"a PyTorch model is compared through main; {func} has no PyTorch "
                               "counterpart to run", "run main, or open the module as an IR file")
        device = self._run_device(st, func)
        if prim_run.is_prim_func(st.mod, func):
            self.ws.progress(f"Building {func} of step {st.index} ({st.pass_name})", 0.05)
            built, result = self.build_run_prim(st.mod, func, int(repeats), dims)
            self.runs[st.index] = (st, result)
            return built, result
        # inputs first: missing sizes or bad get_inputs() are reported before a build is paid for
        ir_inputs = self.ir_inputs(st.mod, func, dims) if self.ws.loaded is None else None
        built = self.build_step(st)
        self.ws.stage = "run"
        t = time.perf_counter()
        if self.ws.loaded is None:
            result = self.run_ir(built, ir_inputs, func, int(repeats), dims, device)
        else:
            self.ws.progress(f"Running and comparing with PyTorch (built in {built.seconds:.1f} s)", 0.6)
            program = self.ws.captured.exported if self.ws.captured is not None else None
            result = run_mod.run_built(built, self.ws.loaded, repeats=int(repeats), inputs=inputs,
                                       params=self.kept_params, program=program, device=device)
        self.ws.stage_seconds["run"] = time.perf_counter() - t
        if inputs is None:
            self.runs[st.index] = (st, result)
        return built, result

    def build_step(self, step=None):
        """Compile a step (the cursor by default) without running it: what a model without weights
        can do. The last build is reused for the same step."""
        from irviz.core.backend import build as build_mod

        st = step if hasattr(step, "mod") else self.ws.step_at(step)
        self.ws.stage = "build"
        if self.last_build is not None and self.last_build[0] is st:
            return self.last_build[1]   # other inputs for the same step: no second build
        self.ws.progress(f"Building step {st.index} ({st.pass_name})", 0.05)
        built = build_mod.build(st.mod, self.build_target())
        self.ws.stage_seconds["build"] = built.seconds
        self.ws.log(f"build    {built.seconds:7.2f} s  ({built.target})")
        self.last_build = (st, built)
        return built

    def build_run_prim(self, mod, func: str, repeats: int, dims=None):
        """PrimFunc `func` of `mod` built alone and called on get_inputs() (or random inputs) and
        zeroed outputs; compared with reference(*inputs), if the file has one (see
        backend/prim_run.py). Returns (BuildResult, RunResult)."""
        from irviz.core.backend import prim_run
        from irviz.core.frontend.ir_file import raw_inputs

        pa = prim_run.prim_args(mod, func, raw_inputs(self.ws.ir_file), self.ws.dims if dims is None else dims)
        self.ws.stage = "build"
        built = prim_run.build_prim(mod, func, self.build_target())
        self.ws.stage_seconds["build"] = built.seconds
        self.ws.log(f"build    {built.seconds:7.2f} s  ({built.target}, {func} alone)")
        self.ws.stage = "run"
        t = time.perf_counter()
        reference = self._reference(pa.inputs)
        what = "and comparing with reference()" if reference is not None else "(nothing to compare with)"
        self.ws.progress(f"Running {func} {what}", 0.6)
        result = prim_run.run_prim(built, pa, reference=reference, repeats=repeats)
        self.ws.stage_seconds["run"] = time.perf_counter() - t
        return built, result

    def _reference(self, inputs):
        """The IR file's reference(*inputs), or None without one."""
        if self.ws.ir_file is None or self.ws.ir_file.reference is None:
            return None
        self.ws.progress("Running reference()", 0.5)
        try:
            return self.ws.ir_file.reference(*inputs)
        except Exception as exc:
            raise RunError(f"reference() raised {exception_line(exc)}",
                           "run the file in plain Python to see the full error",
                           detail=traceback_text(exc)) from exc

    def compare_intermediates(self, step=None, rtol=None, atol=None):
        """Every FX node's torch value against its Relax binding at a step (the cursor by default);
        see backend/intermediates.py. A late step reuses the last build of that step."""
        from irviz.core.backend.intermediates import compare_intermediates

        st = self.ws.step_at(step)
        self.ws.need_weights("comparing intermediates")
        built = self.last_build[1] if self.last_build is not None and self.last_build[0] is st else None
        self.ws.stage = "run"
        return compare_intermediates(st, self.ws.captured, params=self.kept_params, built=built,
                                     rtol=rtol, atol=atol, progress=self.ws.progress)

    def ir_inputs(self, mod, func: str, dims=None) -> list:
        from irviz.core.frontend.ir_file import inputs_for

        return inputs_for(self.ws.ir_file, mod, func=func, dims=self.ws.dims if dims is None else dims,
                          params=self.kept_params)

    def ir_reference_inputs(self, mod, func: str, dims=None) -> list:
        """What reference() takes: every parameter of `func` as the IR file defines it (as `mod`,
        a step, has it when a pass made the function)."""
        from irviz.core.frontend.ir_file import defining_module

        return self.ir_inputs(defining_module(self.ws.ir_file, mod, func), func, dims)

    def ir_named_inputs(self, mod, func: str, dims=None) -> dict | None:
        """{parameter name: value} of the IR file's `func` (see ir_file.named_inputs); None when
        its parameter names repeat, and the values can only go by position."""
        from irviz.core.frontend.ir_file import named_inputs

        return named_inputs(self.ws.ir_file, mod, func=func, dims=self.ws.dims if dims is None else dims,
                            params=self.kept_params)

    def run_sizes(self, step=None, func: str = "main") -> dict:
        """What running `func` needs: {"func", "sizes": its symbolic sizes in order of appearance,
        "inputs": "model" (a PyTorch model's example inputs), "get_inputs" (the IR file's) or
        "random" (made up: then every size needs a value), "dims": the values the workspace has}."""
        from irviz.core.backend import run as run_mod
        from irviz.core.backend.prim_run import resolve_func

        st = self.ws.step_at(step)
        func = resolve_func(st.mod, func)
        run_mod.check_func(st.mod, func)
        inputs = ("model" if self.ws.loaded is not None else
                  "get_inputs" if self.ws.ir_file is not None and self.ws.ir_file.get_inputs is not None else
                  "random")
        return {"func": func, "sizes": run_mod.symbolic_sizes(st.mod, func), "inputs": inputs,
                "dims": dict(self.ws.dims)}

    def run_ir(self, built, inputs, func: str, repeats: int, dims=None, device=None):
        """An IR file or step file: its get_inputs() or made-up inputs; its reference(), if any,
        on every parameter of the file's own function (what a step has bound included)."""
        from irviz.core.backend import run as run_mod

        reference = None
        if self.ws.ir_file is not None and self.ws.ir_file.reference is not None:
            reference = self._reference(self.ir_reference_inputs(built.mod, func, dims))
        what = "and comparing with reference()" if reference is not None else "(nothing to compare with)"
        self.ws.progress(f"Running {func} {what}", 0.6)
        return run_mod.run_module(built, inputs, reference=reference, func=func, repeats=repeats,
                                  device=device)

    @property
    def kept_params(self) -> dict | None:
        """The weights a --keep-params import left as main's parameters: a step that has not bound
        them yet runs with them appended to the model's inputs."""
        return getattr(self.ws.imported, "params", None) if self.ws.imported is not None else None

    @property
    def params_file(self) -> str | None:
        return getattr(self.ws.imported, "params_file", None) if self.ws.imported is not None else None

    @property
    def reference_name(self) -> str | None:
        """What a run is compared with: "PyTorch", an IR file's "reference()", or None."""
        if self.ws.loaded is not None:
            return "PyTorch"
        if self.ws.ir_file is not None and self.ws.ir_file.reference is not None:
            return "reference()"
        return None

    def latency_trace(self, steps=None, repeats: int = 10) -> list[dict]:
        """Build and time every recorded step (or `steps`). A module measured before (same
        structural hash) since this model was opened is not built again."""
        from irviz.core.backend.latency import latency_trace

        s = self.ws.need_session()
        if steps is not None:
            for i in steps:
                self.ws.step_at(i)
        self.ws.stage = "build"
        self.ws.need_weights("a latency trace (it runs every step)")
        trace = latency_trace(s, self.ws.loaded, steps=steps, repeats=int(repeats),
                              progress=self.ws.progress, cache=self._latency_cache, params=self.kept_params,
                              target=self.runnable_target("a latency trace"))
        self._latency_last = ({e["step"]: s.steps[e["step"]] for e in trace}, trace)
        return trace

    def example_dims(self, mod, func: str = "main") -> tuple[dict, dict]:
        """({size: value}, {size: where from}) for `func`'s symbolic sizes: the workspace's `dims`
        (--dim), then the example inputs' sizes (an IR file's: what its get_inputs() gives)."""
        from irviz.core.frontend.inputs import example_dims

        if self.ws.loaded is not None:
            shapes = [tuple(t.shape) for t in self.ws.loaded.example_inputs]
        else:
            shapes = self._ir_input_shapes(mod, func)
        return example_dims(mod, shapes, self.ws.dims, func)

    def _ir_input_shapes(self, mod, func: str) -> list[tuple] | None:
        """The shapes of the values an IR file's get_inputs() (and get_params()) give `func`'s
        parameters, in order up to the first it does not give; None without get_inputs()."""
        ir = self.ws.ir_file
        if ir is None or ir.get_inputs is None:
            return None
        from irviz.core.frontend.ir_file import named_inputs
        from irviz.core.tvm_compat import var_name

        try:
            named = named_inputs(ir, mod, func, params=getattr(self.ws.imported, "params", None))
        except Exception:  # the sizes are a convenience; a run reports what is wrong with the inputs
            return None
        shapes = []
        for p in mod[func].params if named is not None else ():
            if var_name(p) not in named:
                break
            shapes.append(tuple(int(d) for d in named[var_name(p)].shape))
        return shapes

    def step_before(self, st, passes: int):
        """`st`, or when default_build has taken it past its first `passes` passes, the last earlier
        step it had not (what a pass further on fixed is still open to change there)."""
        from irviz.core.backend.build import default_build_progress

        if default_build_progress(st.mod) <= passes or self.ws.session is None:
            return st
        return next((s for s in reversed(self.ws.session.steps[:st.index])
                     if default_build_progress(s.mod) <= passes), st)

    def estimate(self, step=None, func: str = "main", fresh: bool = False) -> dict:
        """The step's latency estimated without running it: each distinct kernel timed alone on
        random inputs of its shapes, times its calls (irviz.core.tuning.estimate). Symbolic sizes
        take the workspace's `dims` (--dim), then the example inputs' sizes. A step past
        CallTIRRewrite is estimated from the last step before it (same kernels). fresh: every
        kernel timed again, not read from the cache."""
        from irviz.core.tuning.estimate import FOLDS, REWRITE_INDEX, estimate_latency

        why = self.not_run_reason()
        if why is not None:  # kernels are timed here: a figure for this CPU would pass for the target's
            raise RunError(f"no estimate for {self.target_name}: its kernels are timed on this machine, "
                           f"and it is not here ({why})", hint="estimate for a target this machine runs, e.g. host")
        st = self.ws.step_at(step)
        self.ws.stage = "build"
        src = self.step_before(st, REWRITE_INDEX)
        dims, source = self.example_dims(src.mod, func)
        self.ws.progress(f"Estimating step {st.index}: lowering to its kernels", 0.02)
        t = time.perf_counter()
        # opened without weights: with them, a pipeline that folds constants computes what depends
        # on the weights alone (their transposes, re-layouts) at compile time
        fold = self.ws.structure_only and any(s.pass_name in FOLDS for s in self.ws.session.steps[:src.index + 1])
        est = estimate_latency(src.mod, dims, func=func, dims_source=source, fresh=fresh, fold_weights=fold,
                               progress=lambda text, f: self.ws.progress(text, 0.05 + 0.95 * f))
        self.ws.stage_seconds["estimate"] = time.perf_counter() - t
        est.update(step=st.index, from_step=src.index, from_pass=src.pass_name,
                   structure_only=self.ws.structure_only)
        return est

    def memory(self, step=None, func: str = "main") -> dict:
        """The memory plan of a step (planned on a copy if it is not yet), symbolic sizes at the
        example inputs' (or --dim) values, and with a symbolic size its figures at a few values
        (`by_length`, see backend.memory.memory_by_length; None without one). A step past
        StaticPlanBlockMemory with symbolic sizes is planned from the last step before it."""
        from irviz.core.backend import memory as memory_mod
        from irviz.core.frontend.inputs import symbolic_sizes

        st = self.ws.step_at(step)
        self.ws.stage = "build"
        src = st
        if symbolic_sizes(st.mod, func):
            src = self.step_before(st, memory_mod.DEFAULT_BUILD_PASSES.index("StaticPlanBlockMemory"))
        dims, source = self.example_dims(src.mod, func)
        plan, own = memory_mod.memory_of_step(src.mod, func, dims)
        out = dict(plan.as_dict(), step=st.index, planned_by_step=own and src is st,
                   from_step=src.index, dims=dims, dims_source=source, by_length=None)
        if dims:
            try:
                out["by_length"] = memory_mod.memory_by_length(src.mod, dims, func)
            except Exception as exc:  # the plan at the example sizes stands without it
                out["by_length"] = {"error": str(exc).strip().splitlines()[0][:300]}
        return out

    def current_latency(self):
        """The last latency trace, while its steps are still the session's steps."""
        s = self.ws.session
        if self._latency_last is None or s is None:
            return None
        steps, trace = self._latency_last
        if any(i >= len(s.steps) or s.steps[i] is not st for i, st in steps.items()):
            return None
        return trace

    def current_runs(self) -> dict:
        """{step index: RunResult} of the builds whose steps are still the session's steps."""
        s = self.ws.session
        if s is None:
            return {}
        return {i: r for i, (st, r) in self.runs.items() if i < len(s.steps) and s.steps[i] is st}

    # -- export ---------------------------------------------------------------------------------

    def export(self, out_dir, steps=None):
        """Write the trace (TVMScript per step, diffs, steps.json, report.html) with the builds and
        the latency trace measured so far. Returns the path written."""
        from irviz.core.export.trace import export_trace

        s = self.ws.need_session()
        self.ws.stage = "export"
        self.ws.progress(f"Exporting to {out_dir}", 0.1)
        return export_trace(s, out_dir, steps=steps, run_results=self.current_runs() or None,
                            latency=self.current_latency())
