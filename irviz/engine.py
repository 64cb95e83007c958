"""The engine process: `python -m irviz.engine`.

A request loop around one `irviz.core.session.Session`, speaking JSON lines (docs/engine_protocol.md):
one request per line on stdin, replies/progress/events on stdout, logs on stderr.

- stdout carries ONLY protocol lines. At startup the real stdout fd is duplicated for the protocol and
  fd 1 is pointed at stderr, so stray prints from torch, TVM or LLVM (Python or C) land in the log.
- Every command runs inside try/except: any exception becomes an error reply; the loop never dies
  of a failing command (a segfault in TVM still kills it: the GUI's bridge restarts and replays).
- A reader thread queues incoming lines, so a request that carries a `group` is answered with a
  `superseded` error, without running, when a newer request of the same group is already waiting.
- Per-step results (graphs, texts, function lists) are cached; steps are immutable snapshots.
"""
from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
import traceback
from pathlib import Path
from collections import deque

from irviz.core.errors import IrvizError  # light: no torch, no TVM

# Commands whose failure leaves the session where it was and whose reply carries a state.
SESSION_CMDS = ("open", "state", "set_pipeline", "step", "back", "run_to_end", "jump", "replay",
                "reimport")
# Stage reported for an unexpected (non-IrvizError) exception, per command.
DEFAULT_STAGE = {"open": "load", "replay": "load", "set_pipeline": "pipeline", "step": "pipeline",
                 "run_to_end": "pipeline", "jump": "pipeline", "build_run": "build",
                 "export": "export", "load_pass_file": "pipeline", "load_converters": "load",
                 "reimport": "import"}
FX_FOLD_THRESHOLD = 400


# ----------------------------------------------------------------------------------------------
# plumbing


class Channel:
    """Writes protocol lines to the real stdout (a dup of fd 1 taken before redirecting it)."""

    def __init__(self, stream):
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, obj) -> None:
        line = json.dumps(obj, default=_json_default, allow_nan=False)
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()


def _json_default(obj):
    # numpy scalars / arrays, tuples of tvm ints, paths ... anything JSON does not know
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "__fspath__"):
        return os.fspath(obj)
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=str)
    try:
        return int(obj)
    except Exception:
        return str(obj)


