"""The pane tests' fake bridge checks what the panes send as the engine would: names and types,
after the JSON encoding of the real bridge's request line."""
from __future__ import annotations

import pytest
from fake_bridge import FakeBridge

from irviz.protocol.commands import BadRequest


def test_the_fake_bridge_refuses_an_argument_of_the_wrong_type(qtbot):
    bridge = FakeBridge()
    with pytest.raises(BadRequest, match=r"Argument `index` of `jump` must be int, not str '2'"):
        bridge.request("jump", index="2")
    with pytest.raises(BadRequest, match="Unknown argument `idx`"):
        bridge.request("jump", idx=2)
    assert bridge.sent == []


def test_the_fake_bridge_takes_what_json_would_carry(qtbot):
    bridge = FakeBridge()
    # a tuple goes out as a JSON list, as the real bridge's request line writes it
    bridge.request("fx_graph", folded=("fc1",), fold_depth="auto")
    bridge.request("open", spec="sample:mlp")
    with qtbot.waitSignal(bridge.stateChanged, timeout=3000):
        pass
    assert [c for c, _ in bridge.sent] == ["fx_graph", "open"]
