"""The session's recipe and its replay: what the bridge keeps of the last state it saw (spec,
importer, applied and planned passes, cursor, target), and what happens once a restarted engine has
replayed it (the state re-emitted, the repro folder of what killed the old engine, the message)."""
from __future__ import annotations

import tempfile
import time

from irviz.protocol.commands import empty_state
from irviz.ui.request_routing import Request, RequestRouter


class SessionReplay(RequestRouter):
    """The replay half of :class:`irviz.ui.engine_process.EngineBridge`, which starts the engines."""

    def _on_replay_reply(self, ok: bool, msg: dict, state: dict | None) -> None:
        reason = self._pending_reason or "The engine restarted."
        if ok and state is not None:
            self._replay_failures = 0
            self._take_state(state)
            text = f"{reason} Restarted and replayed to step {state.get('cursor', 0)}."
            if self._crash_repro is not None:
                self._request_crash_repro(text, state)
                return
            self._finish_restart(text, state)
        elif state is not None and state.get("import_error"):
            # the session was captured but did not import before either: that is where we were
            self._replay_failures = 0
            self._take_state(state)
            self._finish_restart(f"{reason} Restarted; the model is captured again but its import "
                                 "still fails.", state)
        else:
            err = msg.get("error") or {}
            self._recipe = None
            if state is not None:
                self._take_state(state)
            self._finish_restart(f"{reason} Restarted, but replaying the session failed: "
                                 f"{err.get('message', 'unknown error')}", state)

    def _request_crash_repro(self, text: str, state: dict) -> None:
        """Ask the new engine (the GUI has no TVM) to write the repro folder of what killed the old
        one; the restart is announced once it answers, with where the folder is."""
        what, self._crash_repro = self._crash_repro, None
        try:
            out = tempfile.mkdtemp(prefix="irviz-crash-repro-")
        except OSError:
            self._finish_restart(text, state)
            return
        args = {"out_dir": out, "reason": text, **what}
        self._repro_text, self._repro_state = text, state   # announced once the folder is written
        self._send(Request(self._new_id(), "write_repro", args, internal=True))

    def _on_repro_reply(self, ok: bool, msg: dict) -> None:
        state, text = self._repro_state, self._repro_text
        self._repro_state = None
        if ok:
            path = (msg.get("result") or {}).get("path")
            text += f" Repro folder: {path} (python {path}/repro.py)."
        else:
            text += f" (No repro folder: {(msg.get('error') or {}).get('message', 'unknown error')})"
        self._finish_restart(text, state)

    def _finish_restart(self, text: str, state: dict | None) -> None:
        self._pending_reason = None
        self._crash_repro = None
        self._restarts += 1
        self.last_restart_seconds = time.perf_counter() - self._restart_t0
        if state is not None:
            self.stateChanged.emit(state)
        elif self._recipe is None:
            self._state = None
            self.stateChanged.emit(empty_state())
        self.engineRestarted.emit(text)

    def _take_state(self, state: dict) -> None:
        super()._take_state(state)
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
        self._recipe = {
            "spec": state["spec"],
            "importer": state.get("importer") or "exported_program",
            "keep_params": bool(state.get("keep_params")),
            "no_weights": bool(state.get("structure_only")),
            "applied": applied,
            "planned": [{"name": p["name"], "params": p.get("params") or {}} for p in state.get("planned") or []],
            "cursor": cursor,
            **_frontend_recipe(state),
        }

    def _describe_recipe(self) -> str:
        r = self._recipe
        if not r:
            return "the session"
        return f"{r['spec']} to step {r['cursor']}"


def _frontend_recipe(state: dict) -> dict:
    """How the model was captured and which course map files it used: a replay needs them to
    rebuild a symbolic_trace session (absent for older engines and for IR files); the target
    chosen, if any; and which graph of a model cut at its graph breaks was open."""
    out = {}
    if state.get("capture"):
        out["capture"] = state["capture"]
    if state.get("importer_maps"):
        out["importer_maps"] = list(state["importer_maps"])
    if state.get("target"):  # the passes ran under it: the replayed ones must too
        out["target"] = state["target"]
    if state.get("graph_breaks"):  # the graph of the model's graph breaks that was open
        out["graph"] = int(state["graph_breaks"]["graph"])
    return out
