"""Intermediates find each FX node's value through provenance (binding ids), not binding names:
after FuseOps an unfused op (a flatten) and the fused call after it are both bound to ``lv``, and
the comparison must still take each node's own value, name the kernel a fused-away node is in and
give the verdict at that kernel's output. Models with random weights (fixed seed), imported by the
course importer with a module map file and by torch.export, then fused, FuseTIR'd and lowered."""
from __future__ import annotations

from pathlib import Path

import pytest

from irviz.core import passes
from irviz.core.backend.build import DEFAULT_BUILD_PASSES
from irviz.core.backend.intermediates import compare_intermediates
from irviz.core.tvm_compat import var_name
from irviz.core.workspace import Workspace

WRONG_PASS = Path(__file__).resolve().parents[2] / "examples" / "subtract_one_add.py"
FUSE = "LegalizeOps,AnnotateTIROpPattern,FuseOps,FuseTIR"
LOWERED = FUSE + "," + ",".join(DEFAULT_BUILD_PASSES)

# an image classifier's head: flatten, then Linear/ReLU/Linear (the first two fuse, flatten does not)
MLP = """
import torch
from torch import nn


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.flat = nn.Flatten()
        self.hidden = nn.Linear(144, 24)
        self.act = nn.ReLU()
        self.out = nn.Linear(24, 5)

    def forward(self, x):
        return self.out(self.act(self.hidden(self.flat(x))))


def get_model():
    torch.manual_seed(3)
    return Head().eval(), (torch.randn(2, 1, 12, 12),)
"""

# the chapter's call_module_map, as a learner writes it in a map file
MODULE_MAP = """
from torch import nn
from tvm import relax, te, topi


def map_param(param):
    return relax.const(param.data.cpu().numpy(), "float32")


def map_nn_linear(bb, node_map, node, nn_mod):
    x = node_map[node.args[0]]
    y = bb.emit_te(topi.nn.dense, x, map_param(nn_mod.weight))
    return bb.emit_te(topi.add, y, map_param(nn_mod.bias))


def te_relu(A):
    return te.compute(A.shape, lambda *i: te.max(A(*i), 0.0), name="relu")


def map_nn_relu(bb, node_map, node, nn_mod):
    return bb.emit_te(te_relu, node_map[node.args[0]])


call_module_map = {nn.Linear: map_nn_linear, nn.ReLU: map_nn_relu}
"""

# a tuple-valued op between a fused group and two library matmuls
SPLIT = """
import torch
from torch import nn


class Split(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(96, 16) * 0.1)
        self.left = nn.Linear(8, 4)
        self.right = nn.Linear(8, 4)

    def forward(self, x):
        h = torch.relu(torch.flatten(x, 1) @ self.w)
        a, b = torch.chunk(h, 2, dim=1)
        return self.left(a) * self.right(b)


def get_model():
    torch.manual_seed(5)
    return Split().eval(), (torch.randn(3, 6, 16),)
"""


# eval-mode Dropout and Identity: FX nodes whose value is their input's, on their input's binding
PASS_THROUGH = """
import torch
from torch import nn


def get_model():
    torch.manual_seed(7)
    net = nn.Sequential(nn.Flatten(), nn.Linear(27, 8), nn.Dropout(0.5), nn.ReLU(), nn.Identity(),
                        nn.Linear(8, 2))
    return net.eval(), (torch.randn(4, 3, 3, 3),)
"""


def _open(path, pipeline, **kw) -> Workspace:
    ws = Workspace()
    ws.open(str(path), planned=passes.parse_pipeline(pipeline), **kw)
    ws.run_to_end()
    return ws


def _step(ws, pass_name):
    return next(s for s in ws.session.steps if s.pass_name == pass_name)


def _rows(ws, step):
    res = compare_intermediates(step, ws.captured, params=ws.kept_params)
    return res, {n.fx_node: n for n in res.nodes}


def _var_of(step, binding_id):
    from irviz.core.views.provenance import binding_ids

    main = step.mod["main"]
    ids = binding_ids(main)
    bindings = [b for blk in main.body.blocks for b in blk.bindings]
    return next(b for b in bindings if ids[b.var.__chandle__()] == binding_id)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    out = {}
    for name, text in (("mlp.py", MLP), ("module_map.py", MODULE_MAP), ("split.py", SPLIT),
                       ("pass_through.py", PASS_THROUGH)):
        (d / name).write_text(text.lstrip("\n"), encoding="utf-8")
        out[name] = d / name
    return out


@pytest.fixture(scope="module")
def course_ws(files):
    return _open(files["mlp.py"], LOWERED, importer_maps=[str(files["module_map.py"])])


@pytest.fixture(scope="module")
def export_ws(files):
    return _open(files["mlp.py"], LOWERED)


@pytest.fixture(scope="module")
def split_ws(files):
    return _open(files["split.py"], "LibraryDispatch(min_macs=0)," + LOWERED)


