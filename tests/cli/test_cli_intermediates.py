"""irviz check --intermediates: the first divergence and one JSON entry per compared FX node."""
from __future__ import annotations

import json
from pathlib import Path

from irviz.cli.main import main

WRONG_PASS = str(Path(__file__).resolve().parents[2] / "examples" / "subtract_one_add.py")


def _check(capsys, *argv, model="sample:small_cnn"):
    code = main(["check", model, "--intermediates", "--json", "-", "--repeats", "1", *argv])
    return code, json.loads(capsys.readouterr().out)


def test_wrong_pass_names_its_node_and_fails(capsys):
    code, out = _check(capsys, "--passes", WRONG_PASS, "--pipeline", "SubtractOneAdd,LegalizeOps")
    assert code == 1
    assert out["first_divergence"] == "convolution"
    rows = {r["fx_node"]: r for r in out["intermediates"]}
    assert set(rows["convolution"]) >= {"fx_node", "relax_var", "max_abs", "max_rel", "status"}
    assert rows["convolution"]["status"] == "diverges" and rows["permute"]["status"] == "ok"


def test_correct_pipeline_has_no_divergence(capsys):
    code, out = _check(capsys, "--pipeline", "LegalizeOps")
    assert code == 0 and out["ok"]
    assert out["first_divergence"] is None
    assert all(r["status"] != "diverges" for r in out["intermediates"])


FLATTEN_MLP = """
import torch
from torch import nn


def get_model():
    torch.manual_seed(1)
    net = nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 3)).eval()
    return net, (torch.randn(1, 4, 4, 4),)
"""


def test_flatten_before_a_fused_group_is_compared_with_its_own_binding(capsys, tmp_model_file):
    # the course importer (symbolic_trace, module map), then FuseOps: the flatten's binding and
    # the fused Linear+ReLU call are both named lv
    model = tmp_model_file(FLATTEN_MLP)
    code, out = _check(capsys, "--pipeline", "LegalizeOps,AnnotateTIROpPattern,FuseOps,FuseTIR",
                       "--capture", "symbolic_trace", model=str(model))
    assert code == 0 and out["first_divergence"] is None
    rows = {r["fx_node"]: r for r in out["intermediates"]}
    assert list(rows) == ["_0", "_1", "_2", "_3"]  # Flatten, Linear, ReLU, Linear
    assert [rows[n]["status"] for n in ("_0", "_2", "_3")] == ["ok", "ok", "ok"]
    assert rows["_0"]["relax_var"] != rows["_2"]["relax_var"]
    linear = rows["_1"]
    assert linear["status"] == "unmatched" and linear["relax_var"] == rows["_2"]["relax_var"]
    assert "kernel fused_dense_add_te_relu" in linear["reason"] and "_2's (ok" in linear["reason"]
    assert linear["kernel"] == "fused_dense_add_te_relu" and linear["compared_as"] == "_2"