def _clean(obj):
    """Replace NaN/inf by None so the reply is strict JSON."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def error_dict(exc: BaseException, cmd: str = "") -> dict:
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    if isinstance(exc, IrvizError):
        out = {"stage": exc.stage, "message": exc.message, "hint": exc.hint,
               "detail": exc.detail or tb}
        for extra in ("node", "op"):
            if getattr(exc, extra, None) is not None:
                out[extra] = str(getattr(exc, extra))
        return out
    text = str(exc).strip() or type(exc).__name__
    lines = text.splitlines()
    # TVM errors carry long C++ backtraces; the message is the last meaningful lines.
    if len(lines) > 12:
        text = "\n".join(lines[-12:])
    return {"stage": DEFAULT_STAGE.get(cmd, "engine"), "message": f"{type(exc).__name__}: {text}",
            "hint": None, "detail": tb}


class BadRequest(IrvizError):
    """The request itself is wrong (unknown command, bad arguments, no model open, no such step)."""

    stage = "request"


# ----------------------------------------------------------------------------------------------
# the engine


class Engine:
    def __init__(self, channel: Channel):
        self.channel = channel
        self.session = None
        self.loaded = None
        self.captured = None
        self.imported = None
        self.spec = None
        self.importer = None
        self._cache: dict[int, tuple[object, dict]] = {}
        self._fx_graph_cache = None
        self._runs: dict[int, tuple[object, object]] = {}   # step index -> (step, RunResult)
        self._req_id = None
        # issue 4: user converter files (re-executed at every import) and a failed import
        self.converter_files: list[str] = []
        self.import_error = None          # IRImportError of the last import (model captured)
        self._import_planned = []         # what the session will plan once the import works

    # -- helpers -------------------------------------------------------------------------------

    def progress(self, text: str, fraction: float | None = None) -> None:
        msg = {"id": self._req_id, "progress": text}
        if fraction is not None:
            msg["fraction"] = float(max(0.0, min(1.0, fraction)))
        self.channel.send(msg)

    def _need_session(self):
        if self.session is None:
            raise BadRequest("No model is open")
        return self.session

    def _step(self, index):
        s = self._need_session()
        if index is None:
            index = s.cursor
        index = int(index)
        if index < 0:
            index += len(s.steps)
        if not 0 <= index < len(s.steps):
            raise BadRequest(f"No step {index}: the session has steps 0..{len(s.steps) - 1}")
        return s.steps[index]

    def _cached(self, step, key, compute):
        """Per-step cache, keyed by the step object (steps are replaced when re-applied)."""
        entry = self._cache.get(step.index)
        if entry is None or entry[0] is not step:
            entry = (step, {})
            self._cache[step.index] = entry
        if key not in entry[1]:
            entry[1][key] = compute()
        return entry[1][key]

    @staticmethod
    def _inv_dict(inv) -> dict:
        return {"name": inv.name, "params": _clean(dict(getattr(inv, "params", None) or {}))}

    @staticmethod
    def _invocations(items):
        from irviz.core.passes.registry import PassInvocation

        out = []
        for it in items or []:
            if isinstance(it, str):
                out.append(PassInvocation(it, {}))
            elif isinstance(it, dict) and "name" in it:
                out.append(PassInvocation(it["name"], dict(it.get("params") or {})))
            else:
                raise BadRequest(f"Bad pass entry {it!r}: expected {{name, params}}")
        return out

    def _func_names(self, step):
        def compute():
            from irviz.core.tvm_compat import PrimFunc, relax

            relax_names, tir_names = [], []
            for gv, func in step.mod.functions.items():
                if isinstance(func, PrimFunc):
                    tir_names.append(gv.name_hint)
                elif isinstance(func, relax.Function):
                    relax_names.append(gv.name_hint)
            relax_names.sort(key=lambda n: (n != "main", n))
            return relax_names, sorted(tir_names)

        return self._cached(step, "func_names", compute)

    def _prune_cache(self) -> None:
        steps = self.session.steps
        for i in list(self._cache):
            if i >= len(steps) or self._cache[i][0] is not steps[i]:
                del self._cache[i]

    def state(self) -> dict:
        s = self.session
        if s is not None:
            self._prune_cache()
        if s is None:
            out = {"model": None, "spec": self.spec, "importer": self.importer, "cursor": 0,
                   "error": None, "steps": [], "planned": [], "relax_functions": [],
                   "tir_functions": []}
            if self.import_error is not None:
                out.update(self._import_error_state())
            return out
        steps = []
        for st in s.steps:
            ch = st.changes
            steps.append({
                "index": st.index, "pass": st.pass_name, "params": _clean(dict(st.params or {})),
                "seconds": float(st.seconds), "changed": bool(st.changed),
                "added": list(getattr(ch, "added", []) or []),
                "removed": list(getattr(ch, "removed", []) or []),
                "changed_funcs": list(getattr(ch, "changed", []) or []),
            })
        relax_names, tir_names = self._func_names(s.steps[s.cursor])
        return {
            "model": getattr(self.loaded, "name", None) or (Path(self.spec).stem if self.spec else None), "spec": self.spec, "importer": self.importer,
            "cursor": int(s.cursor),
            "error": error_dict(s.error) if getattr(s, "error", None) is not None else None,
            "steps": steps, "planned": [self._inv_dict(i) for i in self._planned()],
            "relax_functions": relax_names, "tir_functions": tir_names,
            "import_error": None, "converter_files": list(self.converter_files),
        }

    def _import_error_state(self) -> dict:
        """State fields while the model is captured but its import failed (no Relax session)."""
        exc = self.import_error
        err = error_dict(exc)
        return {
            "error": err,
            "import_error": {"node": err.get("node"), "op": err.get("op"), "message": err["message"],
                             "hint": err.get("hint"),
                             "model": getattr(self.loaded, "name", None)},
            "planned": [self._inv_dict(i) for i in self._import_planned],
            "converter_files": list(self.converter_files),
        }

    def _planned(self):
        s = self.session
        if hasattr(s, "planned"):
            p = s.planned
            return list(p() if callable(p) else p)
        return list(s.pipeline)

    # -- dispatch -------------------------------------------------------------------------------

    def handle(self, req: dict) -> dict:
        rid = req.get("id")
        cmd = req.get("cmd")
        args = req.get("args") or {}
        self._req_id = rid
        try:
            fn = getattr(self, f"cmd_{cmd}", None) if isinstance(cmd, str) else None
            if fn is None:
                raise BadRequest(f"Unknown command {cmd!r}")
            if not isinstance(args, dict):
                raise BadRequest("`args` must be an object")
            result = fn(**args)
            return {"id": rid, "ok": True, "result": _clean(result)}
        except BaseException as exc:  # noqa: BLE001 - a failing command never kills the loop
            if isinstance(exc, KeyboardInterrupt):
                raise
            if isinstance(exc, TypeError) and fn is not None and "argument" in str(exc) \
                    and exc.__traceback__ is not None and exc.__traceback__.tb_next is None:
                exc = BadRequest(f"Bad arguments for `{cmd}`: {exc}")
            err = error_dict(exc, cmd or "")
            reply = {"id": rid, "ok": False, "error": _clean(err)}
            if cmd in SESSION_CMDS and (self.session is not None or self.import_error is not None):
                try:
                    reply["state"] = _clean(self.state())
                except Exception:  # noqa: BLE001
                    pass
            return reply
        finally:
            self._req_id = None

    # -- session commands -----------------------------------------------------------------------

    def _open(self, spec, importer, fraction_span=(0.0, 1.0), planned=()):
        from irviz.core.frontend import capture as capture_mod
        from irviz.core.frontend import importer as importer_mod
        from irviz.core.frontend import model_file
        from irviz.core.session import Session

        a, b = fraction_span
        f = lambda x: a + (b - a) * x  # noqa: E731
        self.progress(f"Loading {spec}", f(0.0))
        from irviz.core.export import trace as export_mod

        if export_mod.is_exported_step(spec):
            return self._open_step_file(spec, f)
        loaded = model_file.load_model(spec)
        self.progress(f"Capturing {loaded.name} with torch.export", f(0.25))
        captured = capture_mod.capture(loaded)
        convert_map = self._convert_map(importer)
        self.progress(f"Importing {len(captured.graph.nodes)} FX nodes into Relax ({importer})", f(0.6))
        try:
            imported = importer_mod.import_model(captured, importer=importer,
                                                 custom_convert_map=convert_map)
        except IrvizError as exc:
            if getattr(exc, "stage", None) != "import":
                raise
            # the capture worked: keep it (the FX graph stays viewable, `reimport` retries)
            self.session, self.loaded, self.captured, self.imported = None, loaded, captured, None
            self.spec, self.importer = spec, importer
            self._set_import_error(exc, planned)
            raise
        self.progress("Preparing the session", f(0.9))
        session = Session(imported, captured)
        # only now replace the old session: a failed open keeps the previous model usable
        self.session, self.loaded, self.captured, self.imported = session, loaded, captured, imported
        self.spec, self.importer = spec, importer
        self.import_error = None
        self._cache.clear()
        self._runs.clear()
        self._fx_graph_cache = None

    def _set_import_error(self, exc, planned) -> None:
        self.import_error = exc
        self._import_planned = list(planned or ())
        self._cache.clear()
        self._runs.clear()
        self._fx_graph_cache = None

    def _convert_map(self, importer="exported_program"):
        """The user's converters: every loaded converter file executed afresh, later files on top."""
        if not self.converter_files:
            return None
        from irviz.core.frontend.converters import load_converter_file

        out = {}
        for path in self.converter_files:
            out.update(load_converter_file(path))
        if importer != "exported_program":
            return None  # only TVM's exported-program importer takes a custom_convert_map
        return out or None

    def _open_step_file(self, spec, f):
        """An exported TVMScript step: a session on that IRModule, with no FX graph or torch model."""
        import time

        from irviz.core.export import trace as export_mod
        from irviz.core.frontend.importer import Imported
        from irviz.core.session import Session

        self.progress("Parsing the TVMScript step", f(0.3))
        t = time.perf_counter()
        mod = export_mod.load_exported(spec)
        imported = Imported(mod=mod, provenance={}, importer="tvmscript", seconds=time.perf_counter() - t)
        session = Session(imported, None)
        self.session, self.loaded, self.captured, self.imported = session, None, None, imported
        self.spec, self.importer = spec, "tvmscript"
        self.import_error = None
        self._cache.clear()
        self._runs.clear()
        self._fx_graph_cache = None

    def cmd_open(self, spec, importer="exported_program", pipeline="zero"):
        from irviz.core.passes import registry as passes

        invs = passes.get_pipeline(pipeline) if pipeline else []
        self._open(spec, importer, planned=invs)
        self.session.set_pipeline(invs)
        self.progress("Ready", 1.0)
        return self.state()

    def cmd_state(self):
        return self.state()

    def cmd_set_pipeline(self, pipeline=None, passes=None):
        from irviz.core.passes import registry as passes_mod

        s = self._need_session()
        if passes is not None:
            invs = self._invocations(passes)
            for inv in invs:
                passes_mod.get_pass(inv.name)  # unknown name -> PassError now, not at step time
        elif pipeline is not None:
            invs = passes_mod.get_pipeline(pipeline)
        else:
            raise BadRequest("set_pipeline needs `pipeline` (a name) or `passes` [{name, params}]")
        s.set_pipeline(invs)
        return self.state()

    def _check_step_error(self, before_error):
        err = getattr(self.session, "error", None)
        if err is not None and err is not before_error:
            raise err

    def cmd_step(self):
        s = self._need_session()
        before = getattr(s, "error", None)
        planned = self._planned()
        if s.cursor == len(s.steps) - 1 and planned:
            self.progress(f"Applying {planned[0].name}", 0.0)
        res = s.step_forward()
        if res is None:
            self._check_step_error(before)
        return self.state()

    def cmd_back(self):
        self._need_session().step_back()
        return self.state()

    def cmd_jump(self, index):
        """Go to a recorded step; an index past them applies planned passes up to it."""
        s = self._need_session()
        index = int(index)
        if index < 0:
            index += len(s.steps)
        last = len(s.steps) - 1 + len(self._planned())
        if not 0 <= index <= last:
            raise BadRequest(f"No step {index}: steps 0..{len(s.steps) - 1} are recorded, "
                             f"{len(self._planned())} more planned")
        if index < len(s.steps):
            s.jump(index)
        else:
            self._apply_all(stop_at=index)
        return self.state()

    def _apply_all(self, fraction_span=(0.0, 1.0), stop_at=None):
        """Step forward until nothing is planned (or step `stop_at` exists), one progress message
        per pass; raises the session's error when a pass fails."""
        s = self.session
        a, b = fraction_span
        # walk to the last existing step first (stepping over existing steps applies nothing)
        while s.cursor < len(s.steps) - 1:
            if s.step_forward() is None:
                break
        total = len(self._planned())
        if stop_at is not None:
            total = min(total, stop_at - (len(s.steps) - 1))
        total = max(1, total)
        done = 0
        before = getattr(s, "error", None)
        while True:
            planned = self._planned()
            if not planned or (stop_at is not None and len(s.steps) - 1 >= stop_at):
                break
            name = planned[0].name
            self.progress(f"Applying {name} ({done + 1}/{total})", a + (b - a) * done / total)
            if s.step_forward() is None:
                self._check_step_error(before)
                break
            done += 1

    def cmd_run_to_end(self):
        self._need_session()
        self._apply_all()
        return self.state()

    def cmd_replay(self, spec, importer="exported_program", applied=(), planned=(), cursor=None,
                   pass_files=(), converter_files=()):
        """Rebuild a session: load `pass_files` and `converter_files`, open, apply `applied`, plan
        `planned`, go to `cursor`."""
        from irviz.core.passes.registry import load_pass_file

        for path in pass_files or ():
            self.progress(f"Loading passes from {path}", 0.0)
            load_pass_file(path)
        for path in converter_files or ():
            self.progress(f"Loading converters from {path}", 0.0)
            self._add_converter_file(path)
        applied_invs = self._invocations(applied)
        planned_invs = self._invocations(planned)
        n = len(applied_invs)
        self._open(spec, importer, fraction_span=(0.0, 0.4 if n else 0.95),
                   planned=applied_invs + planned_invs)
        s = self.session
        if n:
            s.set_pipeline(applied_invs)
            self._apply_all(fraction_span=(0.4, 0.95))
        s.set_pipeline(planned_invs)
        if cursor is not None:
            cursor = max(0, min(int(cursor), len(s.steps) - 1))
            if cursor != s.cursor:
                s.jump(cursor)
        self.progress("Replayed", 1.0)
        return self.state()

    # -- views ---------------------------------------------------------------------------------

    def cmd_fx_graph(self, fold_depth="auto", folded=()):
        """FX graph grouped by module path; folded to <= 400 nodes by default (fold_depth="auto")."""
        if self.captured is None:
            self._need_session()
            raise BadRequest("This session has no FX graph")
        key = (str(fold_depth), tuple(sorted(folded or ())))
        if self._fx_graph_cache is None or self._fx_graph_cache[0] != key:
            from irviz.core.views import graph as graph_mod
            from irviz.core.views import layout

            g = graph_mod.fx_digraph(self.captured.graph)
            depth = fold_depth
            if depth == "auto":
                depth = layout.choose_fold_depth(g, "module_path", FX_FOLD_THRESHOLD) if not folded else None
            self.progress(f"Laying out {g.number_of_nodes()} FX nodes", 0.1)
            result = graph_to_protocol(g, group_attr="module_path", fold_depth=depth, folded=folded)
            result["fold_depth"] = depth
            result["total_nodes"] = g.number_of_nodes()
            result["dim_names"] = self._dim_names()
            self._mark_failed(result)
            self._fx_graph_cache = (key, result)
        return self._fx_graph_cache[1]

    def _dim_names(self) -> dict:
        try:
            from irviz.core.frontend.importer import dim_names

            return dict(dim_names(self.captured))
        except Exception:  # noqa: BLE001 - a nicety
            return {}

    def _mark_failed(self, result: dict) -> None:
        """The node the import failed at: `failed: true`, kind "failed" (its folded box too)."""
        exc = self.import_error
        node = getattr(exc, "node", None) if exc is not None else None
        result["failed_node"] = None
        result["import_error"] = None
        if exc is None:
            return
        err = self._import_error_state()["import_error"]
        result["import_error"] = err
        if node is None:
            return
        node = str(node)
        for n in result.get("nodes", ()):
            if n.get("id") == node or node in (n.get("members") or ()):
                n["failed"] = True
                if n.get("kind") != "group":   # a folded box stays a group (it still unfolds)
                    n["fx_kind"] = n.get("kind")
                    n["kind"] = "failed"
                n["error"] = err["message"]
                result["failed_node"] = n["id"]

    # -- converters ----------------------------------------------------------------------------

    def _add_converter_file(self, path):
        from irviz.core.frontend.converters import load_converter_file

        table = load_converter_file(path)   # LoadError (file:line) when it is broken
        path = os.path.abspath(os.path.expanduser(str(path)))
        if path in self.converter_files:
            self.converter_files.remove(path)
        self.converter_files.append(path)   # later files win for the same op
        return table

    def cmd_load_converters(self, path):
        """Execute a converter file (afresh) and keep it for every later import."""
        table = self._add_converter_file(path)
        return {"path": self.converter_files[-1], "ops": sorted(table),
                "files": list(self.converter_files)}

    def cmd_reimport(self):
        """Import the kept capture again with the stored converters: a new session at step 0 with
        the same planned pipeline (applied + planned passes). No re-capture."""
        from irviz.core.frontend import importer as importer_mod
        from irviz.core.session import Session

        if self.captured is None:
            if self.session is not None:
                raise BadRequest("This session has no captured PyTorch model to import again")
            raise BadRequest("No model is open")
        if self.session is not None:
            planned = [self._invocations([{"name": st.pass_name, "params": st.params}])[0]
                       for st in self.session.steps[1:]] + self._planned()
        else:
            planned = list(self._import_planned)
        importer = self.importer or "exported_program"
        self.progress("Loading converters", 0.05)
        convert_map = self._convert_map(importer)
        self.progress(f"Importing {len(self.captured.graph.nodes)} FX nodes into Relax ({importer})", 0.2)
        try:
            imported = importer_mod.import_model(self.captured, importer=importer,
                                                 custom_convert_map=convert_map)
        except IrvizError as exc:
            if getattr(exc, "stage", None) == "import":
                self.session, self.imported = None, None
                self._set_import_error(exc, planned)
            raise
        self.progress("Preparing the session", 0.9)
        session = Session(imported, self.captured)
        session.set_pipeline(planned)
        self.session, self.imported, self.import_error = session, imported, None
        self._import_planned = []
        self._cache.clear()
        self._runs.clear()
        self._fx_graph_cache = None
        self.progress("Ready", 1.0)
        return self.state()

    def cmd_relax_graph(self, step=None, func="main", expand_fused=True):
        """Dataflow of one Relax function; fused calls expanded and grouped by fused function."""
        st = self._step(step)

        def compute():
            from irviz.core.views import graph as graph_mod

            names = self._func_names(st)[0]
            if func not in names:
                raise BadRequest(f"No Relax function {func!r} at step {st.index} "
                                 f"(has: {', '.join(names) or 'none'})")
            g = graph_mod.relax_digraph(st.mod, func, expand_fused=bool(expand_fused))
            self.progress(f"Laying out {g.number_of_nodes()} Relax nodes", 0.1)
            return graph_to_protocol(g, group_attr="group")

        return self._cached(st, ("relax_graph", func, bool(expand_fused)), compute)

    def cmd_tir_functions(self, step=None):
        st = self._step(step)

        def compute():
            from irviz.core.views import graph as graph_mod

            return [dict(d) for d in graph_mod.tir_functions(st.mod)]

        return self._cached(st, "tir_functions", compute)

    def cmd_function_text(self, step=None, name="main"):
        st = self._step(step)

        def compute():
            from irviz.core.views import diff as diff_mod

            names = {gv.name_hint for gv in st.mod.get_global_vars()}
            if name not in names:
                raise BadRequest(f"No function {name!r} at step {st.index}")
            return {"name": name, "text": diff_mod.function_text(st.mod, name)}

        return self._cached(st, ("function_text", name), compute)

    def cmd_module_text(self, step=None):
        st = self._step(step)
        return self._cached(st, "module_text", lambda: {"text": st.mod.script()})

    def cmd_diff(self, a=None, b=None):
        s = self._need_session()
        sa = self._step(a if a is not None else max(0, s.cursor - 1))
        sb = self._step(b if b is not None else s.cursor)

        def compute():
            from irviz.core.views import diff as diff_mod

            return diff_to_protocol(diff_mod.unified_diff(sa.mod, sb.mod),
                                    diff_mod.side_by_side(sa.mod, sb.mod))

        # kept with the later step: dropping the earlier one always drops the later one too
        later, other = (sb, sa) if sb.index >= sa.index else (sa, sb)
        return self._cached(later, ("diff", sa.index, sb.index, other.index), compute)

    def cmd_provenance(self, step=None):
        st = self._step(step)

        def compute():
            from irviz.core.views.provenance import relax_to_callee

            return {"fx_to_relax": {k: list(v) for k, v in (st.provenance or {}).items()},
                    "relax_to_callee": relax_to_callee(st)}

        return self._cached(st, "provenance", compute)

    def cmd_build_run(self, step=None, repeats=10):
        from irviz.core.backend import build as build_mod

        st = self._step(step)
        self.progress(f"Building step {st.index} ({st.pass_name})", 0.05)
        built = build_mod.build(st.mod)
        self.progress(f"Running and comparing with PyTorch (built in {built.seconds:.1f} s)", 0.6)
        kwargs = {}
        params = getattr(self.imported, "params", None)
        if params:
            kwargs["params"] = params
        if self.loaded is None:  # an opened TVMScript step: nothing to compare with
            from irviz.core.backend.run_ir import run_without_reference

            self.progress("Running (no PyTorch model to compare with)", 0.6)
            res = run_without_reference(built, repeats=int(repeats))
        else:
            res = build_mod.run_and_compare(built, self.loaded, repeats=int(repeats), **kwargs)
        self._runs[st.index] = (st, res)   # shown in the exported report
        return {
            "ok": bool(res.allclose), "max_abs_error": res.max_abs_error,
            "max_rel_error": res.max_rel_error,
            "allclose": None if res.allclose is None else bool(res.allclose),
            "reference": self.loaded is not None,
            "tvm_ms": res.tvm_ms, "torch_ms": res.torch_ms, "threads": res.threads,
            "torch_threads": getattr(res, "torch_threads", None),
            "build_seconds": built.seconds, "target": str(getattr(built, "target", "")),
            "outputs": getattr(res, "outputs", None),
            "per_output": list(getattr(res, "per_output", None) or []),
            "kernels": [{"name": k.name, "calls": k.calls, "ms": k.ms, "binding": k.binding}
                        for k in res.kernels],
        }

    def cmd_export(self, out_dir, steps="all"):
        from irviz.core.export.trace import export_trace

        s = self._need_session()
        self.progress(f"Exporting to {out_dir}", 0.1)
        sel = None if steps in (None, "all") else [int(i) for i in steps]
        runs = {i: r for i, (st, r) in self._runs.items() if i < len(s.steps) and s.steps[i] is st}
        path = export_trace(s, out_dir, steps=sel, run_results=runs or None,
                            latency=self._current_latency())
        path = os.fspath(path)
        root = path if os.path.isdir(path) else os.path.dirname(path)
        files = sorted(os.path.relpath(os.path.join(d, f), root)
                       for d, _, fs in os.walk(root) for f in fs)
        return {"path": path, "files": files}

    # -- latency across the pipeline ------------------------------------------------------------

    def _latency_results(self) -> dict:
        """{module hash: measurement} for the open model (dropped when another model is opened)."""
        c = getattr(self, "_latency_cache", None)
        if c is None or c["loaded"] is not self.loaded or c["imported"] is not self.imported:
            c = {"loaded": self.loaded, "imported": self.imported, "results": {}, "last": None}
            self._latency_cache = c
        return c

    def _current_latency(self):
        """The last latency trace, if its steps are still the session's steps (for the report)."""
        c = getattr(self, "_latency_cache", None)
        s = self.session
        if not c or c.get("last") is None or s is None or c["imported"] is not self.imported:
            return None
        steps, trace = c["last"]
        if any(i >= len(s.steps) or s.steps[i] is not st for i, st in steps.items()):
            return None
        return trace

    def cmd_latency_trace(self, steps="all", repeats=10):
        """Build and time every recorded step (or `steps`); one progress message per step.
        Steps whose module was measured before (same structural hash) are not built again."""
        from irviz.core.backend.latency import latency_trace, torch_ms_of

        s = self._need_session()
        sel = None if steps in (None, "all") else [int(i) for i in steps]
        if sel is not None:
            for i in sel:
                self._step(i)  # BadRequest for a step that does not exist
        c = self._latency_results()
        trace = latency_trace(s, self.loaded, steps=sel, repeats=int(repeats), progress=self.progress,
                              cache=c["results"], params=getattr(self.imported, "params", None) or None)
        c["last"] = ({e["step"]: s.steps[e["step"]] for e in trace}, trace)
        return {"trace": trace, "torch_ms": torch_ms_of(trace),
                "threads": next((e.get("threads") for e in trace if e.get("threads")), None),
                "reference": self.loaded is not None, "planned": len(self._planned())}

    # -- catalogues ----------------------------------------------------------------------------

    def cmd_list_samples(self):
        from irviz.core.frontend.samples import list_samples

        return [{"name": n, "description": d} for n, d in list_samples()]

    def cmd_list_passes(self):
        from irviz.core.passes.registry import list_passes

        return [_pass_dict(p) for p in list_passes()]

    def cmd_list_pipelines(self):
        from irviz.core.passes.registry import PIPELINES

        return [{"name": name, "description": desc, "passes": [self._inv_dict(i) for i in invs]}
                for name, (desc, invs) in PIPELINES.items()]

    def cmd_load_pass_file(self, path):
        from irviz.core.passes.registry import load_pass_file

        load_pass_file(path)
        return self.cmd_list_passes()

    def cmd_warm(self, spec="sample:mul_add"):
        """Pay the one-time costs (imports, torch.export's first run, TVM's importer) in advance:
        the bridge's spare engine runs this so that a restart + replay is quick. Keeps nothing."""
        t0 = time.perf_counter()
        _prewarm()
        t1 = time.perf_counter()
        from irviz.core.frontend import capture as capture_mod
        from irviz.core.frontend import importer as importer_mod
        from irviz.core.frontend import model_file

        captured = capture_mod.capture(model_file.load_model(spec))
        importer_mod.import_model(captured)
        return {"import_seconds": t1 - t0, "open_seconds": time.perf_counter() - t1}

    def cmd_ping(self):
        return {"pid": os.getpid(), "time": time.time()}

    def cmd_crash(self):
        import signal

        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGSEGV)
        time.sleep(5)  # the signal is delivered asynchronously
        return None