def _flatten_then_fused(ws, flat, hidden, act, out, pass_name):
    step = _step(ws, pass_name)
    res, rows = _rows(ws, step)
    assert res.first_divergence is None
    # the flatten: compared with its own (1, 144)-shaped value, not "fused away"
    assert rows[flat].status == "ok", rows[flat].reason
    assert rows[act].status == "ok", rows[act].reason
    assert rows[out].status == "ok", rows[out].reason
    assert rows[flat].relax_var != rows[act].relax_var
    # the values were taken from the bindings provenance names, by id
    assert rows[flat].relax_var in step.provenance[flat]
    assert rows[act].relax_var in step.provenance[act]
    assert _var_of(step, rows[act].relax_var).var.ty.shape.values[1] == 24
    # the Linear before the ReLU is inside the kernel whose output is the ReLU's value
    h = rows[hidden]
    assert h.status == "unmatched" and h.reason.startswith("fused away")
    assert h.kernel and "relu" in h.kernel and h.kernel == rows[act].kernel
    assert h.kernel in h.reason and h.compared_as == act
    assert f"{act}'s (ok" in h.reason
    assert h.relax_var == rows[act].relax_var
    return step, res


@pytest.mark.parametrize("pass_name", ["FuseOps", "FuseTIR", "CallTIRRewrite", "AttachGlobalSymbol"])
def test_course_importer_flatten_before_fused_linear_relu(course_ws, pass_name):
    assert (course_ws.capture, course_ws.importer) == ("symbolic_trace", "course")
    step, res = _flatten_then_fused(course_ws, "flat", "hidden", "act", "out", pass_name)
    assert res.method == ("outputs" if pass_name.startswith("Fuse") else "instrument")
    if pass_name == "FuseOps":
        # the shape of the problem: the flatten's binding and the fused call share a name
        names = [var_name(b.var) for blk in step.mod["main"].body.blocks for b in blk.bindings]
        assert names.count("lv") == 2
    assert sum(n.status == "ok" for n in res.nodes) == 3


@pytest.mark.parametrize("pass_name", ["FuseOps", "FuseTIR", "CallTIRRewrite", "AttachGlobalSymbol"])
def test_export_importer_flatten_before_fused_matmul_add_relu(export_ws, pass_name):
    assert export_ws.importer == "exported_program"
    step, res = _flatten_then_fused(export_ws, "view", "addmm", "relu", "addmm_1", pass_name)
    if pass_name == "FuseOps":
        names = [var_name(b.var) for blk in step.mod["main"].body.blocks for b in blk.bindings]
        assert names.count("lv") == 2
    assert {n.fx_node for n in res.nodes if n.status == "ok"} >= {"view", "relu", "addmm_1"}


def test_wrong_add_inside_a_fused_group_is_found_at_the_groups_output(files):
    passes.load_pass_file(WRONG_PASS)
    ws = _open(files["mlp.py"], "SubtractOneAdd," + FUSE)
    res, rows = _rows(ws, ws.step_at(-1))
    # the flatten before the group is right; the group (matmul, wrong add, relu) is not
    assert rows["view"].status == "ok"
    assert res.first_divergence == "relu"
    relu = rows["relu"]
    assert relu.status == "diverges" and relu.kernel in relu.reason and "addmm" in relu.reason
    addmm = rows["addmm"]
    assert addmm.compared_as == "relu" and "relu's (diverges" in addmm.reason


@pytest.mark.parametrize("pass_name", ["FuseTIR", "AttachGlobalSymbol"])
def test_tuple_output_and_library_calls_next_to_fused_groups(split_ws, pass_name):
    res, rows = _rows(split_ws, _step(split_ws, pass_name))
    assert res.first_divergence is None
    # chunk gives a tuple (two tensors) from the kernel that also does the ReLU; each getitem
    # takes one of them
    split = next(n for n in res.nodes if n.fx_node.startswith("split"))
    assert split.status == "ok" and split.kernel and "split" in split.kernel
    for name in ("getitem", "getitem_1"):
        assert rows[name].status == "ok" and rows[name].kernel == split.kernel
    relu = rows["relu"]
    assert relu.compared_as == split.fx_node and relu.kernel == split.kernel
    assert relu.kernel in relu.reason
    # the matmul runs in torch through call_dps_packed: its output is compared as it is
    assert rows["mm"].status == "ok" and rows["mm"].kernel.startswith("irviz.torch.")
    assert rows["view"].status == "ok" and rows["mul"].status == "ok"
    # each Linear: its matmul in torch, its bias add fused into the product's kernel
    for name in ("addmm", "addmm_1"):
        assert rows[name].compared_as == "mul" and rows[name].kernel == rows["mul"].kernel


def test_pass_through_modules_share_a_binding_and_are_compared_with_it(files):
    ws = _open(files["pass_through.py"], FUSE, capture="symbolic_trace")
    res, rows = _rows(ws, ws.step_at(0))
    # Flatten, Linear, Dropout, ReLU, Identity, Linear: each its own value, Dropout and Identity
    # on the binding of the module before them
    assert [rows[n].status for n in ("_0", "_1", "_2", "_3", "_4", "_5")] == ["ok"] * 6
    assert rows["_2"].relax_var == rows["_1"].relax_var and rows["_4"].relax_var == rows["_3"].relax_var
    res, rows = _rows(ws, _step(ws, "FuseTIR"))
    # fused: Linear and Dropout live inside the kernel that returns the ReLU's value
    assert [rows[n].status for n in ("_0", "_3", "_4", "_5")] == ["ok"] * 4
    for n in ("_1", "_2"):
        assert rows[n].status == "unmatched" and rows[n].compared_as == "_4"
        assert rows[n].kernel == rows["_3"].kernel and rows[n].kernel in rows[n].reason
