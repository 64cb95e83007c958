"""Inductor's library convolutions paired with their FX convolutions by the wrapper's data flow and
shapes, and a group whose time would pass the CPU's peak marked unsure.

With freezing, Inductor's provenance can give a downsampling 1x1 convolution the 3x3 beside it (its
pattern rewrites name their nodes fn, fn_1, ...): the 1x1's short time then stands for the 3x3's
work too, a rate several times the CPU's peak. The fast tests read a cut-down wrapper and a
synthetic group; the last compiles a small ResNet-like network (basic blocks with batch norms,
residual adds fused into the convolutions, a downsampling block) with freezing, once."""
from __future__ import annotations

import re
import textwrap

import pytest

from irviz.core.frontend.capture import FxGraph, FxNode
from irviz.core.peer.call_pairing import pair_conv_calls
from irviz.core.peer.output_code import call_sequence, kernel_sources
from irviz.core.peer.plausible import MARGIN, group_flop, implausible
from irviz.core.peer.side_by_side import by_fx_node, summary

CONV, NORM = "aten.convolution.default", "aten._native_batch_norm_legit_no_training.default"


def _n(name, op, target, kind, args, shape, users=()):
    return FxNode(name=name, op=op, target=target, kind=kind, args=list(args), users=list(users), shapes=[shape])


def _block_graph() -> FxGraph:
    """x -> 3x3 conv + bn (no relu) ; x -> 1x1 conv + bn ; add ; relu: a downsampling block's end,
    where both convolutions take 8 channels from the same input."""
    s = (1, 8, 6, 6)
    return FxGraph([
        _n("x", "placeholder", "x", "input", (), (1, 4, 6, 6), ("conv_a", "conv_b")),
        _n("w_a", "placeholder", "w_a", "parameter", (), (8, 4, 3, 3), ("conv_a",)),
        _n("w_b", "placeholder", "w_b", "parameter", (), (8, 4, 1, 1), ("conv_b",)),
        _n("conv_a", "call_function", CONV, "op", ("x", "w_a"), s, ("bn_a",)),
        _n("bn_a", "call_function", NORM, "op", ("conv_a",), s, ("get_a",)),
        _n("get_a", "call_function", "getitem", "op", ("bn_a",), s, ("add",)),
        _n("conv_b", "call_function", CONV, "op", ("x", "w_b"), s, ("bn_b",)),
        _n("bn_b", "call_function", NORM, "op", ("conv_b",), s, ("get_b",)),
        _n("get_b", "call_function", "getitem", "op", ("bn_b",), s, ("add",)),
        _n("add", "call_function", "aten.add.Tensor", "op", ("get_a", "get_b"), s, ("relu",)),
        _n("relu", "call_function", "aten.relu.default", "op", ("add",), s, ("output",)),
        _n("output", "output", "output", "output", ("relu",), s),
    ])


# the wrapper Inductor writes for it with freezing, cut down: the 3x3 first ('none': its batch norm
# folded), then the 1x1 with the add and relu fused, accumulating into the 3x3's output in place
BLOCK_CODE = """
_frozen_param1 = None  # device(type='cpu') torch.float32 (8, 4, 3, 3) (1, 0, 0, 0) 7f00
_frozen_param2 = None  # device(type='cpu') torch.float32 (8, 4, 1, 1) (1, 0, 0, 0) 7f01
_frozen_param3 = None  # device(type='cpu') torch.float32 (8,) (1,) 7f02

class Runner:
    def call(self, args):
        arg0_1, = args
        assert_size_stride(arg0_1, (1, 4, 6, 6), (144, 1, 24, 4))
        # [Provenance debug handles] torch.ops.mkldnn._convolution_pointwise.default:1
        buf0 = torch.ops.mkldnn._convolution_pointwise.default(arg0_1, _frozen_param1, _frozen_param3, [1, 1], [1, 1], [1, 1], 1, 'none', [None], '')
        buf1 = buf0
        assert_size_stride(buf1, (1, 8, 6, 6), (288, 1, 48, 8), 'torch.ops.mkldnn._convolution_pointwise.default')
        del buf0
        # [Provenance debug handles] torch.ops.mkldnn._convolution_pointwise_.binary:2
        torch.ops.mkldnn._convolution_pointwise_.binary(buf1, arg0_1, _frozen_param2, _frozen_param3, [0, 0], [1, 1], [1, 1], 1, 'add', 1.0, 'relu', [None], '')
        return (buf1, )
"""


def test_each_library_convolution_is_paired_with_the_fx_convolution_of_its_weight_and_fused_ops():
    calls = call_sequence(BLOCK_CODE)
    got = pair_conv_calls(BLOCK_CODE, calls, _block_graph(), kernel_sources(BLOCK_CODE))
    assert sorted(got) == [0, 1]
    # the 3x3 computes its convolution and folded batch norm only; the 1x1 the add and relu too
    assert got[0].conv == "conv_a" and got[0].fx_nodes == ["conv_a", "bn_a", "get_a"]
    assert got[1].conv == "conv_b" and got[1].fx_nodes == ["conv_b", "bn_b", "get_b", "add", "relu"]
    assert "(8, 4, 1, 1)" in got[1].note


