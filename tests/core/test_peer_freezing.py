"""torch.compile with Inductor's freezing=True beside TVM: the weights constants, each convolution
one mkldnn call with the batch norm, bias, add and relu Inductor fused into it. Every kernel computes FX
nodes irviz shows, every convolution and batch norm is computed by one, and the weight-layout
copies that joined each convolution's group to the next one's (whole ResNet stages in one group)
are gone, so the groups are smaller than without freezing. Inductor compiles C++ (tens of seconds
per model here): each mode is compiled once per module."""
from __future__ import annotations

import textwrap

import pytest

from irviz.core import passes
from irviz.core.backend.timing import contention
from irviz.core.frontend.capture import FxGraph, FxNode
from irviz.core.peer import inductor_peer, kernel_fx_nodes
from irviz.core.peer.names import feeding_claimed
from irviz.core.peer.side_by_side import kernel_fx_calls
from irviz.core.workspace import Workspace

# a stem with a batch norm and two residual blocks, as a ResNet stage is, at a size where the convolutions' time
# dominates the compiled call's own cost (guards, the Python wrapper, the profiler's events)
STAGE = """
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.a, self.b = nn.Conv2d(c, c, 3, padding=1), nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.b(torch.relu(self.a(x))) + x)


class Stage(nn.Module):
    def __init__(self, c=32):
        super().__init__()
        self.stem, self.norm = nn.Conv2d(3, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.blocks = nn.Sequential(Block(c), Block(c))
        self.fc = nn.Linear(c, 7)

    def forward(self, x):
        y = self.blocks(torch.relu(self.norm(self.stem(x))))
        return self.fc(y.mean((2, 3)))


def get_model():
    torch.manual_seed(1)
    m = Stage().eval()
    with torch.no_grad():
        m.norm.running_mean.uniform_(-0.2, 0.2)
        m.norm.running_var.uniform_(0.5, 1.5)
    return m, (torch.randn(1, 3, 72, 72),)
"""

CONV, NORM = "aten.convolution.default", "aten._native_batch_norm_legit_no_training.default"


@pytest.fixture(scope="module")
def stage(tmp_path_factory):
    path = tmp_path_factory.mktemp("freezing") / "stage.py"
    path.write_text(textwrap.dedent(STAGE).lstrip("\n"))
    ws = Workspace()
    ws.open(str(path), planned=passes.parse_pipeline("zero"))
    ws.run_to_end()
    _, res = ws.build_run(repeats=1)
    tvm = [{"name": k.name, "ms": k.ms, "calls": k.calls} for k in res.kernels]
    fx, calls = kernel_fx_nodes(ws.step_at(), ws.captured.graph), kernel_fx_calls(ws.step_at(), ws.captured.graph)
    frozen = inductor_peer(ws.captured, threads=1, repeats=10, tvm_kernels=tvm, tvm_fx=fx, tvm_calls=calls,
                           freezing=True)
    plain = inductor_peer(ws.captured, threads=1, repeats=3, tvm_kernels=tvm, tvm_fx=fx, tvm_calls=calls,
                          freezing=False)
    return ws, frozen, plain


def _nodes(ws, target):
    return [n.name for n in ws.captured.graph.nodes if n.target == target]


def test_frozen_report_says_its_mode_and_every_kernel_computes_fx_nodes(stage):
    ws, frozen, plain = stage
    assert frozen["error"] is None and plain["error"] is None
    assert frozen["freezing"] is True and plain["freezing"] is False
    assert frozen["options"]["inductor_config"]["freezing"] is True
    assert plain["options"]["inductor_config"]["freezing"] is False
    assert frozen["unmapped_kernels"] == [] and frozen["kernels"]
    names = {n.name for n in ws.captured.graph.nodes}
    for k in frozen["kernels"]:
        assert k["fx_nodes"] and set(k["fx_nodes"]) <= names, k["name"]
    # the convolutions are mkldnn calls with the weights prepacked, not ATen's convolution
    libs = [k["name"] for k in frozen["kernels"] if k["kind"] == "library"]
    assert any("_convolution_pointwise" in n for n in libs) and not any("extern_kernels.convolution" in n for n in libs)


def test_frozen_kernels_compute_every_convolution_and_batch_norm(stage):
    ws, frozen, _ = stage
    computed = {n for k in frozen["kernels"] for n in k["fx_nodes"]}
    convs, norms = _nodes(ws, CONV), _nodes(ws, NORM)
    assert len(convs) == 5 and len(norms) == 1
    assert set(convs + norms) <= computed
    rows = {r["fx_node"]: r for r in frozen["by_fx_node"]}
    for n in convs:  # each convolution has Inductor's time on its row, not None
        assert rows[n]["inductor"]["kernels"] and rows[n]["inductor"]["ms"] is not None


