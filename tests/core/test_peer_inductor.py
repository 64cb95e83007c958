"""torch.compile (inductor, CPU) beside TVM: every Inductor kernel is mapped to FX nodes of the graph
irviz shows, its kernels' times add up to the compiled model's (or the report says why not), and the
side-by-side rows cover every FX node that computes. Inductor compiles C++ (tens of seconds per
model here), so each model is compiled once per module."""
from __future__ import annotations

import textwrap

import pytest

from irviz.core import passes
from irviz.core.backend.timing import contention
from irviz.core.peer import inductor_peer, kernel_fx_nodes
from irviz.core.peer.output_code import call_sequence, kernel_sources, profiler_key
from irviz.core.peer.side_by_side import computing_nodes
from irviz.core.workspace import Workspace

# Sizes where the kernels' time (several ms on one thread) dominates the compiled call's own cost
# (Dynamo's guards, the Python wrapper, the profiler's events: a fraction of a ms), so their sum
# can be held to the whole call's.
CNN = """
import torch
from torch import nn


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 64, 3, padding=1)
        self.bn = nn.BatchNorm2d(64)
        self.c2 = nn.Conv2d(64, 64, 3, padding=1)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        y = torch.relu(self.bn(self.c1(x)))
        y = torch.relu(self.c2(y) + y)
        return self.fc(y.mean((2, 3)))


def get_model():
    torch.manual_seed(0)
    m = CNN().eval()
    with torch.no_grad():
        m.bn.running_var.uniform_(0.5, 1.5)
    return m, (torch.randn(1, 3, 96, 96),)
"""

BLOCK = """
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d=256, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, s, d))
        return x + self.down(torch.nn.functional.gelu(self.up(self.ln2(x))))


def get_model():
    torch.manual_seed(0)
    return Block().eval(), (torch.randn(1, 256, 256),)
"""


def _peer(tmp_path_factory, name, source):
    path = tmp_path_factory.mktemp("peer") / f"{name}.py"
    path.write_text(textwrap.dedent(source).lstrip("\n"))
    ws = Workspace()
    ws.open(str(path), planned=passes.parse_pipeline("zero"))
    ws.run_to_end()
    _, res = ws.build_run(repeats=1)
    tvm = [{"name": k.name, "ms": k.ms, "calls": k.calls} for k in res.kernels]
    fx = kernel_fx_nodes(ws.step_at(), ws.captured.graph)
    report = inductor_peer(ws.captured, threads=1, repeats=10, tvm_kernels=tvm, tvm_fx=fx)
    return ws, report


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    return _peer(tmp_path_factory, "cnn", CNN)


@pytest.fixture(scope="module")
def block(tmp_path_factory):
    return _peer(tmp_path_factory, "block", BLOCK)


@pytest.fixture(params=["cnn", "block"])
def model(request):
    return request.getfixturevalue(request.param)


def test_every_inductor_kernel_computes_fx_nodes_irviz_shows(model):
    ws, report = model
    assert report["error"] is None
    names = {n.name: n for n in ws.captured.graph.nodes}
    assert report["kernels"] and report["unmapped_kernels"] == []
    for k in report["kernels"]:
        assert k["fx_nodes"], k["name"]
        assert set(k["fx_nodes"]) <= set(names)
        assert k["calls"] >= 1 and k["code"]
    # every matrix product of the graph is computed by some Inductor kernel (a library call, or a
    # kernel Inductor's pattern matcher made of several nodes, e.g. attention)
    computed = {n for k in report["kernels"] for n in k["fx_nodes"]}
    products = [n.name for n in computing_nodes(ws.captured.graph)
                if n.target in ("aten.addmm.default", "aten.mm.default", "aten.bmm.default",
                                "aten.convolution.default")]
    assert products and set(products) <= computed

def test_generated_kernels_carry_their_cpp_source(cnn):
    _, report = cnn
    gen = [k for k in report["kernels"] if k["kind"] == "generated"]
    assert gen and all('extern "C"' in k["code"] for k in gen)
    convs = [n.name for n in computing_nodes(cnn[0].captured.graph) if n.target == "aten.convolution.default"]
    lib_nodes = {n for k in report["kernels"] if k["kind"] == "library" for n in k["fx_nodes"]}
    assert set(convs) <= lib_nodes  # both convolutions are library calls of their own


def test_kernel_times_add_up_to_the_compiled_call_or_say_why(model):
    _, report = model
    assert all(k["ms"] is not None and k["ms"] >= 0 for k in report["kernels"])
    total, whole = report["total_ms"], report["compiled_ms"]
    assert total == pytest.approx(sum(k["ms"] for k in report["kernels"]), abs=1e-3)
    busy = contention(report["timing"], report["threads"]) or contention(report["profiled_timing"], report["threads"])
    if busy is None:
        assert abs(total - whole) <= 0.25 * whole, report["reason"]
        assert report["reliable"] is True
    else:  # another job took the cores: the figures stand, flagged, with the reason
        assert report["reliable"] is False and "competed with" in report["reason"]


