"""graph.py: relax_digraph, tir_functions, relax_functions, call_graph, fx_digraph."""
from __future__ import annotations

import networkx as nx
import pytest
import torch
import tvm
from torch import nn
from tvm import relax

from irviz.core.views import graph
from irviz.core.frontend.capture import capture
from irviz.core.frontend.importer import import_model
from irviz.core.frontend.model_file import LoadedModel
from irviz.core.tvm_compat import I, R, T


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, padding=1)
        self.fc = nn.Linear(3 * 4 * 4, 4)

    def forward(self, x):
        return self.fc(torch.flatten(torch.relu(self.conv(x)), 1))


@pytest.fixture(scope="module")
def imported():
    torch.manual_seed(0)
    m = Small().eval()
    cap = capture(LoadedModel(module=m, example_inputs=(torch.randn(1, 2, 4, 4),), spec="s",
                              name="s"))
    return cap, import_model(cap)


@pytest.fixture(scope="module")
def fused(imported):
    _, imp = imported
    seq = tvm.transform.Sequential([
        relax.transform.LegalizeOps(),
        relax.transform.AnnotateTIROpPattern(),
        relax.transform.FoldConstant(),
        relax.transform.FuseOps(),
    ])
    return seq(imp.mod)


def _bindings(f):
    return [b for blk in f.body.blocks for b in blk.bindings]


def test_fx_digraph(imported):
    cap, _ = imported
    g = graph.fx_digraph(cap.graph)
    assert set(g.nodes) == {n.name for n in cap.exported.graph.nodes}


def test_relax_digraph_of_import(imported):
    _, imp = imported
    f = imp.mod["main"]
    g = graph.relax_digraph(imp.mod)
    assert nx.is_directed_acyclic_graph(g)
    kinds = nx.get_node_attributes(g, "kind")
    n_bind, n_param = len(_bindings(f)), len(f.params)
    n_const = sum(1 for k in kinds.values() if k == "const")
    assert len(g) == n_bind + n_param + 1 + n_const
    assert sum(1 for k in kinds.values() if k == "output") == 1
    assert {kinds[v] for v in ("x",)} == {"param"}
    conv = [n for n, d in g.nodes(data=True) if d["op"] == "relax.nn.conv2d"]
    assert len(conv) == 1 and g.nodes[conv[0]]["label"] == "conv2d"
    assert g.nodes[conv[0]]["shape"] == (1, 3, 4, 4) and g.nodes[conv[0]]["dtype"] == "float32"
    assert g.edges["x", conv[0]]["shape"] == (1, 2, 4, 4)
    # the output node is fed by main's result
    assert g.in_degree("output") == 1
    for _, d in g.nodes(data=True):
        assert d["kind"] in graph.KINDS and "label" in d and "group" in d and "callee" in d


def test_relax_digraph_after_fusion(fused):
    g = graph.relax_digraph(fused)
    kinds = {d["kind"] for _, d in g.nodes(data=True)}
    assert "call_fused" in kinds
    fused_nodes = [d for _, d in g.nodes(data=True) if d["kind"] == "call_fused"]
    for d in fused_nodes:
        assert d["group"] == d["callee"] and d["callee"] in graph.relax_functions(fused)
        assert d["label"] == f"call {d['callee']}"
    after_tir = relax.transform.FuseTIR()(fused)
    g2 = graph.relax_digraph(after_tir)
    calls = [d for _, d in g2.nodes(data=True) if d["kind"] == "call_tir"]
    assert calls and all(d["label"] == f"call_tir {d['callee']}" for d in calls)
    assert all(isinstance(after_tir[d["callee"]], tvm.tirx.PrimFunc) for d in calls)
    # after CallTIRRewrite the PrimFuncs are called directly (destination passing)
    lowered = tvm.transform.Sequential([relax.transform.ToNonDataflow(),
                                        relax.transform.RemovePurityChecking(),
                                        relax.transform.CallTIRRewrite()])(after_tir)
    g4 = graph.relax_digraph(lowered)
    direct = [d for _, d in g4.nodes(data=True) if d["kind"] == "call_tir"]
    assert {d["callee"] for d in direct} == {d["callee"] for d in calls}
    assert any("alloc_tensor" in d["label"] for _, d in g4.nodes(data=True))
    # expanded: the bindings inside the fused functions, grouped by function name
    g3 = graph.relax_digraph(fused, expand_fused=True)
    groups = {d["group"] for _, d in g3.nodes(data=True) if d["group"]}
    assert groups == {d["callee"] for d in fused_nodes}
    assert nx.is_directed_acyclic_graph(g3) and g3.in_degree("output") == 1
    assert "x" in g3 and any(g3.has_edge("x", s) for s in g3.successors("x"))


