"""symbolic_trace capture and the course's from_fx with call_function_map / call_module_map files:
the FX graph as print_tabular shows it, map files with the course's signatures, provenance of
call_module nodes, and the errors for a missing map entry, a raising map function and bad choices."""
from __future__ import annotations

import json

import pytest

from irviz.cli.main import main
from irviz.core.errors import IRImportError, LoadError
from irviz.core.frontend.capture import capture
from irviz.core.frontend.model_file import load_model
from irviz.core.workspace import Workspace

MODEL = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear0 = nn.Linear(16, 8)
        self.relu = nn.ReLU()
        self.weight = nn.Parameter(torch.randn(8, 4))

    def forward(self, x):
        y = self.relu(self.linear0(x))
        y = torch.matmul(y, self.weight)
        return torch.relu(y) + 1.0


def get_model():
    torch.manual_seed(0)
    return Net(), (torch.randn(2, 16),)
"""

# the course's signatures: fn(bb, node_map, node) and fn(bb, node_map, node, nn_mod)
MAP_FILE = """
import torch
from torch import nn
from tvm import relax


def map_matmul(bb, node_map, node):
    return bb.emit(relax.op.matmul(node_map[node.args[0]], node_map[node.args[1]]))


def map_nn_relu(bb, node_map, node, nn_mod):
    return bb.emit(relax.op.nn.relu(node_map[node.args[0]]))


