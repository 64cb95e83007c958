"""The engine process: `python -m irviz.engine`.

A request loop around one `irviz.core.workspace.Workspace`, speaking the JSON lines of
`irviz.protocol` (docs/engine_protocol.md): one request per line on stdin; replies, progress and
events on stdout; logs on stderr.

- stdout carries only protocol lines. At startup the real stdout fd is duplicated for the protocol
  and fd 1 is pointed at stderr, so stray prints from torch, TVM or LLVM (Python or C) land in the log.
- Every command runs inside try/except: an exception becomes an error reply and the loop goes on
  (a segfault in TVM still kills it: the GUI's bridge restarts the engine and replays).
- A reader thread queues incoming lines, so a request that carries a `group` is answered with a
  `superseded` error, without running, when a newer request of the same group is already waiting.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import deque

from irviz import protocol
from irviz.protocol import BadRequest, clean, error_dict, import_error_fields


class Channel:
    """Writes protocol lines to the real stdout (a dup of fd 1 taken before redirecting it)."""

    def __init__(self, stream):
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, obj) -> None:
        line = json.dumps(obj, default=protocol.json_default, allow_nan=False)
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()


class Engine:
    """Answers one request at a time: the command table maps each protocol command to a method."""

    def __init__(self, channel: Channel):
        from irviz.step_views import StepViews
        from irviz.core.workspace import Workspace

        self.channel = channel
        self.ws = Workspace(progress=self.progress)
        self._req_id = None
        self.views = StepViews(self.ws, self.progress)
        self.commands = {
            "open": self.open, "state": self.state, "set_pipeline": self.set_pipeline,
            "step": self.step, "back": self.back, "jump": self.jump, "run_to_end": self.run_to_end,
            "replay": self.replay, "reimport": self.reimport, "load_converters": self.load_converters,
            "remeasure": self.remeasure,
            "load_pass_file": self.load_pass_file, "fx_graph": self.views.fx_graph,
            "relax_graph": self.views.relax_graph, "tir_functions": self.views.tir_functions,
            "function_text": self.views.function_text, "module_text": self.views.module_text, "diff": self.views.diff,
            "provenance": self.views.provenance, "build_run": self.build_run,
            "latency_trace": self.latency_trace, "export": self.export,
            "run_sizes": self.run_sizes,
            "list_samples": self.list_samples, "list_passes": self.list_passes,
            "list_pipelines": self.list_pipelines, "warm": self.warm, "ping": self.ping,
            "crash": self.crash, "compare": self.compare, "compare_diff": self.compare_diff,
            "compare_graphs": self.compare_graphs,
            "intermediates": self.intermediates,
            "query": self.query, "memory": self.memory,
            "bisect": self.bisect, "write_repro": self.write_repro,
        }
        self.comparison = None  # the last `compare`: its two step lists, for compare_diff

    @property
    def session(self):
        return self.ws.session

    def progress(self, text: str, fraction: float | None = None, pass_name: str | None = None) -> None:
        self.channel.send(protocol.progress_message(self._req_id, text, fraction, pass_name))

    # -- dispatch -------------------------------------------------------------------------------

    def handle(self, req: dict) -> dict:
        rid, cmd, args = req.get("id"), req.get("cmd"), req.get("args") or {}
        self._req_id = rid
        fn = self.commands.get(cmd) if isinstance(cmd, str) else None
        try:
            if fn is None:
                raise BadRequest(f"Unknown command {cmd!r}")
            if not isinstance(args, dict):
                raise BadRequest("`args` must be an object")
            return {"id": rid, "ok": True, "result": clean(fn(**args))}
        except BaseException as exc:  # noqa: BLE001 - a failing command never kills the loop
            if isinstance(exc, KeyboardInterrupt):
                raise
            if isinstance(exc, TypeError) and fn is not None and "argument" in str(exc) \
                    and exc.__traceback__ is not None and exc.__traceback__.tb_next is None:
                exc = BadRequest(f"Bad arguments for `{cmd}`: {exc}")
            reply = {"id": rid, "ok": False, "error": clean(error_dict(exc, cmd or ""))}
            command = protocol.COMMANDS.get(cmd)
            if command is not None and command.returns_state and \
                    (self.ws.session is not None or self.ws.import_error is not None):
                try:
                    reply["state"] = clean(self.state())
                except Exception:  # noqa: BLE001
                    pass
            return reply
        finally:
            self._req_id = None

    # -- query and memory -----------------------------------------------------------------------

    def query(self, pattern: str) -> dict:
        """The pattern's matches at every recorded step (irviz.core.views.query)."""
        from irviz.core.views.query import query_steps

        return query_steps(self.ws.need_session().steps, pattern)

    def memory(self, step=None, func: str = "main") -> dict:
        """Storage tokens, tensors and lifetimes of a step (planned on a copy if it is not yet)."""
        from irviz.core.backend.memory import memory_of_step

        st = self.ws.step_at(step)
        self.progress(f"Planning memory of step {st.index}", 0.2)
        plan, own = memory_of_step(st.mod, func)
        return dict(plan.as_dict(), step=st.index, planned_by_step=own)

    # -- the state ------------------------------------------------------------------------------

    def state(self) -> dict:
        ws, s = self.ws, self.ws.session
        planned = [protocol.invocation(i.name, i.params) for i in ws.planned()]
        if s is None:
            if ws.import_error is None:
                return protocol.make_state(spec=ws.spec, importer=ws.importer)
            err = error_dict(ws.import_error)
            return protocol.make_state(
                spec=ws.spec, importer=ws.importer, error=err, planned=planned,
                import_error=import_error_fields(ws.import_error, ws.loaded), converter_files=ws.converter_files,
                capture=ws.capture, importer_maps=ws.importer_maps, keep_params=ws.keep_params)
        self.views.prune()
        steps = [protocol.step_entry(st.index, st.pass_name, st.params, st.seconds, st.changed,
                                     st.changes.added, st.changes.removed, st.changes.changed,
                                     size=self.views.ir_size(st))
                 for st in s.steps]
        relax_names, tir_names = self.views.func_names(s.steps[s.cursor])
        return protocol.make_state(
            model=ws.model_name, spec=ws.spec, importer=ws.importer, cursor=s.cursor,
            error=error_dict(s.error) if s.error is not None else None, steps=steps,
            planned=planned, relax_functions=relax_names, tir_functions=tir_names,
            converter_files=ws.converter_files, run_functions=self.views.run_functions(s.steps[s.cursor]),
            capture=ws.capture, importer_maps=ws.importer_maps, pipeline_text=_pipeline_text(s),
            keep_params=ws.keep_params, params_file=ws.params_file)


    # -- session commands -----------------------------------------------------------------------

    def open(self, spec, importer=None, pipeline="zero", capture=None, importer_maps=None, keep_params=False):
        from irviz.core.passes import parse_pipeline

        self.ws.open(spec, importer, planned=parse_pipeline(pipeline) if pipeline else [],
                     capture=capture, importer_maps=importer_maps, keep_params=bool(keep_params))
        self.progress("Ready", 1.0)
        return self.state()

    def set_pipeline(self, pipeline=None, passes=None, text=None):
        """`pipeline`: a name, replacing the passes after the cursor; `passes`: [{name, params}],
        the same; `text`: a pipeline text for the whole pipeline from the import (a bad text
        changes nothing)."""
        from irviz.core.passes import get_pass, get_pipeline, parse_pipeline

        self.ws.need_session()
        if text is not None:
            self.ws.set_whole_pipeline(parse_pipeline(text))
            return self.state()
        if passes is not None:
            invs = _invocations(passes)
            for inv in invs:
                get_pass(inv.name)  # an unknown name fails now, not when it is stepped to
        elif pipeline is not None:
            invs = get_pipeline(pipeline)
        else:
            raise BadRequest("set_pipeline needs `pipeline` (a name), `passes` [{name, params}] or `text`")
        self.ws.set_pipeline(invs)
        return self.state()

    def step(self):
        self.ws.step()
        return self.state()

    def back(self):
        self.ws.back()
        return self.state()

    def jump(self, index):
        self.ws.jump(index)
        return self.state()

    def run_to_end(self):
        self.ws.run_to_end()
        return self.state()

    def replay(self, spec, importer=None, applied=(), planned=(), cursor=None,
               pass_files=(), converter_files=(), capture=None, importer_maps=(), keep_params=False):
        self.ws.replay(spec, importer, _invocations(applied), _invocations(planned), cursor,
                       pass_files, converter_files, capture=capture, importer_maps=importer_maps,
                       keep_params=bool(keep_params))
        self.progress("Replayed", 1.0)
        return self.state()

    def remeasure(self):
        self.ws.remeasure()
        self.progress("Ready", 1.0)
        return self.state()

    def reimport(self):
        self.ws.reimport()
        self.progress("Ready", 1.0)
        return self.state()

    def load_converters(self, path):
        """Execute a converter file (afresh) and keep it for every later import."""
        table = self.ws.add_converter_file(path)
        files = self.ws.converter_files
        return {"path": files[-1], "ops": sorted(table), "files": list(files)}

    def load_pass_file(self, path):
        from irviz.core.passes import load_pass_file

        load_pass_file(path)
        return self.list_passes()

    # -- views ---------------------------------------------------------------------------------

    # -- building, timing, export ---------------------------------------------------------------

    def build_run(self, step=None, repeats=10, func="main", dims=None):
        """`func`: the Relax function to run; `dims`: {size: int} for made-up inputs (from the
        app's sizes dialog), kept for later runs and replays in this engine."""
        if dims is not None:
            if not isinstance(dims, dict):
                raise BadRequest("`dims` must be an object {name: int}")
            from irviz.core.frontend.ir_file import parse_dims

            self.ws.dims = {**self.ws.dims, **parse_dims(",".join(f"{k}={v}" for k, v in dims.items()))}
        built, res = self.ws.build_run(self.ws.step_at(step).index, repeats=int(repeats), func=func)
        from irviz.core.target import cpu_info
        from irviz.core.backend.timing import describe
        from irviz.core.views.decisions import kernel_decisions

        decided = kernel_decisions(built.mod, res.kernels)
        return {
            "func": res.func,
            "ok": bool(res.allclose), "max_abs_error": res.max_abs_error,
            "max_rel_error": res.max_rel_error,
            "allclose": None if res.allclose is None else bool(res.allclose),
            "verdict": res.verdict, "not_comparable": res.not_comparable,
            "reference": self.ws.has_reference,
            "reference_name": self.ws.reference_name,
            "tvm_ms": res.tvm_ms, "torch_ms": res.torch_ms, "threads": res.threads,
            "torch_threads": res.torch_threads,
            "build_seconds": built.seconds, "target": str(built.target),
            "outputs": res.outputs, "per_output": list(res.per_output or []),
            "kernels": [{"name": k.name, "calls": k.calls, "ms": k.ms, "binding": k.binding,
                         "decision": decided.get(k.name)} for k in res.kernels],
            "tvm_timing": res.tvm_timing, "torch_timing": res.torch_timing, "cpu": cpu_info().as_dict(),
            "timing_text": describe({"TVM": res.tvm_timing, "PyTorch": res.torch_timing}, res.threads),
        }

    def intermediates(self, step=None, rtol=None, atol=None):
        """Every FX node against its Relax binding at a step (Workspace.compare_intermediates)."""
        tol = {}
        for name, v in (("rtol", rtol), ("atol", atol)):
            if v is not None:
                try:
                    tol[name] = float(v)
                except (TypeError, ValueError):
                    raise BadRequest(f"`{name}` must be a number, got {v!r}") from None
        return self.ws.compare_intermediates(self.ws.step_at(step).index, **tol).as_dict()

    def run_sizes(self, step=None, func="main"):
        """What a run of `func` needs before it can start: its symbolic sizes and where its inputs
        come from (Workspace.run_sizes)."""
        return self.ws.run_sizes(self.ws.step_at(step).index, func=func)

    def latency_trace(self, steps="all", repeats=10):
        """Build and time every recorded step (or `steps`); one progress message per step."""
        from irviz.core.views.latency_chart import torch_ms_of

        sel = None if steps in (None, "all") else [int(i) for i in steps]
        trace = self.ws.latency_trace(sel, repeats=int(repeats))
        return {"trace": trace, "torch_ms": torch_ms_of(trace),
                "threads": next((e.get("threads") for e in trace if e.get("threads")), None),
                "reference": self.ws.loaded is not None, "planned": len(self.ws.planned())}

    def export(self, out_dir, steps="all"):
        sel = None if steps in (None, "all") else [int(i) for i in steps]
        path = os.fspath(self.ws.export(out_dir, steps=sel))
        root = path if os.path.isdir(path) else os.path.dirname(path)
        files = sorted(os.path.relpath(os.path.join(d, f), root)
                       for d, _, fs in os.walk(root) for f in fs)
        return {"path": path, "files": files}

    def compare(self, pipeline_b, pipeline_a=None, measure=True, repeats=5):
        """Run two pipelines on the open model's import (A: by default the session's own pipeline)
        and align their steps; `measure` builds and runs the last step of each."""
        from irviz.core import compare as compare_mod

        self.ws.need_session()
        if pipeline_a is None:
            pipeline_a = _pipeline_text(self.session)
        cmp = compare_mod.compare_pipelines(self.ws, [pipeline_a, pipeline_b], progress=self.progress)
        self.comparison = cmp
        if measure:
            compare_mod.measure(self.ws, cmp, repeats=int(repeats), progress=self.progress)
        self.progress("Compared", 1.0)
        return compare_mod.comparison_dict(cmp)

    def compare_diff(self, a, b, mode="pair"):
        """`pair`: the IR at A's step a against B's step b (text and graph); `pass`: what the pass
        at those steps did under A against under B (diff of diffs)."""
        from irviz.core import compare as compare_mod

        cmp = self._open_comparison()
        if mode not in ("pair", "pass"):
            raise BadRequest(f"compare_diff mode is 'pair' or 'pass', not {mode!r}")
        fn = compare_mod.pair_diff if mode == "pair" else compare_mod.pass_diff
        return fn(cmp, int(a), int(b))

    def compare_graphs(self, a, b, func="main"):
        """`func` at A's step a and B's step b, both laid out, with the nodes only in A / only in B /
        changed (compare.pair_graphs)."""
        from irviz.core import compare as compare_mod

        return compare_mod.pair_graphs(self._open_comparison(), int(a), int(b), str(func))

    def _open_comparison(self):
        cmp = self.comparison
        if cmp is None or self.ws.imported is None or not cmp.steps[0][0].mod.same_as(self.ws.imported.mod):
            raise BadRequest("No comparison of the open model", "run Compare with pipeline… again")
        return cmp
    def bisect(self, atol=None, rtol=None):
        """Apply the planned passes, then find the first step whose build mismatches the reference
        or fails to build or run (core.backend.bisect); one progress message per step checked."""
        from irviz.core.backend.bisect import bisect, reference_for

        s = self.ws.need_session()
        if s.pipeline:
            try:
                self.ws.run_to_end()
            except Exception:  # noqa: BLE001 - a pass that fails is the bisect's "pass" verdict
                pass
        ref = reference_for(self.ws)
        result = bisect(s, ref, atol=atol, rtol=rtol, progress=self.progress).as_dict()
        result["diverging"] = self._diverging(result.get("first_bad"), atol, rtol)
        self.progress("Bisect: done", 1.0)
        return result

    def _diverging(self, fb, atol, rtol):
        """The bad step's diverging bindings, for its diff (only wrong numbers have any)."""
        from irviz.core.backend.diverging import diverging_at

        if not fb or fb.get("stage") != "compare" or self.ws.captured is None:
            return None
        self.progress(f"Bisect: comparing intermediates at step {fb['index']}", 0.97)
        try:
            return diverging_at(self.ws, fb["index"], atol=atol, rtol=rtol)
        except Exception as exc:  # noqa: BLE001 - the verdict stands without the marks
            return {"error": (error_dict(exc, "intermediates")["message"] or "failed").splitlines()[0]}

    def write_repro(self, out_dir, step=None, pass_name=None, params=None, stage=None, reason="",
                    atol=None, rtol=None):
        """The repro folder of a step's pass (`step`, None: the cursor), or, after a crash (stage
        "pass" with `pass_name`, or "build"), of what killed the engine (core.export.repro)."""
        from irviz.core.export import repro

        if stage == "pass" and pass_name:
            path = repro.repro_for_crash(self.ws, out_dir, pass_name, params, stage="pass",
                                         reason=reason)
        elif stage == "build":
            path = repro.repro_for_crash(self.ws, out_dir, stage="build", step=step, reason=reason)
        else:
            path = repro.repro_for_step(self.ws, out_dir, step, atol=atol, rtol=rtol)
        return {"path": os.fspath(path), "files": sorted(p.name for p in path.iterdir())}

    # -- catalogues and housekeeping ------------------------------------------------------------

    def list_samples(self):
        from irviz.core.frontend.samples import list_samples

        return [{"name": n, "description": d} for n, d in list_samples()]

    def list_passes(self):
        from irviz.core.passes import list_passes

        return [_pass_dict(p) for p in list_passes()]

    def list_pipelines(self):
        from irviz.core.passes import PIPELINES

        return [{"name": name, "description": desc,
                 "passes": [protocol.invocation(i.name, i.params) for i in invs]}
                for name, (desc, invs) in PIPELINES.items()]

    def warm(self, spec="sample:mul_add"):
        """Pay the one-time costs in advance: the bridge's spare engine runs this so that a restart
        and replay is quick. Keeps nothing."""
        from irviz.core.workspace import Workspace

        t0 = time.perf_counter()
        _prewarm()
        t1 = time.perf_counter()
        Workspace.warm(spec)
        return {"import_seconds": t1 - t0, "open_seconds": time.perf_counter() - t1}

    def ping(self):
        return {"pid": os.getpid(), "time": time.time()}

    def crash(self):
        import signal

        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGSEGV)
        time.sleep(5)  # the signal is delivered asynchronously
        return None


