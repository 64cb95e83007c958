"""Engine: one Workspace, and the protocol's commands bound to their handlers.

The binding rule: protocol command NAME with `on="engine"` is answered by the method NAME of the
one handler object that has it (SessionCommands, BuildCommands, AnalysisCommands,
CatalogueCommands, CodeDiffCommands, PeerCommands, GenerateCommands, GenerateBisectCommands: each given the EngineContext it shares with the others, none
mixed into the Engine), `on="views"` by StepViews.NAME, `on="testing"` by
irviz.engine.testing.NAME (only in an engine started with IRVIZ_TEST_COMMANDS=1), and
`on="loop"` by the request loop itself. No other list of command names exists; a command without
its handler, or with two, stops the engine at start-up.
"""
from __future__ import annotations

import os

from irviz.protocol import commands as protocol
from irviz.engine.views import StepViews
from irviz.core.workspace import Workspace
import irviz.engine.testing as testing
from irviz.engine.analysis import AnalysisCommands
from irviz.engine.build_commands import BuildCommands
from irviz.engine.catalogue_commands import CatalogueCommands
from irviz.engine.code_diff import CodeDiffCommands
from irviz.engine.generate_bisect_commands import GenerateBisectCommands
from irviz.engine.generate_commands import GenerateCommands
from irviz.engine.handler_context import EngineContext
from irviz.engine.peer_commands import PeerCommands
from irviz.engine.session_commands import SessionCommands
from irviz.protocol.commands import BadRequest, Command, Reply, State, clean, error_dict


def command_table(test_commands: bool) -> dict[str, Command]:
    """The commands an engine answers: the protocol's, and the test ones when asked for."""
    return {**protocol.COMMANDS, **(protocol.TEST_COMMANDS if test_commands else {})}


def test_commands_enabled() -> bool:
    return os.environ.get(protocol.TEST_COMMANDS_ENV) == "1"


class Engine:
    """Answers one request at a time."""

    def __init__(self, channel, test_commands: bool | None = None):
        self.channel = channel
        self.ws = Workspace(progress=self.progress)
        self._req_id = None
        self.views = StepViews(self.ws, self.progress)
        self.ctx = EngineContext(self.ws, self.views, self.progress)
        self.session_commands = SessionCommands(self.ctx)
        self.handlers = (self.session_commands, BuildCommands(self.ctx), AnalysisCommands(self.ctx),
                         CatalogueCommands(self.ctx), CodeDiffCommands(self.ctx), PeerCommands(self.ctx),
                         GenerateCommands(self.ctx, self.session_commands.state), GenerateBisectCommands(self.ctx))
        self.table = command_table(test_commands_enabled() if test_commands is None else test_commands)
        self.commands = self._bind(self.table)

    def _bind(self, table: dict[str, Command]) -> dict:
        handlers = {}
        for name, command in table.items():
            if command.on == "loop":
                continue
            owners = {"engine": self.handlers, "views": (self.views,), "testing": (testing,)}[command.on]
            found = [fn for fn in (getattr(o, name, None) for o in owners) if callable(fn)]
            if len(found) != 1:
                what = "no handler" if not found else f"{len(found)} handlers"
                raise TypeError(f"protocol command `{name}` has {what} on {command.on}")
            handlers[name] = found[0]
        return handlers

    @property
    def comparison(self):
        """The last `compare`: its two step lists, for compare_diff."""
        return self.ctx.comparison

    @comparison.setter
    def comparison(self, value) -> None:
        self.ctx.comparison = value

    def state(self) -> State:
        return self.session_commands.state()

    @property
    def session(self):
        return self.ws.session

    def progress(self, text: str, fraction: float | None = None, pass_name: str | None = None) -> None:
        self.channel.send(protocol.progress_message(self._req_id, text, fraction, pass_name))

    def handle(self, req: dict) -> Reply:
        rid, cmd, args = req.get("id"), req.get("cmd"), req.get("args") or {}
        self._req_id = rid
        fn = self.commands.get(cmd) if isinstance(cmd, str) else None
        try:
            if fn is None or not isinstance(cmd, str):
                raise BadRequest(f"Unknown command {cmd!r}")
            if not isinstance(args, dict):
                raise BadRequest("`args` must be an object")
            self.table[cmd].check_args(args)
            return {"id": rid, "ok": True, "result": clean(fn(**args))}
        except BaseException as exc:  # a failing command never kills the loop
            if isinstance(exc, KeyboardInterrupt):
                raise
            reply: Reply = {"id": rid, "ok": False,
                     "error": clean(error_dict(exc, cmd if isinstance(cmd, str) else ""))}
            command = self.table.get(cmd) if isinstance(cmd, str) else None
            if command is not None and command.returns_state and \
                    (self.ws.session is not None or self.ws.import_error is not None):
                try:
                    reply["state"] = clean(self.state())
                except Exception:
                    pass
            return reply
        finally:
            self._req_id = None
