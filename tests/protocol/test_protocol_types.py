"""A command's arguments are Python types, checked at run time: a request whose value is of
another type is a BadRequest naming the argument and the type, before any handler runs."""
from __future__ import annotations

import json
from typing import Any, Literal

import pytest

from irviz.protocol import commands as protocol
from irviz.protocol.commands import COMMANDS, Arg, BadRequest, PassArg
from irviz.protocol.argtypes import matches, type_text


@pytest.mark.parametrize("cmd, args, name, expected", [
    ("jump", {"index": "2"}, "index", "int"),
    ("jump", {"index": True}, "index", "int"),
    ("open", {"spec": 3}, "spec", "str"),
    ("open", {"spec": "sample:mlp", "keep_params": "yes"}, "keep_params", "bool"),
    ("open", {"spec": "sample:mlp", "importer_maps": "a.py"}, "importer_maps", "[str] or null"),
    ("fx_graph", {"fold_depth": "deep"}, "fold_depth", 'int or "auto" or null'),
    ("export", {"out_dir": "o", "steps": [1, "2"]}, "steps", '"all" or [int]'),
    ("set_pipeline", {"passes": [{"params": {}}]}, "passes", "[{name, params?} or str] or null"),
    ("build_run", {"dims": {"n": 2.5}}, "dims", "{str: int} or null"),
    ("intermediates", {"rtol": "1e-3"}, "rtol", "float or null"),
])
def test_a_value_of_the_wrong_type_is_a_bad_request_naming_the_argument_and_type(cmd, args, name, expected):
    with pytest.raises(BadRequest) as info:
        COMMANDS[cmd].check_args(args)
    message = str(info.value)
    assert f"Argument `{name}` of `{cmd}` must be {expected}, not " in message


@pytest.mark.parametrize("cmd, args", [
    ("jump", {"index": 3}),
    ("open", {"spec": "sample:mlp", "importer": None, "importer_maps": ["m.py"], "keep_params": True,
              "graph": None}),
    ("fx_graph", {"fold_depth": "auto", "folded": ["fc1"]}),
    ("fx_graph", {"fold_depth": 2}),
    ("export", {"out_dir": "o", "steps": "all"}),
    ("export", {"out_dir": "o", "steps": [0, 2]}),
    ("set_pipeline", {"passes": [{"name": "FuseOps"}, {"name": "FuseTIR", "params": {}}, "LegalizeOps"]}),
    ("replay", {"spec": "x.py", "applied": [{"name": "A", "params": {"k": 1}}], "cursor": 1}),
    ("build_run", {"step": -1, "dims": {"n": 4}}),
    ("intermediates", {"rtol": 1, "atol": 1e-5}),   # JSON may write a float as an int
    ("write_repro", {"out_dir": "o", "params": {"a": [1]}}),
])
def test_values_of_the_declared_types_pass(cmd, args):
    COMMANDS[cmd].check_args(json.loads(json.dumps(args)))


def test_the_checker_knows_each_shape():
    assert matches(None, int | None) and not matches(None, int)
    assert not matches(True, int) and not matches(False, float) and matches(True, bool)
    assert matches(2, float) and not matches(2.0, int)
    assert matches("all", Literal["all"]) and not matches("al", Literal["all"])
    assert not matches(1, Literal[True]) and matches(True, Literal[True])
    assert matches(("a",), list[str]) and not matches(["a", 1], list[str])
    assert matches({"x": 1}, dict) and not matches([], dict)
    assert matches({"name": "F"}, PassArg) and not matches({"name": 1}, PassArg)
    assert matches({"name": "F", "extra": 1}, PassArg)   # keys it does not declare are the handler's
    assert matches(object(), Any)


def test_the_types_read_as_the_doc_writes_them():
    assert type_text(str | None) == "str or null"
    assert type_text(None | str) == "str or null"   # null last whichever way it was written
    assert type_text(list[str]) == "[str]"
    assert type_text(dict[str, int] | None) == "{str: int} or null"
    assert type_text(dict) == "object"
    assert type_text(list[PassArg | str]) == "[{name, params?} or str]"
    assert type_text(Literal["all"] | list[int]) == '"all" or [int]'


def test_a_type_json_cannot_carry_fails_when_the_table_is_built():
    with pytest.raises(TypeError, match="no JSON shape"):
        Arg("x", set[str])
    for command in (*COMMANDS.values(), *protocol.TEST_COMMANDS.values()):
        for a in command.args:
            if not a.required and a.default != ():
                # a default is a value the request could have sent (a tuple: the empty list)
                assert matches(a.default, a.type), (command.name, a.name, a.default)


def test_the_engine_answers_a_wrong_type_as_a_request_error_before_the_handler():
    pytest.importorskip("tvm")
    from irviz.engine import Engine

    eng = Engine(type("C", (), {"send": lambda self, m: None})())
    reply = eng.handle({"id": 1, "cmd": "jump", "args": {"index": "1"}})
    assert reply["ok"] is False and reply["error"]["stage"] == "request"
    assert reply["error"]["message"] == "Argument `index` of `jump` must be int, not str '1'"
