"""import_model: exported_program + course importers, provenance, errors, custom_convert_map."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import tvm
from torch import nn
from tvm import relax

from irviz.core.frontend.capture import capture
from irviz.core.errors import IRImportError
from irviz.core.frontend.importer import Imported, import_model
from irviz.core.frontend.model_file import LoadedModel
from irviz.core.tvm_compat import var_name


def _captured(module, *inputs, name="m"):
    module = module.eval()
    return capture(LoadedModel(module=module, example_inputs=tuple(inputs), spec=name, name=name))


def _run(mod, inputs):
    ex = tvm.compile(mod, target="llvm")
    vm = relax.VirtualMachine(ex, tvm.cpu())
    out = vm["main"](*[tvm.runtime.tensor(x.numpy()) for x in inputs])
    return out.numpy()


class ConvBnLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 6 * 6, 5)

    def forward(self, x):
        return self.fc(torch.flatten(torch.relu(self.bn(self.conv(x))), 1))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear0 = nn.Linear(16, 8)
        self.linear1 = nn.Linear(8, 4)

    def forward(self, x):
        return self.linear1(torch.relu(self.linear0(x)))


class Erfinv(nn.Module):
    def forward(self, x):
        return torch.special.erfinv(x * 0.5)


class WithUnsupported(nn.Module):
    """fc -> act.inner (torch.special.erfinv: TVM 0.27 has no converter for aten.erfinv)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(5, 5)
        self.act = nn.Sequential()
        self.act.add_module("inner", Erfinv())

    def forward(self, x):
        return self.act(torch.tanh(self.fc(x)))


@pytest.fixture(scope="module")
def cnn():
    torch.manual_seed(0)
    m = ConvBnLinear().eval()
    with torch.no_grad():
        m.bn.running_mean.uniform_(-0.1, 0.1)
        m.bn.running_var.uniform_(0.5, 1.5)
    x = torch.randn(1, 3, 6, 6)
    cap = _captured(m, x, name="cnn")
    return m, x, cap, import_model(cap)


def _bindings(mod):
    return {var_name(b.var): b for blk in mod["main"].body.blocks for b in blk.bindings}


def test_default_import_provenance_covers_every_node(cnn):
    _, _, cap, imp = cnn
    assert isinstance(imp, Imported) and imp.importer == "exported_program"
    assert imp.seconds > 0
    names = [n.name for n in cap.exported.graph.nodes if n.op != "output"]
    assert set(names) <= set(imp.provenance)
    bindings = _bindings(imp.mod)
    params = {var_name(p) for p in imp.mod["main"].params}
    for name, vars_ in imp.provenance.items():
        assert all(v in bindings or v in params for v in vars_), (name, vars_)
    # every binding of main belongs to some node (helpers grouped with their anchor; gv -> output)
    covered = {v for vs in imp.provenance.values() for v in vs}
    assert set(bindings) <= covered
    assert imp.provenance["x"] == ["x"]


def test_conv_node_maps_to_conv2d_binding(cnn):
    _, _, cap, imp = cnn
    conv_nodes = [n.name for n in cap.exported.graph.nodes if "convolution" in str(n.target)
                  or "conv2d" in str(n.target)]
    assert conv_nodes
    bindings = _bindings(imp.mod)
    ops = [bindings[v].value.op.name for v in imp.provenance[conv_nodes[0]]
           if isinstance(bindings[v].value, relax.Call)]
    assert "relax.nn.conv2d" in ops
    # parameters are bound constants: the conv weight maps to the conv2d binding that uses it
    weight = [n for n in imp.provenance if n.endswith("conv_weight")][0]
    assert [bindings[v].value.op.name for v in imp.provenance[weight]] == ["relax.nn.conv2d"]


def test_default_import_runs_like_torch(cnn):
    m, x, _, imp = cnn
    with torch.no_grad():
        ref = m(x).numpy()
    np.testing.assert_allclose(_run(imp.mod, [x]), ref, rtol=1e-4, atol=1e-4)


def test_course_importer_mlp_matches_torch():
    torch.manual_seed(0)
    m = MLP().eval()
    x = torch.randn(2, 16)
    cap = _captured(m, x, name="mlp")
    imp = import_model(cap, importer="course")
    assert imp.importer == "course"
    with torch.no_grad():
        ref = m(x).numpy()
    np.testing.assert_allclose(_run(imp.mod, [x]), ref, rtol=1e-4, atol=1e-4)
    bindings = _bindings(imp.mod)
    linear_nodes = [n.name for n in cap.exported.graph.nodes if n.op == "call_function"
                    and any(k in str(n.target) for k in ("addmm", "linear"))]
    assert len(linear_nodes) == 2
    for name in linear_nodes:
        vars_ = imp.provenance[name]
        assert vars_, name
        # emit_te -> call_tir to a PrimFunc of the module
        call = bindings[vars_[-1]].value
        assert call.op.name == "relax.call_tir"
        assert isinstance(imp.mod[call.args[0]], tvm.tirx.PrimFunc)


