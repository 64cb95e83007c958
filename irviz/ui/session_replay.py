"""The session's recipe and its replay: what the bridge keeps of the last state it saw (spec,
importer, applied and planned passes, cursor, target), and what happens once a restarted engine has
replayed it (the state re-emitted, the repro folder of what killed the old engine, the message)."""
from __future__ import annotations

import tempfile
import time
from collections.abc import Callable

from irviz.protocol.commands import State, empty_state
from irviz.ui.request_routing import Request, RequestRouter

# Give up replaying after this many engines in a row died while replaying.
MAX_REPLAY_FAILURES = 2


class SessionReplay:
    """The replay half of :class:`irviz.ui.engine_process.EngineBridge`, which starts the engines
    and owns this. It sends through the bridge's `router` and announces a finished restart with
    `restarted` (the bridge's engineRestarted)."""

    def __init__(self, router: RequestRouter, restarted: Callable[[str], None]):
        self._router = router
        self._restarted = restarted
        self.recipe: dict | None = None
        self.pass_files: list[str] = []             # loaded with load_pass_file: replayed first
        self.converter_files: list[str] = []        # loaded with load_converters: replayed too
        self.pending_reason: str | None = None      # emitted with engineRestarted once replayed
        self.replay_failures = 0
        self.crash_repro: dict | None = None        # what died (pass or build): written after replay
        self._repro_text: str = ""
        self._repro_state: State | None = None
        self.restarts = 0
        self.last_restart_seconds: float | None = None
        self.restart_t0 = 0.0

    def full_recipe(self) -> dict | None:
        """The recipe with the user files loaded so far (pass_files, converter_files)."""
        if self.recipe is None:
            return None
        return dict(self.recipe, pass_files=list(self.pass_files), converter_files=list(self.converter_files))

    def describe_recipe(self) -> str:
        r = self.recipe
        if not r:
            return "the session"
        return f"{r['spec']} to step {r['cursor']}"

    # -- what the router reports -------------------------------------------------------------------

    def remember(self, state: State) -> None:
        """Keep what a replay needs of a state the engine reported."""
        if not state.get("spec"):
            return
        if state.get("steps"):
            # the learner's schedule steps come back with the file; only passes are replayed
            applied = [{"name": s["pass"], "params": s.get("params") or {}} for s in state["steps"][1:]
                       if s.get("origin") != "schedule"]
            cursor = int(state.get("cursor") or 0)
        elif state.get("import_error"):
            applied, cursor = [], 0  # captured, import failed: a replay captures again (and shows the same failure)
        else:
            return
        self.recipe = {
            "spec": state["spec"],
            "importer": state.get("importer") or "exported_program",
            "keep_params": bool(state.get("keep_params")),
            "no_weights": bool(state.get("structure_only")),
            "applied": applied,
            "planned": [{"name": p["name"], "params": p.get("params") or {}} for p in state.get("planned") or []],
            "cursor": cursor,
            **_frontend_recipe(state),
        }

    def note_reply(self, req: Request, result) -> None:
        """A request succeeded: remember the user files a replay must load again."""
        if req.cmd == "load_pass_file" and req.args.get("path"):
            path = str(req.args["path"])
            if path not in self.pass_files:
                self.pass_files.append(path)
        if req.cmd == "load_converters":
            res = result or {}
            path = str(res.get("path") or req.args.get("path") or "")
            if path:
                if path in self.converter_files:
                    self.converter_files.remove(path)
                self.converter_files.append(path)   # the engine's order: later files win

    def on_internal_reply(self, req: Request, ok: bool, msg: dict, state: State | None) -> None:
        if req.cmd == "load_pass_file":
            return  # reloaded after a restart with no model: its error was shown when first loaded
        if req.cmd == "write_repro":
            self._on_repro_reply(ok, msg)
        else:
            self._on_replay_reply(ok, msg, state)

    # -- what the bridge reports -------------------------------------------------------------------

    def engine_ready(self) -> None:
        """A new engine takes requests: replay the session on it (sent before anything queued)."""
        if self.pending_reason is not None and self.recipe is not None:
            args = dict(self.recipe)
            if self.pass_files:
                args["pass_files"] = list(self.pass_files)
            if self.converter_files:
                args["converter_files"] = list(self.converter_files)
            self._router.send(Request(self._router.new_id(), "replay", args, internal=True))
        elif self.pending_reason is not None:
            # no session to replay, but the pass files stay loaded: later pipelines may name their passes
            for path in self.pass_files:
                self._router.send(Request(self._router.new_id(), "load_pass_file", {"path": path}, internal=True))
            self.finish_restart(self.pending_reason + " Restarted with no model open.", None)

    def engine_died(self, culprit: Request | None, how: str, was_ready: bool) -> str | None:
        """The engine answering requests died (`how`) with `culprit` the oldest request it had;
        sets the reason announced after the restart. Returns the message of the culprit's failure
        when it was the user's (None for the bridge's own requests and for none)."""
        if culprit is not None and culprit.internal:
            self.replay_failures += 1
            if self.replay_failures >= MAX_REPLAY_FAILURES:
                prev = self.pending_reason or ""
                self.pending_reason = (f"{prev} The engine {how} again while replaying "
                                       f"{self.describe_recipe()}; gave up replaying.").strip()
                self.recipe = None
            # else: the same reason is kept, and the replay is tried once more
            if culprit.cmd == "write_repro":
                self.crash_repro = None  # writing the repro killed it too: replay without one
            elif culprit.cmd == "load_pass_file":
                # reloading this pass file killed the engine: not again, or it would die on every start
                self.pass_files = [p for p in self.pass_files if p != culprit.args.get("path")]
            return None
        if culprit is not None:
            self.crash_repro = self._router.what_died(culprit)
            self.pending_reason = f"The engine {how} while running {self._router.describe(culprit)}."
            return self.pending_reason
        if self.pending_reason is None:
            self.pending_reason = f"The engine {how} while idle." if was_ready else \
                f"The engine {how} while starting."
        return None

    def cancelled(self, what: str, replaying: bool) -> None:
        """The user cancelled `what`; when that was the replay itself, come back with no model
        rather than replay again."""
        if replaying:
            self.recipe = None
            self._router.state = None
            self.pending_reason = f"Cancelled replaying {self.describe_recipe()}."
        else:
            self.pending_reason = f"Cancelled {what}."

    # -- the restart's end ---------------------------------------------------------------------------

    def _on_replay_reply(self, ok: bool, msg: dict, state: State | None) -> None:
        reason = self.pending_reason or "The engine restarted."
        if ok and state is not None:
            self.replay_failures = 0
            self._router.take_state(state)
            text = f"{reason} Restarted and replayed to step {state.get('cursor', 0)}."
            if self.crash_repro is not None:
                self._request_crash_repro(text, state)
                return
            self.finish_restart(text, state)
        elif state is not None and state.get("import_error"):
            # the session was captured but did not import before either: that is where we were
            self.replay_failures = 0
            self._router.take_state(state)
            self.finish_restart(f"{reason} Restarted; the model is captured again but its import "
                                "still fails.", state)
        else:
            err = msg.get("error") or {}
            self.recipe = None
            if state is not None:
                self._router.take_state(state)
            self.finish_restart(f"{reason} Restarted, but replaying the session failed: "
                                f"{err.get('message', 'unknown error')}", state)

    def _request_crash_repro(self, text: str, state: State) -> None:
        """Ask the new engine (the GUI has no TVM) to write the repro folder of what killed the old
        one; the restart is announced once it answers, with where the folder is."""
        what, self.crash_repro = self.crash_repro, None
        try:
            out = tempfile.mkdtemp(prefix="irviz-crash-repro-")
        except OSError:
            self.finish_restart(text, state)
            return
        args = {"out_dir": out, "reason": text, **(what or {})}
        self._repro_text, self._repro_state = text, state   # announced once the folder is written
        self._router.send(Request(self._router.new_id(), "write_repro", args, internal=True))

    def _on_repro_reply(self, ok: bool, msg: dict) -> None:
        state, text = self._repro_state, self._repro_text
        self._repro_state = None
        if ok:
            path = (msg.get("result") or {}).get("path")
            text += f" Repro folder: {path} (python {path}/repro.py)."
        else:
            text += f" (No repro folder: {(msg.get('error') or {}).get('message', 'unknown error')})"
        self.finish_restart(text, state)

    def finish_restart(self, text: str, state: State | None) -> None:
        self.pending_reason = None
        self.crash_repro = None
        self.restarts += 1
        self.last_restart_seconds = time.perf_counter() - self.restart_t0
        if state is not None:
            self._router.stateChanged.emit(state)
        elif self.recipe is None:
            self._router.state = None
            self._router.stateChanged.emit(empty_state())
        self._restarted(text)


def _frontend_recipe(state: State) -> dict:
    """How the model was captured and which course map files it used: a replay needs them to
    rebuild a symbolic_trace session (absent for older engines and for IR files); the target
    chosen, if any; which graph of a model cut at its graph breaks was open; and, for a causal LM
    opened for generation, how it was opened and which program was shown."""
    out: dict = {}
    if state.get("capture"):
        out["capture"] = state["capture"]
    if state.get("importer_maps"):
        out["importer_maps"] = list(state["importer_maps"])
    if state.get("target"):  # the passes ran under it: the replayed ones must too
        out["target"] = state["target"]
    if gb := state.get("graph_breaks"):  # the graph of the model's graph breaks that was open
        out["graph"] = int(gb["graph"])
    if gen := state.get("generation"):  # a causal LM opened for generation: opened so again
        out["generation"] = {"pipeline": gen["pipeline"], "tokens": gen["tokens"], "max_len": gen["max_len"],
                             "program": gen["program"]}
    return out