def test_tir_functions_after_legalize(imported):
    _, imp = imported
    mod = relax.transform.LegalizeOps()(imp.mod)
    funcs = {f["name"]: f for f in graph.tir_functions(mod)}
    conv = [f for n, f in funcs.items() if n.startswith("conv2d")][0]
    assert conv["signature"].startswith("(") and 'T.Buffer((1, 2, 4, 4), "float32")' in conv["signature"]
    assert any(s.startswith("  ") for s in conv["loops"])  # nested loops are indented
    assert conv["loops"][0].endswith("(serial)") and " in " in conv["loops"][0]
    assert "conv2d_nchw" in conv["blocks"]
    assert max(lp["depth"] for lp in conv["loop_nest"]) >= 3


def test_tir_functions_scalar_params_and_kinds():
    @T.prim_func(s_tir=True)
    def f(a: T.handle, n: T.int64):
        A = T.match_buffer(a, (n, 4), "float32")
        for i in T.parallel(n):
            for j in T.vectorized(4):
                with T.sblock("b"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    A[vi, vj] = A[vi, vj] + T.float32(1)

    (info,) = graph.tir_functions(tvm.IRModule({"f": f}))
    assert info["signature"] == '(A: T.Buffer((n, 4), "float32"), n: T.int64)'
    assert info["loops"] == ["i in n (parallel)", "  j in 4 (vectorized)"]
    assert info["blocks"] == ["b"]


def test_relax_functions_and_call_graph(fused):
    names = graph.relax_functions(fused)
    assert names[0] == "main" and len(names) > 1
    cg = graph.call_graph(fused)
    callees = set(cg.successors("main"))
    assert set(names[1:]) <= callees  # fused relax functions (+ unfused call_tir PrimFuncs)
    assert all(cg.nodes[c]["kind"] == "tir" for c in callees - set(names))
    for name in names[1:]:
        assert cg.nodes[name]["primitive"]
        assert all(cg.nodes[t]["kind"] == "tir" for t in cg.successors(name))


def test_relax_digraph_control_flow_and_symbolic_shapes():
    @I.ir_module
    class Mod:
        @R.function
        def main(x: R.Tensor(("n", 4), "float32"), c: R.Tensor((), "bool")):
            n = T.int64()
            with R.dataflow():
                a = R.add(x, x)
                t = (a, x)
                b = t[0]
                R.output(b)
            y = R.match_cast(b, R.Tensor((n, 4), "float32"))
            if c:
                z = R.multiply(y, y)
                r = z
            else:
                r = y
            return (r, y)

    g = graph.relax_digraph(Mod)
    assert g.nodes["x"]["shape"] == ("n", 4)
    assert g.nodes["t"]["kind"] == "tuple" and g.nodes["b"]["kind"] == "get_item"
    assert g.nodes["y"]["op"] == "match_cast"
    assert g.nodes["r"]["op"] == "if" and g.has_edge("c", "r") and g.has_edge("y", "r")
    assert set(g.predecessors("output")) == {"r", "y"}
    assert g.nodes["output"]["dtype"] == "tuple"
