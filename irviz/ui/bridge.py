"""EngineBridge: the GUI's only line to the compiler.

Starts `python -m irviz.engine` under QProcess and speaks JSON lines to it (docs/engine_protocol.md).
Never imports torch or TVM, never blocks the GUI thread: replies arrive through Qt signals.

    bridge = EngineBridge()
    bridge.stateChanged.connect(view.show_state)
    rid = bridge.request("open", spec="sample:mlp", pipeline="zero")
    bridge.request("relax_graph", step=3)          # a newer relax_graph drops the older reply

Its two jobs live in two modules: :mod:`irviz.ui.request_routing` (ids, supersede groups, replies
turned into signals) and :mod:`irviz.ui.engine_process` (start, restart after a crash, replay the
session, cancel). This module is the name the window and the tests import.
"""
from __future__ import annotations

# the routing's tables are the protocol's (tests/core/test_protocol.py checks they are the same objects)
from irviz.protocol.commands import DEFAULT_SUPERSEDE, STATE_CMDS
from irviz.ui.engine_process import EngineBridge

__all__ = ["EngineBridge", "STATE_CMDS", "DEFAULT_SUPERSEDE"]
