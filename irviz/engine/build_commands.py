"""Building, running, timing and exporting steps."""
from __future__ import annotations

import os

from irviz.core.backend.timing import describe
from irviz.core.frontend.ir_file import parse_dims
from irviz.core.views.latency_svg import torch_ms_of
from irviz.protocol.commands import BadRequest, BuildRunResult
from irviz.engine.handler_context import EngineContext
from irviz.engine.peer_commands import COMPILERS, peer_report

# irviz.core imports that load torch or TVM stay in the handlers (see irviz.engine.session_commands).


class BuildCommands:
    """The commands that build, run, time and export steps."""

    def __init__(self, ctx: EngineContext):
        self.ctx = ctx

    def build_run(self, step=None, repeats=10, func="main", dims=None) -> BuildRunResult:
        """`func`: the Relax function to run; `dims`: {size: int} for made-up inputs (from the
        app's sizes dialog), kept for later runs and replays in this engine."""
        if dims is not None:
            if not isinstance(dims, dict):
                raise BadRequest("`dims` must be an object {name: int}")
            self.ctx.ws.dims = {**self.ctx.ws.dims, **parse_dims(",".join(f"{k}={v}" for k, v in dims.items()))}
        built, res = self.ctx.ws.build_run(self.ctx.ws.step_at(step).index, repeats=int(repeats), func=func)
        from irviz.core.views.decisions import kernel_decisions

        decided = kernel_decisions(built.mod, res.kernels)
        roofline = self._roofline(built, res)
        return {
            "func": res.func,
            "ok": bool(res.allclose), "max_abs_error": res.max_abs_error,
            "max_rel_error": res.max_rel_error,
            "allclose": None if res.allclose is None else bool(res.allclose),
            "verdict": res.verdict, "not_comparable": res.not_comparable,
            "reference": self.ctx.ws.has_reference,
            "reference_name": self.ctx.ws.reference_name,
            "tvm_ms": res.tvm_ms, "torch_ms": res.torch_ms, "threads": res.threads,
            "torch_threads": res.torch_threads,
            "build_seconds": built.seconds, "target": str(built.target),
            "outputs": res.outputs, "per_output": list(res.per_output or []),
            "kernels": [{"name": k.name, "calls": k.calls, "ms": k.ms, "binding": k.binding,
                         "decision": decided.get(k.name), "reliable": k.reliable, "reason": k.reason,
                         "alone_ms": k.alone_ms} for k in res.kernels],
            "kernels_reliable": res.kernels_reliable, "kernels_reason": res.kernels_reason,
            "tvm_timing": res.tvm_timing, "torch_timing": res.torch_timing,
            "reliable": res.reliable, "reason": res.reason, "cpu": self.ctx.ws.builds_for.cpu_info.as_dict(),
            "timing_text": describe({"TVM": res.tvm_timing, "PyTorch": res.torch_timing}, res.threads),
            "roofline": roofline,
        }

    def _roofline(self, built, res):
        from irviz.core.backend import machine_peak
        from irviz.core.backend.roofline import roofline_for

        if res.kernels and not machine_peak.compute_peak.cache_info().currsize:
            self.ctx.progress("Measuring this CPU's peak FLOP/s and memory bandwidth (once per engine)", 0.95)
        return roofline_for(built, res)

    def intermediates(self, step=None, rtol=None, atol=None) -> dict:
        """Every FX node against its Relax binding at a step (Workspace.compare_intermediates)."""
        tol = {}
        for name, v in (("rtol", rtol), ("atol", atol)):
            if v is not None:
                try:
                    tol[name] = float(v)
                except (TypeError, ValueError):
                    raise BadRequest(f"`{name}` must be a number, got {v!r}") from None
        return self.ctx.ws.compare_intermediates(self.ctx.ws.step_at(step).index, **tol).as_dict()

    def run_sizes(self, step=None, func="main") -> dict:
        """What a run of `func` needs before it can start: its symbolic sizes and where its inputs
        come from (Workspace.run_sizes)."""
        return self.ctx.ws.run_sizes(self.ctx.ws.step_at(step).index, func=func)

    def memory(self, step=None, func: str = "main") -> dict:
        """Storage tokens, tensors and lifetimes of a step (planned on a copy if it is not yet); with
        a symbolic size, its figures at a few values of it (Workspace.memory)."""
        st = self.ctx.ws.step_at(step)
        self.ctx.progress(f"Planning memory of step {st.index}", 0.2)
        return self.ctx.ws.memory(st.index, func)

    def estimate(self, step=None, func: str = "main") -> dict:
        """The step's latency estimated without running it (Workspace.estimate), one progress
        message per kernel timed."""
        est = self.ctx.ws.estimate(self.ctx.ws.step_at(step).index, func=func)
        return dict(est, cpu=self.ctx.ws.builds_for.cpu_info.as_dict())

    def latency_trace(self, steps="all", repeats=10) -> dict:
        """Build and time every recorded step (or `steps`); one progress message per step."""
        sel = None if steps in (None, "all") else [int(i) for i in steps]
        trace = self.ctx.ws.latency_trace(sel, repeats=int(repeats))
        return {"trace": trace, "torch_ms": torch_ms_of(trace),
                "threads": next((e.get("threads") for e in trace if e.get("threads")), None),
                "reference": self.ctx.ws.loaded is not None, "planned": len(self.ctx.ws.planned())}

    def kernel_code(self, step=None, target=None, kernel=None) -> dict:
        """What each kernel of a step becomes on `target` (irviz.core.backend.kernel_code)."""
        from irviz.core.backend.kernel_code import kernel_code

        st = self.ctx.ws.step_at(step)
        self.ctx.progress(f"Compiling the kernels of step {st.index} for {target or 'host'}", 0.2)
        code = kernel_code(st.mod, target, only=kernel)  # a kernel alone is quicker than the step
        out = dict(code.as_dict(), step=st.index, formats=code.formats(), kernel=kernel, code=None,
                   lexers={f: code.lexer(f) for f in code.formats()})
        if kernel is not None:
            out["code"] = dict(code.kernels[kernel].code)
        return out

    def export(self, out_dir, steps="all", peer=None, peer_freezing=False) -> dict:
        """`peer`: torch.compile beside the cursor step's TVM run too, written as `irviz export
        --peer` writes it; a peer that cannot compile is written with its reason, no failure."""
        if peer_freezing and not peer:
            raise BadRequest("`peer_freezing` is an option of the peer: give `peer` too")
        if peer and peer not in COMPILERS:  # before anything is written
            raise BadRequest(f"no peer compiler {peer!r}; the peers: {', '.join(COMPILERS)}")

        ws = self.ctx.ws
        if peer:
            self._run_for_peer()
        sel = None if steps in (None, "all") else [int(i) for i in steps]
        path = os.fspath(ws.export(out_dir, steps=sel))
        root = path if os.path.isdir(path) else os.path.dirname(path)
        written = None
        if peer:
            from irviz.core.export.peer_files import write_peer

            report = peer_report(self.ctx, None, peer, freezing=peer_freezing)
            peer_files = write_peer(root, report)
            written = {"compiler": peer, "freezing": bool(peer_freezing), "error": report.get("error"),
                       "step": report.get("step"), "json": peer_files["json"], "kernels": len(peer_files["kernels"])}
        files = sorted(os.path.relpath(os.path.join(d, f), root)
                       for d, _, fs in os.walk(root) for f in fs)
        return {"path": path, "files": files, "peer": written}

    def _run_for_peer(self) -> None:
        """TVM's side of the peer: the cursor step built and run unless it was (as `irviz export
        --peer` runs the step it exports); a run that fails leaves the peer Inductor's side alone,
        which its `tvm_ran` false says."""
        ws = self.ctx.ws
        st = ws.step_at(None)
        run = ws.runs.get(st.index)
        if (run is not None and run[0] is st) or ws.structure_only or ws.not_run_reason() is not None:
            return
        self.ctx.progress(f"Building and running step {st.index} for TVM's side of the peer", 0.05)
        try:
            ws.build_run(st.index)
        except Exception:  # the export and Inductor's side stand without TVM's
            pass