def test_frozen_groups_hold_one_convolution_each_and_are_smaller(stage):
    ws, frozen, plain = stage
    convs = set(_nodes(ws, CONV))

    def most_convs(report):
        return max(len(convs & set(g["fx_nodes"])) for g in report["groups"])

    def largest(report):
        return max(len(g["fx_nodes"]) for g in report["groups"])

    # without freezing, the kernel before each convolution copies its input and weight into
    # Inductor's layout and computes the previous relu too, while TVM fuses each convolution with
    # its bias and relu: the two chain one group through the blocks' convolutions
    assert most_convs(plain) >= 2
    assert most_convs(frozen) == 1
    assert largest(frozen) < largest(plain)
    assert len(frozen["groups"]) > len(plain["groups"])


def test_frozen_kernel_times_add_up_to_the_compiled_call_or_say_why(stage):
    _, frozen, _ = stage
    assert all(k["ms"] is not None and k["ms"] >= 0 for k in frozen["kernels"])
    total, whole = frozen["total_ms"], frozen["compiled_ms"]
    busy = contention(frozen["timing"], frozen["threads"]) or contention(frozen["profiled_timing"], frozen["threads"])
    if busy is None:
        assert abs(total - whole) <= 0.25 * whole, frozen["reason"]
        assert frozen["reliable"] is True
    else:  # another job took the cores: the figures stand, flagged, with the reason
        assert frozen["reliable"] is False and "competed with" in frozen["reason"]


def _graph(*nodes) -> FxGraph:
    return FxGraph([FxNode(name=n, op=op, target=t, kind=kind, args=list(args)) for n, op, t, kind, args in nodes])


def test_ops_feeding_a_claimed_node_join_its_kernels_but_weight_only_ops_do_not():
    g = _graph(("x", "placeholder", "x", "input", ()), ("w", "placeholder", "w", "parameter", ()),
               ("wt", "call_function", "aten.permute.default", "op", ("w",)),
               ("conv", "call_function", CONV, "op", ("x", "wt")),
               ("bn", "call_function", NORM, "op", ("conv",)),
               ("gi", "call_function", "getitem", "op", ("bn",)),
               ("relu", "call_function", "aten.relu.default", "op", ("gi",)),
               ("relu2", "call_function", "aten.relu.default", "op", ("relu",)),
               ("output", "output", "output", "output", ("relu2",)))
    got = feeding_claimed(g, {"relu": {"conv_pointwise"}, "relu2": {"other"}})
    # folded at compile time (weights alone): no kernel at run time; a claimed node stops the walk
    assert got == {"gi": {"conv_pointwise"}, "bn": {"conv_pointwise"}, "conv": {"conv_pointwise"}}


# the wrapper of a frozen stage, cut down: Inductor's provenance gave the stem's convolution
# (handle 2) the last block's post-grad node `fn`, which handle 4 computes
FROZEN_CODE = """
cpp_fused_relu_0 = async_compile.cpp_pybinding(['const float*', 'float*'], r'''
extern "C"  void kernel(const float* in_ptr0,
                       float* out_ptr0)
{ }
''')

class Runner:
    def call(self, args):
        arg9_1, = args
        buf0 = empty_strided_cpu((1, 3, 8, 8), (192, 1, 24, 3), torch.float32)
        # [Provenance debug handles] cpp_fused_relu_0:1
        cpp_fused_relu_0(arg9_1, buf0)
        # [Provenance debug handles] torch.ops.mkldnn._convolution_pointwise.default:2
        buf1 = torch.ops.mkldnn._convolution_pointwise.default(buf0, _frozen_param3, None, 'relu', [None], '')
        # [Provenance debug handles] torch.ops.mkldnn._convolution_pointwise.default:3
        buf3 = torch.ops.mkldnn._convolution_pointwise.default(buf1, _frozen_param4, None, 'relu', [None], '')
        # [Provenance debug handles] torch.ops.mkldnn._convolution_pointwise_.binary:4
        torch.ops.mkldnn._convolution_pointwise_.binary(buf1, buf3, _frozen_param5, None, 'add', 1.0, 'relu', [None], '')
        return (buf1, )
"""


def test_a_post_grad_node_two_library_calls_share_stays_with_the_one_in_its_place():
    from irviz.core.peer.output_code import call_sequence, kernel_sources
    from irviz.core.peer.provenance_fix import fix_provenance

    calls = call_sequence(FROZEN_CODE)
    posts = [["fn_2"], ["fn"], ["fn_1"], ["fn"]]
    place = {"fn_2": 3, "fn_1": 7, "fn": 12}  # the relus' places in the FX graph
    notes = fix_provenance(calls, posts, place.get, kernel_sources(FROZEN_CODE))
    # the stem's call takes the node of the kernel that writes its input (its layout copy)
    assert posts == [["fn_2"], ["fn_2"], ["fn_1"], ["fn"]]
    assert list(notes) == [1] and "cpp_fused_relu_0" in notes[1] and "buf0" in notes[1]