def test_course_importer_unsupported_op_names_node():
    cap = _captured(WithUnsupported(), torch.rand(2, 5))
    with pytest.raises(IRImportError) as ei:
        import_model(cap, importer="course")
    e = ei.value
    assert e.node == "erfinv" and "erfinv" in e.op
    assert "exported_program" in e.hint


@pytest.fixture(scope="module")
def unsupported():
    torch.manual_seed(0)
    return _captured(WithUnsupported(), torch.rand(2, 5), name="unsupported")


def test_unsupported_op_error_names_node_op_and_module(unsupported):
    with pytest.raises(IRImportError) as ei:
        import_model(unsupported)
    e = ei.value
    assert e.stage == "import"
    assert e.node == "erfinv" and e.op == "aten.erfinv.default"
    msg = e.user_message()
    assert '"erfinv"' in e.message and "aten.erfinv.default" in e.message
    assert "act.inner" in e.message  # nn.Module path
    assert "(2, 5)" in e.message  # input shape
    assert "custom_convert_map" in e.hint and "erfinv.default" in msg


def _erfinv_converter(node, importer):
    """erfinv(y) = atanh-free approximation is overkill here: use Newton on erf, 3 steps from a
    good start (Giles' approximation is not needed for |y| <= 0.5)."""
    x = importer.env[node.args[0]]
    bb = importer.block_builder
    # series: erfinv(y) = sqrt(pi)/2 (y + pi/12 y^3 + 7 pi^2/480 y^5 + 127 pi^3/40320 y^7 + ...)
    c = np.sqrt(np.pi) / 2
    coeffs = [1.0, np.pi / 12, 7 * np.pi ** 2 / 480, 127 * np.pi ** 3 / 40320,
              4369 * np.pi ** 4 / 5806080, 34807 * np.pi ** 5 / 182476800]
    y2 = bb.emit(relax.op.multiply(x, x))
    acc = relax.const(coeffs[-1], "float32")
    for k in reversed(coeffs[:-1]):
        acc = bb.emit(relax.op.add(relax.op.multiply(acc, y2), relax.const(k, "float32")))
    return bb.emit(relax.op.multiply(relax.op.multiply(acc, x), relax.const(c, "float32")))


def test_custom_convert_map_supplies_missing_converter(unsupported):
    imp = import_model(unsupported, custom_convert_map={"erfinv.default": _erfinv_converter})
    assert imp.provenance["erfinv"]
    x = unsupported.loaded.example_inputs[0]
    with torch.no_grad():
        ref = unsupported.loaded.module(x).numpy()
    np.testing.assert_allclose(_run(imp.mod, [x]), ref, rtol=1e-4, atol=1e-4)
    # the other key spellings are accepted too
    imp2 = import_model(unsupported, custom_convert_map={torch.ops.aten.erfinv.default: _erfinv_converter})
    assert imp2.provenance["erfinv"] == imp.provenance["erfinv"]


def test_failing_custom_converter_names_node(unsupported):
    def broken(node, importer):
        raise ValueError("no luck")

    with pytest.raises(IRImportError) as ei:
        import_model(unsupported, custom_convert_map={"aten.erfinv.default": broken})
    assert ei.value.node == "erfinv"
    assert "no luck" in ei.value.message and "act.inner" in ei.value.message


def test_failing_tvm_converter_names_node(cnn):
    """A converter whose Relax op TVM rejects: the error names the node and shows TVM's message."""
    _, _, cap, _ = cnn

    def bad_relu(node, importer):
        x = importer.env[node.args[0]]
        return importer.block_builder.emit(relax.op.reshape(x, (7,)))  # size mismatch: TVM raises

    with pytest.raises(IRImportError) as ei:
        import_model(cap, custom_convert_map={"relu.default": bad_relu})
    assert ei.value.node == "relu" and ei.value.op == "aten.relu.default"
    assert "TVM_BACKTRACE" not in ei.value.message and len(ei.value.message) > 60


def test_unknown_importer():
    with pytest.raises(IRImportError):
        import_model(None, importer="nope")
