"""The engine process: `python -m irviz.engine`.

A request loop around one `irviz.core.workspace.Workspace`, speaking the JSON lines of
`irviz.protocol.commands` (docs/engine_protocol.md). `loop` reads requests and writes replies, `dispatch`
binds each command of the protocol's table to its handler, and the handlers are grouped by subject:
`session`, `build`, `analysis`, `catalogue` (and `testing`, only with IRVIZ_TEST_COMMANDS=1).
"""
from irviz.engine.dispatch import Engine
from irviz.engine.loop import Channel, main

__all__ = ["Channel", "Engine", "main"]
