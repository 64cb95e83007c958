"""irviz check --intermediates: the first divergence and one JSON entry per compared FX node."""
from __future__ import annotations

import json
from pathlib import Path

from irviz.cli import main

WRONG_PASS = str(Path(__file__).resolve().parents[2] / "examples" / "subtract_one_add.py")


def _check(capsys, *argv):
    code = main(["check", "sample:small_cnn", "--intermediates", "--json", "-", "--repeats", "1", *argv])
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
