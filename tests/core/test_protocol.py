"""The protocol module ties the engine, the bridge and the pane tests' fake together."""
from __future__ import annotations

import json
import math

import pytest

from irviz import protocol
from irviz.core.errors import IRImportError, PassError


def test_every_protocol_command_has_an_engine_handler_and_back():
    pytest.importorskip("tvm")
    from irviz.engine import Engine

    eng = Engine(type("C", (), {"send": lambda self, m: None})())
    # `shutdown` is answered by the loop itself, before a handler is looked up
    assert set(eng.commands) == set(protocol.COMMANDS) - {"shutdown"}


def test_bridge_takes_its_tables_from_the_protocol():
    pytest.importorskip("PySide6")
    from irviz.ui import bridge

    assert bridge.STATE_CMDS is protocol.STATE_CMDS
    assert bridge.DEFAULT_SUPERSEDE is protocol.DEFAULT_SUPERSEDE
    assert protocol.DEFAULT_SUPERSEDE == {"relax_graph", "diff"}
    assert {"open", "step", "replay", "reimport"} <= protocol.STATE_CMDS
    assert "build_run" not in protocol.STATE_CMDS


def test_state_has_one_shape_empty_or_not():
    full = protocol.make_state(model="m", spec="sample:m", importer="exported_program", cursor=1,
                               steps=[protocol.step_entry(0, "import", {}, 0.1, True)],
                               planned=[protocol.invocation("FuseOps")])
    assert set(full) == set(protocol.empty_state()) == protocol.STATE_KEYS
    assert protocol.empty_state()["steps"] == [] and protocol.empty_state()["model"] is None
    with pytest.raises(TypeError):
        protocol.make_state(no_such_field=1)


def test_progress_names_the_pass_apart_from_the_text():
    msg = protocol.progress_message(3, "Applying FuseOps (2/5)", 1.7, pass_name="FuseOps")
    assert msg == {"id": 3, "progress": "Applying FuseOps (2/5)", "fraction": 1.0, "pass": "FuseOps"}
    assert "pass" not in protocol.progress_message(3, "Loading")


def test_error_dict_of_an_irviz_error_keeps_stage_hint_node_and_op():
    err = protocol.error_dict(IRImportError("no converter", "add one", node="erfinv",
                                            op="aten.erfinv.default"))
    assert (err["stage"], err["message"], err["hint"], err["node"], err["op"]) == \
        ("import", "no converter", "add one", "erfinv", "aten.erfinv.default")
    assert protocol.error_dict(PassError("boom"))["stage"] == "pipeline"


def test_an_unexpected_exception_gets_its_commands_stage_and_a_trimmed_message():
    long = RuntimeError("\n".join(f"line {i}" for i in range(100)))
    err = protocol.error_dict(long, "build_run")
    assert err["stage"] == "build" and err["message"].startswith("RuntimeError: ")
    assert "line 99" in err["message"] and "line 10\n" not in err["message"]
    assert protocol.error_dict(ValueError("x"), "no_such_cmd")["stage"] == "engine"
    assert protocol.error_dict(ValueError("x"), "open")["stage"] == "load"


def test_clean_and_json_default_make_strict_json():
    import numpy as np

    obj = protocol.clean({"a": math.nan, "b": [1.0, math.inf], 3: (np.float32(2.5),)})
    text = json.dumps(obj, default=protocol.json_default, allow_nan=False)
    assert json.loads(text) == {"a": None, "b": [1.0, None], "3": [2.5]}