def _pipeline_text(session) -> str:
    from irviz.core.passes import pipeline_text

    return pipeline_text(session.full_pipeline())


def _invocations(items) -> list:
    from irviz.core.passes import PassInvocation

    out = []
    for it in items or []:
        if isinstance(it, str):
            out.append(PassInvocation(it, {}))
        elif isinstance(it, dict) and "name" in it:
            out.append(PassInvocation(it["name"], dict(it.get("params") or {})))
        else:
            raise BadRequest(f"Bad pass entry {it!r}: expected {{name, params}}")
    return out


def _pass_dict(spec) -> dict:
    return {
        "name": spec.name, "description": spec.description, "category": spec.category,
        "roundtrip_ok": bool(spec.roundtrip_ok),
        "params": [{"name": p.name, "kind": p.kind, "default": clean(p.default), "help": p.help,
                    "choices": list(p.choices) if p.choices is not None else None}
                   for p in spec.params],
    }


# ----------------------------------------------------------------------------------------------
# the loop


def _redirect_stdout():
    """Keep the real stdout for the protocol; send everything else written to fd 1 to stderr."""
    sys.stdout.flush()
    proto_fd = os.dup(1)
    os.dup2(2, 1)
    proto = os.fdopen(proto_fd, "w", encoding="utf-8", buffering=1)
    sys.stdout = os.fdopen(os.dup(2), "w", encoding="utf-8", buffering=1)
    return proto