call_function_map = {torch.matmul: map_matmul}
call_module_map = {nn.ReLU: map_nn_relu}
"""


@pytest.fixture
def model(tmp_model_file):
    return tmp_model_file(MODEL)


@pytest.fixture
def map_file(tmp_model_file):
    return tmp_model_file(MAP_FILE, "course_map.py")


def test_symbolic_trace_shows_call_module_nodes_with_target_args_and_shapes(model):
    cap = capture(load_model(str(model)), "symbolic_trace")
    assert cap.method == "symbolic_trace" and cap.exported is None and cap.fx_module is not None
    nodes = {n.name: n for n in cap.graph}
    assert [n.op for n in cap.graph] == ["placeholder", "call_module", "call_module", "get_attr",
                                         "call_function", "call_function", "call_function", "output"]
    lin = nodes["linear0"]
    assert (lin.op, lin.target, lin.module_type, lin.module_path) == ("call_module", "linear0", "Linear", "linear0")
    assert lin.args == ["x"] and lin.arg_repr == "(x)"
    assert lin.shapes == [(2, 8)] and lin.dtypes == ["float32"]  # from ShapeProp
    mm = nodes["matmul"]
    assert mm.target == "torch.matmul" and mm.args == ["relu", "weight"] and mm.shapes == [(2, 4)]
    assert nodes["add"].target == "operator.add" and nodes["add"].arg_repr == "(relu_1, 1.0)"
    assert nodes["weight"].kind == "parameter" and nodes["x"].kind == "input"
    assert nodes["output"].shapes == [(2, 4)]
    assert lin.source.startswith("model.py:") and "linear0" in lin.source


def test_map_file_with_course_signatures_builds_and_passes_check(model, map_file, capsys):
    code = main(["check", str(model), "--importer", "course", "--importer-map", str(map_file),
                 "--json", "-", "--repeats", "1"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["ok"], summary["error"]
    assert (summary["capture"], summary["importer"]) == ("symbolic_trace", "course")
    assert summary["allclose"] is True and summary["max_abs_error"] < 1e-4


def test_map_file_entries_override_the_builtin_map_and_provenance_links_call_modules(model, map_file):
    ws = Workspace()
    ws.open(str(model), importer_maps=[str(map_file)])
    assert ws.capture == "symbolic_trace" and ws.importer == "course"
    main_fn = ws.imported.mod["main"]
    values = {b.var.name: b.value for blk in main_fn.body.blocks for b in blk.bindings}
    text = ws.imported.mod.script()
    # the map file's high-level ops, the built-in TE maps for the rest
    assert "R.nn.relu" in text and "R.matmul" in text and "cls.dense" in text
    prov = ws.imported.provenance
    linear = prov["linear0"]
    assert len(linear) == 2  # nn.Linear: TE dense then add, two call_tir bindings
    assert [values[v].args[0].name_hint for v in linear] == ["dense", "add"]
    assert [values[v].op.name for v in prov["relu"]] == ["relax.nn.relu"]
    assert [values[v].op.name for v in prov["matmul"]] == ["relax.matmul"]
    assert prov["x"] == ["x"]


def test_builtin_course_map_alone(model):
    ws = Workspace()
    ws.open(str(model), capture="symbolic_trace")
    text = ws.imported.mod.script()
    assert "R.nn.relu" not in text and "cls.te_matmul" in text and "cls.te_relu" in text
    assert len(ws.imported.provenance["linear0"]) == 2


def test_node_without_map_entry_names_node_target_and_dict(tmp_model_file, capsys):
    model = tmp_model_file("""
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.norm = nn.LayerNorm(8)

            def forward(self, x):
                return torch.exp(self.norm(x))

        def get_model():
            return Net(), (torch.randn(2, 8),)
        """)
    ws = Workspace()
    with pytest.raises(IRImportError) as info:
        ws.open(str(model), capture="symbolic_trace")
    err = info.value
    assert err.node == "norm" and "torch.nn.LayerNorm" in err.message and "call_module_map" in err.message
    assert "call_module_map = {torch.nn.LayerNorm: my_fn}" in err.hint and "--importer-map" in err.hint
    assert ws.captured is not None and ws.import_error is err  # the FX graph stays viewable

    map_file = tmp_model_file("""
        import torch
        from tvm import relax

        def map_norm(bb, node_map, node, nn_mod):
            return bb.emit(relax.op.nn.relu(node_map[node.args[0]]))

        call_module_map = {torch.nn.LayerNorm: map_norm}
        """, "norm_map.py")
    code = main(["check", str(model), "--importer-map", str(map_file), "--repeats", "1"])
    err_text = capsys.readouterr().err
    assert code == 1
    assert 'FX node "exp"' in err_text and "torch.exp" in err_text and "call_function_map" in err_text


def test_map_function_that_raises_names_the_fx_node_and_line(model, tmp_model_file, capsys):
    bad = tmp_model_file("""
        import torch

        def map_linear(bb, node_map, node, nn_mod):
            raise ValueError("not today")

        call_module_map = {torch.nn.Linear: map_linear}
        """, "bad_map.py")
    code = main(["check", str(model), "--importer-map", str(bad), "--repeats", "1"])
    err = capsys.readouterr().err
    assert code == 1
    assert 'FX node "linear0"' in err and "ValueError: not today" in err
    assert "bad_map.py:4" in err and "call_module_map[torch.nn.Linear]" in err


def test_bad_choices_and_bad_map_files_are_clear(model, map_file, tmp_model_file, capsys):
    assert main(["check", str(model), "--capture", "symbolic_trace", "--importer", "exported_program"]) == 1
    err = capsys.readouterr().err
    assert "reads torch.export graphs" in err and "--importer course" in err
    assert main(["check", str(model), "--capture", "export", "--importer-map", str(map_file)]) == 1
    assert "--capture symbolic_trace" in capsys.readouterr().err

    empty = tmp_model_file("x = 1\n", "empty_map.py")
    with pytest.raises(LoadError, match="defines neither call_function_map nor call_module_map"):
        Workspace().open(str(model), importer_maps=[str(empty)])
    wrong_key = tmp_model_file("call_module_map = {'Linear': print}\n", "key_map.py")
    with pytest.raises(LoadError, match="not an nn.Module class"):
        Workspace().open(str(model), importer_maps=[str(wrong_key)])


def test_model_file_chooses_symbolic_trace_and_replay_keeps_it(tmp_model_file, map_file):
    model = tmp_model_file(MODEL + '\nIRVIZ_CAPTURE = "symbolic_trace"\n')
    ws = Workspace()
    ws.open(str(model))
    assert (ws.capture, ws.importer) == ("symbolic_trace", "course")
    ws2 = Workspace()
    ws2.replay(str(model.parent / "model.py"), "course", capture="symbolic_trace",
               importer_maps=[str(map_file)])
    assert ws2.importer_maps == [str(map_file)] and "R.matmul" in ws2.imported.mod.script()
