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
        from irviz.core.views.step_views import StepViews
        from irviz.core.workspace import Workspace

        self.channel = channel
        self.ws = Workspace(progress=self.progress)
        self._req_id = None
        self.views = StepViews(self.ws, self.progress)
        self.commands = {
            "open": self.open, "state": self.state, "set_pipeline": self.set_pipeline,
            "step": self.step, "back": self.back, "jump": self.jump, "run_to_end": self.run_to_end,
            "replay": self.replay, "reimport": self.reimport, "load_converters": self.load_converters,
            "load_pass_file": self.load_pass_file, "fx_graph": self.views.fx_graph,
            "relax_graph": self.views.relax_graph, "tir_functions": self.views.tir_functions,
            "function_text": self.views.function_text, "module_text": self.views.module_text, "diff": self.views.diff,
            "provenance": self.views.provenance, "build_run": self.build_run,
            "latency_trace": self.latency_trace, "export": self.export,
            "list_samples": self.list_samples, "list_passes": self.list_passes,
            "list_pipelines": self.list_pipelines, "warm": self.warm, "ping": self.ping,
            "crash": self.crash,
        }

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
                import_error=import_error_fields(ws.import_error, ws.loaded), converter_files=ws.converter_files)
        self.views.prune()
        steps = [protocol.step_entry(st.index, st.pass_name, st.params, st.seconds, st.changed,
                                     st.changes.added, st.changes.removed, st.changes.changed)
                 for st in s.steps]
        relax_names, tir_names = self.views.func_names(s.steps[s.cursor])
        return protocol.make_state(
            model=ws.model_name, spec=ws.spec, importer=ws.importer, cursor=s.cursor,
            error=error_dict(s.error) if s.error is not None else None, steps=steps,
            planned=planned, relax_functions=relax_names, tir_functions=tir_names,
            converter_files=ws.converter_files)


    # -- session commands -----------------------------------------------------------------------

    def open(self, spec, importer="exported_program", pipeline="zero"):
        from irviz.core.passes import get_pipeline

        self.ws.open(spec, importer, planned=get_pipeline(pipeline) if pipeline else [])
        self.progress("Ready", 1.0)
        return self.state()

    def set_pipeline(self, pipeline=None, passes=None):
        from irviz.core.passes import get_pass, get_pipeline

        self.ws.need_session()
        if passes is not None:
            invs = _invocations(passes)
            for inv in invs:
                get_pass(inv.name)  # an unknown name fails now, not when it is stepped to
        elif pipeline is not None:
            invs = get_pipeline(pipeline)
        else:
            raise BadRequest("set_pipeline needs `pipeline` (a name) or `passes` [{name, params}]")
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

    def replay(self, spec, importer="exported_program", applied=(), planned=(), cursor=None,
               pass_files=(), converter_files=()):
        self.ws.replay(spec, importer, _invocations(applied), _invocations(planned), cursor,
                       pass_files, converter_files)
        self.progress("Replayed", 1.0)
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

    def build_run(self, step=None, repeats=10):
        built, res = self.ws.build_run(self.ws.step_at(step).index, repeats=int(repeats))
        return {
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
            "kernels": [{"name": k.name, "calls": k.calls, "ms": k.ms, "binding": k.binding}
                        for k in res.kernels],
        }

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
