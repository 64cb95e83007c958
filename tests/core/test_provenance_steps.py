"""Provenance at every step of the built-in pipelines: an FX node maps to Relax graph nodes of that
step (the ids the GUI highlights) and, through them, to the kernels that do its work."""
from __future__ import annotations

import pytest

pytest.importorskip("tvm")

from irviz.core.passes import get_pipeline
from irviz.core.views.graph import relax_digraph
from irviz.core.views.provenance import relax_to_callee
from irviz.core.workspace import Workspace

BUILT_IN = ("zero", "default_build", "course", "tir-cpu", "fast-cpu")


def _steps(spec: str, pipeline: str):
    ws = Workspace()
    ws.open(spec, planned=get_pipeline(pipeline))
    s = ws.session
    while s.pipeline:
        st = s.step_forward()
        assert st is not None, f"{pipeline} failed on {spec}: {s.error}"
        yield st


def _kind(fx: str) -> str | None:
    if fx.startswith("convolution"):
        return "conv"
    if fx.startswith("_native_batch_norm"):
        return "bn"
    return None


def _check_step(st) -> list[str]:
    """What is wrong with the provenance at this step (empty: nothing)."""
    graph = relax_digraph(st.mod, "main")
    callees = relax_to_callee(st)
    kernels = {c for c in callees.values() if c}
    has_conv_kernel = any("conv2d" in k for k in kernels)
    bad = []
    for fx, ids in st.provenance.items():
        missing = [i for i in ids if i not in graph]
        if missing:
            bad.append(f"{fx}: {missing} are no nodes of main")
            continue
        # the GUI takes a node's kernel from relax_to_callee; the graph must agree on which node
        for i in ids:
            shown = graph.nodes[i].get("callee")
            if shown and callees.get(i) not in (None, shown):
                bad.append(f"{fx}: {i} calls {shown} in the graph, {callees.get(i)} in relax_to_callee")
        mine = {callees[i] for i in ids if callees.get(i)}
        kind = _kind(fx)
        # a conv that LibraryDispatch kept for TensorIR (measured faster there, on this CPU) is
        # still the Relax op at that step, beside the ones it sent to torch: no kernel yet
        still_op = any("conv2d" in str(graph.nodes[i].get("op", "")) for i in ids)
        if kind == "conv" and has_conv_kernel and not still_op and not any("conv2d" in k for k in mine):
            bad.append(f"{fx}: its kernels {sorted(mine)} have no conv2d")
        if kind == "conv" and any("batch_norm" in k and "conv2d" not in k for k in mine):
            bad.append(f"{fx}: credited with a batch-norm kernel {sorted(mine)}")
        # tir-cpu and fast-cpu fold batch norm into the convolution's weights and a bias add (or split
        # it into subtract/divide/multiply/add): what is left of it fuses into the convolution's
        # kernel, whose name then lists it
        if kind == "bn" and any("conv2d" in k and not any(op in k for op in ("batch_norm", "subtract", "add"))
                                for k in mine):
            bad.append(f"{fx}: credited with a convolution kernel {sorted(mine)}")
    return [f"step {st.index} {st.pass_name}: {b}" for b in bad]


@pytest.mark.parametrize("spec,pipeline", [
    ("sample:small_cnn", "tir-cpu"),
    ("sample:resnet18", "tir-cpu"),
])
def test_conv_maps_to_its_kernel_at_every_step(spec, pipeline):
    bad = [b for st in _steps(spec, pipeline) for b in _check_step(st)]
    assert not bad, "\n".join(bad[:20])


def test_after_prepack_the_conv_is_the_prepacked_call():
    last = list(_steps("sample:small_cnn", "tir-cpu"))[-1]
    assert last.pass_name == "CPUPrepackWeights"
    graph = relax_digraph(last.mod, "main")
    # the node that calls the kernel, not only the alias the pass left under the old name
    conv = [graph.nodes[i].get("callee") for i in last.provenance["convolution"]]
    assert any(c and "conv2d" in c and "prepacked" in c for c in conv), conv
    # batch norm, split into elementwise ops, is done in the convolution's kernel (its write-back)
    bn = [graph.nodes[i].get("callee") for i in last.provenance["_native_batch_norm_legit_no_training"]]
    assert any(c and "conv2d" in c and "subtract" in c and "prepacked" in c for c in bn), bn


@pytest.mark.parametrize("spec", ["sample:small_cnn", "sample:mlp", "sample:resnet18"])
@pytest.mark.parametrize("pipeline", [p for p in BUILT_IN if p != "tir-cpu"])
def test_every_built_in_pipeline(spec, pipeline):
    bad = [b for st in _steps(spec, pipeline) for b in _check_step(st)]
    assert not bad, "\n".join(bad[:20])


TWO_CONVS = '''
import torch
from torch import nn


class TwoConvs(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, padding=1)
        self.b = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def get_model():
    torch.manual_seed(0)
    return TwoConvs().eval(), (torch.randn(1, 3, 16, 16),)
'''


def test_convs_sent_to_torch_beside_convs_kept_for_tensorir(monkeypatch, tmp_path):
    """fast-cpu's LibraryDispatch measures each conv on the CPU it runs on, so one machine keeps
    both convs for TensorIR and another sends one to torch: force the mixture."""
    import irviz.core.passes.library_dispatch as dispatch

    real = dispatch.library_or_tir

    def first_conv_to_torch(call, library):
        rec = dict(real(call, library))
        if call.op.name.endswith("conv2d"):
            rec["choice"] = "torch" if int(call.args[1].ty.shape[1]) == 3 else "tir"
        return rec

    monkeypatch.setattr(dispatch, "library_or_tir", first_conv_to_torch)
    monkeypatch.setattr(dispatch, "mixture_or_tir", lambda original, mixed, decisions: (mixed, None))
    model = tmp_path / "two_convs.py"
    model.write_text(TWO_CONVS)
    steps = list(_steps(str(model), "fast-cpu"))
    dispatched = next(st for st in steps if st.pass_name == "LibraryDispatch")
    callees = set(relax_to_callee(dispatched).values())
    assert any(c.startswith("irviz.torch.conv2d") for c in callees), callees
    bad = [b for st in steps for b in _check_step(st)]
    assert not bad, "\n".join(bad[:20])