def test_side_by_side_covers_every_computing_fx_node(model):
    ws, report = model
    graph = ws.captured.graph
    rows = report["by_fx_node"]
    assert [r["fx_node"] for r in rows] == [n.name for n in computing_nodes(graph)]
    by = {r["fx_node"]: r for r in rows}
    for k in report["kernels"]:  # each Inductor kernel's nodes show it on their row
        for n in k["fx_nodes"]:
            assert k["name"] in by[n]["inductor"]["kernels"]
    tvm_rows = [r for r in rows if r["tvm"]["kernels"]]
    assert tvm_rows, "no TVM kernel mapped to an FX node"
    for r in rows:
        if r["tvm"]["ms"] is not None and r["inductor"]["ms"] is not None:
            assert r["diff_ms"] == pytest.approx(r["tvm"]["ms"] - r["inductor"]["ms"], abs=1e-4)
    # a fused kernel's time is split among its nodes: the nodes' shares add up to the kernels'
    assert sum(r["inductor"]["ms"] or 0 for r in rows) == pytest.approx(report["total_ms"], rel=1e-3, abs=1e-3)
    # the verdict is per group: whole kernels on both sides, so one side's fusion does not tilt it
    grouped = {n: g for g in report["groups"] for n in g["fx_nodes"]}
    assert set(grouped) == set(by)
    for g in report["groups"]:
        for side in ("tvm", "inductor"):
            inside = [k for k in (report["tvm_kernels"] if side == "tvm" else report["kernels"])
                      if k["name"] in g[f"{side}_kernels"]]
            for k in inside:  # a node and its input computed by one call of a kernel are in one group
                mine = set(k["fx_nodes"]) & set(by)
                calls = k.get("fx_calls") or {}
                for n in mine & set(g["fx_nodes"]):
                    same = {a for a in graph.node(n).args if a in mine and (
                        len(set(calls.values())) <= 1 or a not in calls or n not in calls or calls[a] == calls[n])}
                    assert same <= set(g["fx_nodes"])
        if g["tvm_ms"] is not None and g["inductor_ms"] is not None:
            assert g["faster"] == ("tvm" if g["tvm_ms"] < g["inductor_ms"] else "inductor"
                                   if g["tvm_ms"] > g["inductor_ms"] else "same")
        else:
            assert g["faster"] is None
        assert all(by[n]["faster"] == g["faster"] for n in g["fx_nodes"])
    first = next(n.name for n in computing_nodes(graph)
                 if n.target in ("aten.convolution.default", "aten.addmm.default"))
    assert grouped[first]["tvm_kernels"] and grouped[first]["inductor_kernels"]
    assert grouped[first]["faster"] is not None
    s = report["summary"]
    assert s["most_different"] and all(set(g["fx_nodes"]) <= set(by) for g in s["most_different"])

OUTPUT_CODE = '''
cpp_fused_relu_0 = async_compile.cpp_pybinding(['float*'], r\'\'\'
extern "C" void kernel(float* in_out_ptr0) { }
\'\'\')

class Runner:
    def call(self, args):
        arg0_1, = args
        # Topologically Sorted Source Nodes: [convolution], Original ATen: [aten.convolution]
        # [Provenance debug handles] extern_kernels.convolution:1
        buf9 = empty_strided_cpu((1, ), (1, ), torch.float32)
        buf0 = extern_kernels.convolution(arg0_1, arg0_1, None, stride=(1, 1))
        # [Provenance debug handles] cpp_fused_relu_0:2
        cpp_fused_relu_0(buf0)
        buf1 = torch.ops.mkldnn._convolution_pointwise.default(buf0, arg0_1)
        cpp_fused_relu_0(buf1)
        return (buf1, )
'''


def test_output_code_calls_in_order_with_their_provenance_keys():
    assert kernel_sources(OUTPUT_CODE) == {"cpp_fused_relu_0": 'extern "C" void kernel(float* in_out_ptr0) { }'}
    seq = call_sequence(OUTPUT_CODE)
    assert [(c.kernel, c.handle, c.generated) for c in seq] == [
        ("extern_kernels.convolution", "extern_kernels.convolution:1", False),
        ("cpp_fused_relu_0", "cpp_fused_relu_0:2", True),
        ("cpp_fused_relu_0", None, True)]  # called without provenance: kept, not dropped
    assert [profiler_key(c) for c in seq] == ["convolution", "cpp_fused_relu_0", "cpp_fused_relu_0"]
