"""Compare intermediates against torch node by node, on real TVM builds of a small CNN."""
from __future__ import annotations

from pathlib import Path

import pytest

from irviz.core import passes
from irviz.core.backend.intermediates import compare_intermediates
from irviz.core.workspace import Workspace

WRONG_PASS = Path(__file__).resolve().parents[2] / "examples" / "subtract_one_add.py"
WRONG_PIPELINE = "SubtractOneAdd,LegalizeOps,AnnotateTIROpPattern,FoldConstant,FuseOps,FuseTIR"


def _open(pipeline: str) -> Workspace:
    ws = Workspace()
    ws.open("sample:small_cnn", planned=passes.parse_pipeline(pipeline))
    ws.run_to_end()
    return ws


@pytest.fixture(scope="module")
def wrong_ws():
    passes.load_pass_file(WRONG_PASS)
    return _open(WRONG_PIPELINE)


def test_correct_pipeline_is_within_tolerance_at_a_fused_and_a_lowered_step():
    ws = _open("zero")
    fused = compare_intermediates(ws.step_at(-1), ws.captured)
    assert fused.method == "outputs" and fused.first_divergence is None
    ok = [n for n in fused.nodes if n.status == "ok"]
    assert len(ok) >= 3 and all(n.max_abs < 1e-4 for n in ok)
    assert not [n for n in fused.nodes if n.status == "diverges"]

    ws = _open("default_build")
    last = compare_intermediates(ws.step_at(-1), ws.captured)
    assert last.method == "instrument" and last.first_divergence is None
    # memory planning reuses buffers: the values must still be the ones each kernel wrote
    matched = {n.fx_node: n for n in last.nodes if n.status == "ok"}
    assert {"convolution", "relu", "view", "addmm"} <= set(matched)


def test_wrong_pass_first_divergence_is_that_bindings_fx_node(wrong_ws):
    at_pass = compare_intermediates(wrong_ws.step_at(1), wrong_ws.captured)
    assert at_pass.first_divergence == "convolution"
    conv = next(n for n in at_pass.nodes if n.fx_node == "convolution")
    assert conv.status == "diverges" and conv.max_abs > 1e-2
    assert "atol" in conv.reason
    # a node computed from weights only is untouched by the wrong add
    assert next(n for n in at_pass.nodes if n.fx_node == "permute").status == "ok"


def test_after_fusion_divergence_points_at_the_group_holding_the_bad_binding(wrong_ws):
    last = wrong_ws.step_at(-1)
    res = compare_intermediates(last, wrong_ws.captured)
    first = next(n for n in res.nodes if n.fx_node == res.first_divergence)
    assert first.relax_var in last.provenance["convolution"]
    # unmatched nodes say why
    unmatched = [n for n in res.nodes if n.status == "unmatched"]
    assert unmatched and all(n.reason for n in unmatched)
    assert any(n.reason.startswith("fused away") for n in unmatched)
    assert any("shape differs" in n.reason or "fused away" in n.reason for n in unmatched)


def test_tolerance_override_changes_the_verdict(wrong_ws):
    res = compare_intermediates(wrong_ws.step_at(1), wrong_ws.captured, rtol=0.0, atol=10.0)
    assert res.first_divergence is None


def test_provenance_survives_to_nonDataflow_and_memory_planning():
    ws = _open("default_build")
    prov = ws.step_at(-1).provenance
    # before, ToNonDataflow made every node map to the return value
    assert len({tuple(v) for k, v in prov.items() if v}) > 5
    assert prov["relu"] != prov["addmm"]