def test_a_call_whose_shapes_fit_no_fx_convolution_is_left_unpaired():
    code = BLOCK_CODE.replace("(8, 4, 1, 1) (1, 0, 0, 0)", "(8, 4, 5, 5) (1, 0, 0, 0)")
    got = pair_conv_calls(code, call_sequence(code), _block_graph(), kernel_sources(code))
    assert sorted(got) == [0]  # no 5x5 convolution in the graph: no guess


def test_a_group_faster_than_the_peak_is_unsure_and_left_out_of_the_verdicts():
    g = _block_graph()
    flop = group_flop(g, ["conv_a", "conv_b"])
    assert flop == 2 * 8 * 36 * (4 * 9) + 2 * 8 * 36 * 4
    # Inductor's time for the group is the 1x1's alone, 1e-4 ms: 2.9x a peak of 100 GFLOP/s
    tvm = [{"name": "fused_conv_a", "ms": 0.5, "fx_nodes": ["conv_a", "bn_a", "get_a"]},
           {"name": "fused_conv_b_add_relu", "ms": 0.5, "fx_nodes": ["conv_b", "bn_b", "get_b", "add", "relu"]}]
    ind = [{"name": "binary", "ms": 1e-4, "fx_nodes": ["conv_a", "bn_a", "get_a", "conv_b", "bn_b", "get_b", "add",
                                                       "relu"]}]
    rows = by_fx_node(g, tvm, ind, peak_gflops=100.0)
    assert {r["group"] for r in rows} == {"conv_a"}
    assert all(r["unsure"] and r["faster"] is None for r in rows)
    assert rows[0]["unsure"].startswith("Inductor's 0.000 ms for 2.3e-05 GFLOP is 288 GFLOP/s, 2.9x the measured "
                                        "peak (100 GFLOP/s)")
    s = summary(rows)
    assert s["tvm_loses"] == [] and s["tvm_wins"] == [] and s["most_different"] == [] and s["tvm_loses_ms"] == 0
    assert len(s["unsure"]) == 1 and "unsure:" in s["unsure"][0]["text"]
    # the same times at a rate the CPU can reach: judged as before
    ind[0]["ms"] = 0.25
    rows = by_fx_node(g, tvm, ind, peak_gflops=100.0)
    assert all(r["unsure"] is None and r["faster"] == "inductor" for r in rows)


def test_the_exported_report_says_which_groups_are_unsure_and_why():
    from irviz.core.export.peer_files import peer_html

    tvm = [{"name": "fused_conv", "ms": 0.5, "fx_nodes": ["conv_a", "bn_a", "get_a", "conv_b", "bn_b", "get_b",
                                                          "add", "relu"]}]
    ind = [{"name": "binary", "kind": "library", "calls": 1, "ms": 1e-4, "fx_nodes": tvm[0]["fx_nodes"]}]
    rows = by_fx_node(_block_graph(), tvm, ind, peak_gflops=100.0)
    page = peer_html({"kernels": ind, "total_ms": 1e-4, "compiled_ms": 1e-4, "threads": 1, "compile_seconds": 1.0,
                      "attribution": "split", "summary": summary(rows), "by_fx_node": rows})
    assert "<b>Unsure</b>, left out of the above: conv_a..relu (8 nodes)" in page
    assert page.count(">unsure</span>") == len(rows) and "2.9x the measured peak" in page


def test_the_guard_names_the_side_its_rate_and_the_peak():
    why = implausible({"flop": 0.231e9, "tvm_ms": 1.556, "inductor_ms": 0.122}, 235.0)
    assert why.startswith("Inductor's 0.122 ms for 0.231 GFLOP is 1.9 TFLOP/s, 8.1x the measured peak (235 GFLOP/s)")
    assert "TVM" not in why
    assert implausible({"flop": 0.231e9, "tvm_ms": 1.556, "inductor_ms": 1.0}, 235.0) is None
    # 10% over the peak is within its measurement's noise (true mkldnn figures reach 97% of it)
    assert implausible({"flop": 0.231e9, "tvm_ms": 1.556, "inductor_ms": 0.231 / 235 / 1.1 * 1e3}, 235.0) is None
    assert implausible({"flop": None, "tvm_ms": 1.0, "inductor_ms": 1e-9}, 235.0) is None  # shapes unknown: no claim
    assert implausible({"flop": 1e9, "tvm_ms": 1.0, "inductor_ms": 1e-9}, None) is None    # no peak measured


