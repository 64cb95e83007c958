"""`generate_bisect` asks for a model open for generation (the GUI test runs a real one)."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("tvm")

import irviz.engine as engine_mod


class _Chan:
    def send(self, msg):
        json.dumps(msg)


def test_generate_bisect_without_a_generation_open_says_what_to_open():
    e = engine_mod.Engine(_Chan())
    reply = e.handle({"id": 1, "cmd": "generate_bisect", "args": {"step": 1}})
    assert reply["ok"] is False
    assert "open a causal LM for generation" in reply["error"]["message"]
