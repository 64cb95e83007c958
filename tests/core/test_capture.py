"""capture(): decomposed export, FxGraph view-model of small_cnn, CaptureError cases."""
from __future__ import annotations

import networkx as nx
import pytest
import torch

from irviz.core.frontend.capture import Captured, FxGraph, FxNode, capture
from irviz.core.errors import CaptureError
from irviz.core.frontend.model_file import load_model


@pytest.fixture(scope="module")
def cnn() -> Captured:
    return capture(load_model("sample:small_cnn"))


def test_captured_program_is_decomposed(cnn):
    assert isinstance(cnn.graph, FxGraph) and cnn.seconds > 0
    targets = {n.target for n in cnn.graph.nodes}
    assert "aten.convolution.default" in targets  # conv2d decomposed to convolution
    assert "aten.conv2d.default" not in targets
    # the FxGraph is exactly the kept program's graph (importer provenance keys match)
    assert [n.name for n in cnn.graph.nodes] == [n.name for n in cnn.exported.graph.nodes]


def test_node_kinds(cnn):
    g = cnn.graph
    kinds = {n.name: n.kind for n in g.nodes}
    assert kinds["x"] == "input"
    assert kinds["p_conv_weight"] == "parameter" and kinds["p_fc_bias"] == "parameter"
    assert kinds["b_bn_running_mean"] == "buffer"
    assert kinds["output"] == "output"
    assert sum(k == "input" for k in kinds.values()) == 1
    assert sum(k == "parameter" for k in kinds.values()) == 6
    assert all(n.kind == "op" for n in g.nodes if n.op == "call_function")


def test_shapes_dtypes_and_modules(cnn):
    g = cnn.graph
    conv = next(n for n in g.nodes if n.target == "aten.convolution.default")
    assert conv.shapes == [(1, 8, 8, 8)] and conv.dtypes == ["float32"]
    assert conv.module_path == "conv" and conv.module_type == "Conv2d"
    assert conv.args[:3] == ["x", "p_conv_weight", "p_conv_bias"]
    assert conv.arg_repr.startswith("(x, p_conv_weight, p_conv_bias")
    assert conv.source.startswith("small_cnn.py:") and "self.conv(x)" in conv.source
    bn = next(n for n in g.nodes if "batch_norm" in n.target)
    assert bn.module_path == "bn" and bn.module_type == "BatchNorm2d"
    assert len(bn.shapes) == 3 and bn.shapes[0] == (1, 8, 8, 8)  # tuple output: one per tensor
    fc = [n for n in g.nodes if n.module_path == "fc"]
    assert fc and all(n.module_type == "Linear" for n in fc)
    assert g.node("output").shapes == [(1, 10)]
    assert g.node("x").shapes == [(1, 3, 8, 8)] and g.node("x").module_path == ""
    getitem = next(n for n in g.nodes if n.target == "getitem")
    assert getitem.arg_repr.endswith(", 0)")


def test_users_args_consistent(cnn):
    g = cnn.graph
    names = {n.name for n in g.nodes}
    for n in g.nodes:
        assert set(n.args) <= names
        for u in n.users:
            assert n.name in g.node(u).args, (n.name, u)
        for a in n.args:
            assert n.name in g.node(a).users, (a, n.name)
    with pytest.raises(KeyError):
        g.node("no_such_node")


def test_networkx(cnn):
    g = cnn.graph
    dg = g.to_networkx()
    assert nx.is_directed_acyclic_graph(dg)
    assert dg.number_of_nodes() == len(g.nodes)
    assert dg.number_of_edges() == sum(len(n.args) for n in g.nodes)
    conv = next(n for n in g.nodes if n.target == "aten.convolution.default")
    assert dg.nodes[conv.name]["module_path"] == "conv"
    assert dg.nodes[conv.name]["shapes"] == [(1, 8, 8, 8)]
    succ = next(iter(dg.successors(conv.name)))
    assert dg.edges[conv.name, succ]["shape"] == (1, 8, 8, 8)
    assert list(nx.topological_sort(dg))[-1] == "output"


def test_nested_module_paths():
    loaded = load_model("sample:gpt")
    g = capture(loaded).graph
    paths = {n.module_path for n in g.nodes}
    assert {"blocks.0.attn", "blocks.1.attn.proj", "blocks.0.ln1", "lm_head"} <= paths
    qkv = [n for n in g.nodes if n.module_path == "blocks.0.attn.qkv"]
    assert qkv and qkv[0].module_type == "Linear"
    mask = g.node("b_blocks_0_attn_mask")
    assert mask.kind == "buffer" and mask.dtypes == ["bool"]
    assert g.node("idx").dtypes == ["int64"]
    assert FxNode.__dataclass_fields__.keys() >= {"name", "op", "target", "kind", "source"}


def test_pt2_capture_uses_exported(tmp_path):
    loaded = load_model("sample:mul_add")
    path = tmp_path / "ma.pt2"
    torch.export.save(torch.export.export(loaded.module, loaded.example_inputs), str(path))
    c = capture(load_model(str(path)))
    targets = [n.target for n in c.graph.nodes if n.kind == "op"]
    assert targets == ["aten.mul.Tensor", "aten.add.Tensor"]
    assert [n.name for n in c.graph.nodes if n.kind == "input"] == ["x", "y"]


def test_dynamic_shapes_symbolic_dims(tmp_model_file):
    p = tmp_model_file("""
        import torch
        def get_model():
            return torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.ReLU()), (torch.randn(4, 3),)
        def get_dynamic_shapes():
            return ({0: torch.export.Dim("batch", min=2, max=64)},)
    """)
    g = capture(load_model(str(p))).graph
    x = next(n for n in g.nodes if n.kind == "input")
    assert isinstance(x.shapes[0][0], str) and x.shapes[0][1] == 3
    assert g.node("output").shapes[0][1] == 5 and isinstance(g.node("output").shapes[0][0], str)


def test_data_dependent_branch_error(tmp_model_file):
    """A branch torch.export cannot decide, in a forward() no fallback captures either (the count
    comes out of NumPy): the error names the guard and the line."""
    p = tmp_model_file("""
        import torch
        class Net(torch.nn.Module):
            def forward(self, x):
                if x.sum() > 0:
                    return x * int(x.numpy().argmax())
                return x - 1
        def get_model():
            return Net(), (torch.ones(2, 3),)
    """, "branchy.py")
    with pytest.raises(CaptureError) as info:
        capture(load_model(str(p)))
    e = info.value
    assert e.stage == "capture" and "torch.export could not capture" in e.message
    assert "1. torch.export (non-strict): data-dependent guard" in e.message
    assert "branchy.py:4 `if x.sum() > 0:` in Net" in e.message
    assert "torch.cond" in e.hint and e.detail


def test_dynamic_shape_constraint_error(tmp_model_file):
    p = tmp_model_file("""
        import torch
        class Net(torch.nn.Module):
            def forward(self, x):
                return x.view(4, 3) * 2
        def get_model():
            return Net(), (torch.randn(4, 3),)
        def get_dynamic_shapes():
            return {"x": {0: torch.export.Dim("batch", min=2, max=64)}}
    """)
    with pytest.raises(CaptureError) as info:
        capture(load_model(str(p)))
    assert "batch" in info.value.message and "get_dynamic_shapes" in info.value.hint