def _prewarm():
    """Import torch and TVM while the engine waits for its first request."""
    try:
        import irviz.core.frontend.capture  # noqa: F401
        import irviz.core.frontend.importer  # noqa: F401
        import irviz.core.session  # noqa: F401
    except Exception:  # noqa: BLE001 - the first command reports the real import error
        pass


def main(argv=None) -> int:
    proto = _redirect_stdout()
    import faulthandler
    import signal

    faulthandler.enable(file=sys.stderr)  # a TVM segfault leaves a Python traceback in the log
    # Ctrl-C in the terminal that started the GUI reaches the whole process group: the GUI decides.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    channel = Channel(proto)
    engine = Engine(channel)
    pending: deque = deque()
    cond = threading.Condition()
    eof = [False]

    def reader():
        for raw in sys.stdin.buffer:
            line = raw.decode("utf-8", "replace").strip()
            if not line:
                continue
            with cond:
                pending.append(line)
                cond.notify()
        with cond:
            eof[0] = True
            cond.notify()

    threading.Thread(target=reader, name="irviz-engine-stdin", daemon=True).start()
    if os.environ.get("IRVIZ_ENGINE_NO_PREWARM") != "1":
        threading.Thread(target=_prewarm, name="irviz-engine-prewarm", daemon=True).start()
    channel.send({"event": "ready", "pid": os.getpid()})

    while True:
        with cond:
            while not pending and not eof[0]:
                cond.wait()
            if not pending:
                break
            line = pending.popleft()
            waiting = list(pending)
        try:
            req = json.loads(line)
            if not isinstance(req, dict):
                raise ValueError("a request is a JSON object")
        except ValueError as exc:
            channel.send({"id": None, "ok": False,
                          "error": {"stage": "request", "message": f"Bad request line: {exc}",
                                    "hint": "send one JSON object per line", "detail": line[:2000]}})
            continue
        group = req.get("group")
        if group is not None and _superseded(group, waiting):
            channel.send({"id": req.get("id"), "ok": False,
                          "error": {"stage": "superseded", "message": "Superseded by a newer request",
                                    "hint": None, "detail": None}})
            continue
        if req.get("cmd") == "shutdown":
            channel.send({"id": req.get("id"), "ok": True, "result": None})
            break
        reply = engine.handle(req)
        try:
            channel.send(reply)
        except (TypeError, ValueError) as exc:  # an unserializable result still gets an answer
            channel.send({"id": req.get("id"), "ok": False, "error": error_dict(exc, req.get("cmd", ""))})
    return 0


def _superseded(group, waiting_lines) -> bool:
    for line in waiting_lines:
        try:
            other = json.loads(line)
        except ValueError:
            continue
        if isinstance(other, dict) and other.get("group") == group:
            return True
    return False


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # skip interpreter teardown: torch/TVM finalizers take seconds (and TVM's can crash)
    os._exit(code)