def test_a_kernel_called_for_two_blocks_joins_each_calls_nodes_only():
    from irviz.core.peer.side_by_side import by_fx_node

    g = _graph(("x", "placeholder", "x", "input", ()),
               ("relu", "call_function", "aten.relu.default", "op", ("x",)),
               ("conv", "call_function", CONV, "op", ("relu",)),
               ("add", "call_function", "aten.add.Tensor", "op", ("conv", "relu")),
               ("relu_1", "call_function", "aten.relu.default", "op", ("add",)),
               ("output", "output", "output", "output", ("relu_1",)))
    # one fused add+relu function called twice: the residual edge relu -> add runs between calls
    tvm = [{"name": "fused_add_relu", "ms": 1.0, "fx_nodes": ["relu", "add", "relu_1"],
            "fx_calls": {"relu": "lv0", "add": "lv2", "relu_1": "lv2"}},
           {"name": "conv2d", "ms": 2.0, "fx_nodes": ["conv"], "fx_calls": {"conv": "lv1"}}]
    rows = {r["fx_node"]: r["group"] for r in by_fx_node(g, tvm, [])}
    assert rows == {"relu": "relu", "conv": "conv", "add": "add", "relu_1": "add"}
    tvm[0].pop("fx_calls")  # without the calls, the residual edge joins the two blocks
    assert {r["group"] for r in by_fx_node(g, tvm, [])} == {"relu", "conv"}


def test_a_node_added_to_a_kernel_called_for_several_layers_without_its_call_chains_nothing():
    """BERT's softmax and layer-norm nodes were added to Inductor's per-layer kernels from their
    neighbours' provenance, with no call of their own: joined through them, all 12 layers chained
    into one group. Such a node takes its neighbours' call when they agree on one."""
    from irviz.core.peer.side_by_side import by_fx_node

    g = _graph(("x", "placeholder", "x", "input", ()),
               ("mm", "call_function", "aten.mm.default", "op", ("x",)),
               ("soft", "call_function", "aten._softmax.default", "op", ("mm",)),
               ("perm", "call_function", "aten.permute.default", "op", ("soft",)),
               ("mm_1", "call_function", "aten.mm.default", "op", ("perm",)),
               ("soft_1", "call_function", "aten._softmax.default", "op", ("mm_1",)),
               ("perm_1", "call_function", "aten.permute.default", "op", ("soft_1",)),
               ("output", "output", "output", "output", ("perm_1",)))
    # one kernel called per layer; soft and mm_1 came from neighbours' provenance. soft's
    # neighbour in the kernel is one call's; mm_1 sits between layer 0's perm and layer 1's soft_1
    ind = [{"name": "cpp_fused_softmax_permute", "ms": 1.0, "fx_nodes": ["soft", "perm", "mm_1", "soft_1", "perm_1"],
            "fx_calls": {"perm": "0:1", "soft_1": "0:3", "perm_1": "0:3"}},
           {"name": "mm", "ms": 2.0, "fx_nodes": ["mm"], "fx_calls": {"mm": "0:0"}},
           {"name": "mm#1", "ms": 2.0, "fx_nodes": ["mm_1"], "fx_calls": {"mm_1": "0:2"}}]
    groups = {r["fx_node"]: r["group"] for r in by_fx_node(g, [], ind)}
    assert groups["soft"] == groups["perm"]        # its neighbour's call: one layer, one group
    assert groups["soft_1"] == groups["perm_1"]
    assert groups["perm"] != groups["soft_1"], groups  # not chained through mm_1


BIAS_COPY = """
cpp_fused_1 = async_compile.cpp_pybinding(['float*'], r'''
extern "C"  void kernel(float* out_ptr0)
{ }
''')

class Runner:
    def call(self, args):
        arg9_1, = args
        buf4 = empty_strided_cpu((8, ), (1, ), torch.float32)
        # [Provenance debug handles] cpp_fused_1:1
        cpp_fused_1(buf4)
        # [Provenance debug handles] torch.ops.mkldnn._convolution_pointwise.default:2
        buf5 = torch.ops.mkldnn._convolution_pointwise.default(arg9_1, _frozen_param23, buf4, 'relu', [None], '')
        return (buf5, )
"""


def test_a_kernel_whose_provenance_names_only_a_weight_takes_the_nodes_of_the_call_it_feeds():
    from irviz.core.peer.output_code import call_sequence, kernel_sources
    from irviz.core.peer.provenance_fix import fix_provenance

    calls = call_sequence(BIAS_COPY)
    posts = [["arg4_1"], ["fn"]]  # arg4_1: the convolution's bias, a graph input
    notes = fix_provenance(calls, posts, {"fn": 4}.get, kernel_sources(BIAS_COPY))
    assert posts == [["arg4_1", "fn"], ["fn"]]
    assert list(notes) == [0] and "writes buf4 for torch.ops.mkldnn._convolution_pointwise.default" in notes[0]
