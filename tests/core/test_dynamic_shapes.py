"""Dynamic shapes: a model file marks batch and sequence dynamic; Relax/TensorIR show symbolic dims
with the Dim names; one build runs on two sizes and matches PyTorch on both."""
from __future__ import annotations

import pytest
import torch

from irviz.core import passes
from irviz.core.backend.build import build
from irviz.core.backend.run import run_and_compare
from irviz.core.frontend.capture import capture
from irviz.core.frontend.importer import dim_names, import_model
from irviz.core.frontend.model_file import load_model
from irviz.core.session import Session


@pytest.fixture(scope="module")
def dyn():
    loaded = load_model("sample:dynamic_mlp")
    cap = capture(loaded)
    imp = import_model(cap)
    s = Session(imp, cap)
    s.set_pipeline(passes.get_pipeline("zero"))
    assert s.run_to_end() is not None, s.error and s.error.user_message()
    return loaded, cap, imp, s


def test_fx_graph_has_symbolic_dims(dyn):
    _, cap, _, _ = dyn
    x = cap.graph.node("x")
    assert all(isinstance(d, str) for d in x.shapes[0][:2]) and x.shapes[0][2] == 32
    names = dim_names(cap)
    assert sorted(names.values()) == ["batch", "seq"]
    assert {names[d] for d in x.shapes[0][:2]} == {"batch", "seq"}


def test_relax_and_tir_show_named_symbolic_dims(dyn):
    _, _, imp, s = dyn
    text = imp.mod["main"].script()
    assert 'x: R.Tensor((batch, seq, 32), dtype="float32")' in text
    assert '"tir_var_upper_bound": {"batch": 64, "seq": 256}' in text
    assert "-> R.Tensor((batch, 10)" in text
    tir = "\n".join(f.script() for gv, f in s.current.mod.functions.items()
                    if gv.name_hint != "main")
    assert "batch" in tir and "seq" in tir  # the fused kernels take the symbolic sizes


def test_provenance_survives_renaming(dyn):
    _, cap, imp, _ = dyn
    names = {b.var.name for blk in imp.mod["main"].body.blocks for b in blk.bindings}
    # tensor ops (size arithmetic on the symbols, sym_size / mul, emits no bindings)
    ops = [n.name for n in cap.graph.nodes
           if n.kind == "op" and n.target.startswith("aten.") and "sym_size" not in n.target]
    assert len(ops) > 10 and all(imp.provenance[o] for o in ops)
    assert all(v in names for o in ops for v in imp.provenance.get(o, []))


def test_one_build_runs_on_two_sizes(dyn):
    loaded, _, _, s = dyn
    br = build(s.current.mod)
    first = run_and_compare(br, loaded, repeats=1)
    assert first.allclose, first.max_abs_error
    alt = loaded.alt_inputs
    assert alt is not None and alt[0].shape[:2] != loaded.example_inputs[0].shape[:2]
    second = run_and_compare(br, loaded, repeats=1, inputs=alt)
    assert second.allclose, second.max_abs_error
    with torch.no_grad():
        assert tuple(loaded.module(*alt).shape) == (alt[0].shape[0], 10)


def test_no_alt_inputs():
    assert load_model("sample:mlp").alt_inputs is None