# ------------------------------------------------------------------ a small ResNet, frozen
NET = """
import torch
from torch import nn


class Basic(nn.Module):
    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
        self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class Net(nn.Module):
    def __init__(self, c=32):
        super().__init__()
        self.stem, self.bn = nn.Conv2d(3, c, 3, 1, 1, bias=False), nn.BatchNorm2d(c)
        self.layers = nn.Sequential(Basic(c, c), Basic(c, c), Basic(c, 2 * c, 2), Basic(2 * c, 2 * c))
        self.fc = nn.Linear(2 * c, 5)

    def forward(self, x):
        return self.fc(self.layers(torch.relu(self.bn(self.stem(x)))).mean((2, 3)))


def get_model():
    torch.manual_seed(3)
    m = Net().eval()
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.2, 0.2)
                mod.running_var.uniform_(0.5, 1.5)
    return m, (torch.randn(1, 3, 56, 56),)
"""


@pytest.fixture(scope="module")
def frozen(tmp_path_factory):
    from irviz.core.backend.machine_peak import compute_peak
    from irviz.core.frontend.capture import capture
    from irviz.core.frontend.model_file import load_model
    from irviz.core.peer import peer_report

    path = tmp_path_factory.mktemp("pairing") / "net.py"
    path.write_text(textwrap.dedent(NET).lstrip("\n"))
    captured = capture(load_model(str(path)))
    builds = []
    compile_inductor = peer_report.compile_inductor

    def keep(*a, **k):  # the build's output code holds the frozen weights' shapes
        builds.append(compile_inductor(*a, **k))
        return builds[-1]

    mp = pytest.MonkeyPatch()
    mp.setattr(peer_report, "compile_inductor", keep)
    try:
        report = peer_report.inductor_peer(captured, threads=1, repeats=5, freezing=True)
    finally:
        mp.undo()
    return captured.graph, report, builds[0], compute_peak(1)["gflops"]


def test_frozen_convolution_calls_use_the_weights_of_the_fx_convolutions_they_are_paired_with(frozen):
    graph, report, build, _ = frozen
    assert report["error"] is None
    by = {n.name: n for n in graph.nodes}
    code = build.graphs[0].output_code
    weight_shape = {m.group(1): tuple(int(x) for x in m.group(2).replace(" ", "").split(",") if x)
                    for m in re.finditer(r"^(_frozen_param\d+) = None\s+# \S+ \S+ \(([\d, ]*)\)", code, re.M)}
    convs = [k for k in report["kernels"] if "_convolution_pointwise" in k["name"]]
    assert len(convs) == sum(n.target == CONV for n in graph.nodes) == 10
    paired = set()
    for k in convs:
        mine = [n for n in k["fx_nodes"] if by[n].target == CONV]
        assert len(mine) == 1, (k["name"], k["fx_nodes"])  # one convolution per call, none unmapped
        weight = re.search(r"_frozen_param\d+", k["code"]).group(0)
        assert weight_shape[weight] == tuple(by[by[mine[0]].args[1]].shapes[0]), (k["name"], mine[0])
        paired.add(mine[0])
    assert len(paired) == 10


def test_no_frozen_group_runs_faster_than_the_cpus_peak(frozen):
    graph, report, _, peak = frozen
    assert report["peak_gflops"] and report["summary"]["unsure"] == []
    for g in report["groups"]:
        flop = group_flop(graph, g["fx_nodes"])
        if flop and g["inductor_ms"]:
            assert flop / (g["inductor_ms"] * 1e-3) / 1e9 <= peak * MARGIN, (g["fx_nodes"], g["inductor_kernels"])
        assert g["unsure"] is None


def test_a_softmax_given_to_a_kernel_of_microseconds_is_unsure():
    """BERT's softmax nodes were given by Inductor's provenance to a permute kernel (the softmax runs
    inside the flash-attention call): 196,608 elements in 0.4 µs, the group read as 700x faster."""
    g = FxGraph(nodes=[
        FxNode("s", "placeholder", "s", "input", shapes=[(1, 12, 128, 128)], dtypes=["float32"]),
        FxNode("_softmax", "call_function", "aten._softmax.default", "op", ["s"], shapes=[(1, 12, 128, 128)],
               dtypes=["float32"]),
        FxNode("permute", "call_function", "aten.permute.default", "op", ["_softmax"], shapes=[(1, 128, 12, 128)],
               dtypes=["float32"]),
        FxNode("output", "output", "output", "output", ["permute"])])
    assert group_flop(g, ["_softmax", "permute"]) == 12 * 128 * 128  # an element each; the view nothing
    tvm = [{"name": "fused_softmax", "ms": 0.296, "fx_nodes": ["_softmax"]},
           {"name": "transpose", "ms": 0.01, "fx_nodes": ["permute"]}]
    ind = [{"name": "cpp_fused_clone_permute", "ms": 0.00042, "fx_nodes": ["_softmax", "permute"]}]
    rows = by_fx_node(g, tvm, ind, peak_gflops=230.0)
    assert all(r["unsure"] and r["faster"] is None for r in rows)
    assert "Inductor's 0.000 ms" in rows[0]["unsure"] and "not the ones that computed it" in rows[0]["unsure"]
    ind[0]["ms"] = 0.05  # a time a CPU can do it in: judged
    assert all(r["unsure"] is None for r in by_fx_node(g, tvm, ind, peak_gflops=230.0))
