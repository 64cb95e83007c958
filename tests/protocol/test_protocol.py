"""The protocol module ties the engine, the bridge and the pane tests' fake together. That the
builders (make_state, step_entry, progress_message, error_dict) make what the TypedDicts declare
is mypy's to check (pyproject.toml's [tool.mypy])."""
from __future__ import annotations

import json
import math

import pytest

from irviz.protocol import commands as protocol
from irviz.core.errors import IRImportError, PassError


def _engine(test_commands=False):
    pytest.importorskip("tvm")
    from irviz.engine import Engine

    return Engine(type("C", (), {"send": lambda self, m: None})(), test_commands=test_commands)


def test_every_protocol_command_has_an_engine_handler_and_back():
    eng = _engine()
    # `shutdown` is answered by the loop itself, before a handler is looked up
    loop = {n for n, c in protocol.COMMANDS.items() if c.on == "loop"}
    assert loop == {"shutdown"}
    assert set(eng.commands) == set(protocol.COMMANDS) - loop
    assert set(_engine(test_commands=True).commands) == \
        set(protocol.COMMANDS) - loop | set(protocol.TEST_COMMANDS)


def test_the_table_declares_each_handlers_arguments():
    """Names, order, required or not, and defaults: the table and the handlers agree."""
    import inspect

    eng = _engine(test_commands=True)
    for name, fn in eng.commands.items():
        command = eng.table[name]
        params = list(inspect.signature(fn).parameters.values())
        assert [p.name for p in params] == [a.name for a in command.args], name
        for p, a in zip(params, command.args):
            assert (p.default is inspect.Parameter.empty) == a.required, (name, a.name)
            if not a.required:
                assert p.default == a.default, (name, a.name)


def test_an_unknown_or_missing_argument_is_a_bad_request_naming_it():
    eng = _engine()
    bad = eng.handle({"id": 1, "cmd": "jump", "args": {"index": 1, "idx": 2}})
    err = bad["error"]
    assert bad["ok"] is False and err["stage"] == "request"
    assert "`idx`" in err["message"] and "`jump`" in err["message"] and "`index`" in err["message"]
    err = eng.handle({"id": 2, "cmd": "export", "args": {"steps": "all"}})["error"]
    assert err["stage"] == "request" and "Missing argument `out_dir`" in err["message"]
    assert "`steps`" in err["message"]
    assert eng.handle({"id": 3, "cmd": "ping", "args": {}})["ok"]


def test_crash_exists_only_in_a_test_engine(monkeypatch):
    assert "crash" not in protocol.COMMANDS and "crash" in protocol.TEST_COMMANDS
    monkeypatch.delenv(protocol.TEST_COMMANDS_ENV, raising=False)
    reply = _engine(test_commands=None).handle({"id": 1, "cmd": "crash"})
    assert reply["ok"] is False and reply["error"]["stage"] == "request"
    assert "Unknown command 'crash'" in reply["error"]["message"]
    monkeypatch.setenv(protocol.TEST_COMMANDS_ENV, "1")
    assert "crash" in _engine(test_commands=None).commands


def test_the_docs_command_tables_are_written_from_the_table():
    from irviz.protocol import doc as protocol_doc

    text = protocol_doc.DOC.read_text(encoding="utf-8")
    assert protocol_doc.render(text) == text, "docs/engine_protocol.md is stale: " \
        "run python -m irviz.protocol.doc"
    for c in (*protocol.COMMANDS.values(), *protocol.TEST_COMMANDS.values()):
        row = next(line for line in text.splitlines() if line.startswith(f"| `{c.name}` |"))
        for a in c.args:
            assert f"`{a.name}`" in row, (c.name, a.name)
    for key in protocol.STATE_KEYS:
        assert f"| `{key}`" in text or f", `{key}`" in text, key


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