def _pass_dict(spec) -> dict:
    return {
        "name": spec.name, "description": spec.description, "category": spec.category,
        "roundtrip_ok": bool(getattr(spec, "roundtrip_ok", True)),
        "params": [{"name": p.name, "kind": p.kind, "default": _clean(p.default), "help": p.help,
                    "choices": list(p.choices) if p.choices is not None else None}
                   for p in spec.params],
    }


# ----------------------------------------------------------------------------------------------
# conversions to protocol dicts


def graph_to_protocol(g, group_attr=None, fold_depth=None, folded=()) -> dict:
    """networkx DiGraph -> the protocol's `graph` dict, laid out by irviz.core.views.layout."""
    from irviz.core.views import layout

    return layout.layout_graph(g, group_attr=group_attr, fold_depth=fold_depth,
                               folded=tuple(folded or ()))


def diff_to_protocol(unified, side_by_side) -> dict:
    funcs = []
    for fd in side_by_side or []:
        if isinstance(fd, dict):
            funcs.append(fd)
            continue
        if hasattr(fd, "to_dict"):
            funcs.append(fd.to_dict())
            continue
        rows = []
        for r in getattr(fd, "rows", []) or []:
            rows.append(list(r) if not hasattr(r, "__dict__") else list(vars(r).values()))
        funcs.append({"name": fd.name, "status": fd.status, "rows": rows})
    return {"unified": unified, "functions": funcs}


# ----------------------------------------------------------------------------------------------
# main loop


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
        import irviz.core.session  # noqa: F401
        import irviz.core.frontend.capture  # noqa: F401
        import irviz.core.frontend.importer  # noqa: F401
    except Exception:  # noqa: BLE001 - the real import error is reported by the first command
        pass


def main(argv=None) -> int:
    proto = _redirect_stdout()
    import faulthandler

    faulthandler.enable(file=sys.stderr)  # a TVM segfault leaves a Python traceback in the log
    import signal

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
        except (TypeError, ValueError) as exc:  # unserializable result: still answer
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
