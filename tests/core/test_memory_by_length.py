"""Memory as a function of a symbolic size: the plan at the example inputs' sizes, and its figures
at a few values of the size (the sequence length of a model with get_dynamic_shapes())."""
from __future__ import annotations

import json

import pytest

from irviz.cli.main import main
from irviz.core.backend.memory import LENGTHS, memory_by_length
from irviz.core.errors import BuildError
from irviz.core.passes import parse_pipeline
from irviz.core.workspace import Workspace


@pytest.fixture(scope="module")
def dynamic():
    ws = Workspace(log=lambda line: None)
    ws.open("sample:dynamic_mlp", planned=parse_pipeline("default_build"))
    return ws


def test_a_symbolic_step_is_planned_at_the_example_sizes_and_by_length(dynamic):
    m = dynamic.memory(0)
    assert m["dims"] == {"batch": 2, "seq": 8} and m["dims_source"]["seq"] == "example inputs"
    assert m["peak_bytes"] > 0 and m["tensors"]
    by = m["by_length"]
    assert by["dim"] == "seq" and by["fixed"] == {"batch": 2} and by["drawn"] == 8
    assert [r["value"] for r in by["rows"]] == list(LENGTHS)
    peaks = [r["peak_bytes"] for r in by["rows"]]
    assert peaks == sorted(peaks) and peaks[0] < peaks[-1]
    # activations here are (batch, seq, width) tensors: 4x the length, 4x the peak
    assert by["rows"][1]["peak_bytes"] == 4 * by["rows"][0]["peak_bytes"]
    # the same planning at the example length gives the plan drawn
    at8 = memory_by_length(dynamic.step_at(0).mod, m["dims"], lengths=(8,))["rows"][0]
    assert at8["peak_bytes"] == m["peak_bytes"] and at8["planned_bytes"] == m["planned_bytes"]
    # another size varies when asked; --dim values are used for the rest
    by_batch = memory_by_length(dynamic.step_at(0).mod, {"batch": 2, "seq": 64}, vary="batch",
                                lengths=(4,))
    assert by_batch["fixed"] == {"seq": 64} and by_batch["rows"][0]["value"] == 4
    with pytest.raises(BuildError, match="batch"):
        memory_by_length(dynamic.step_at(0).mod, {"seq": 8})


def test_a_step_past_memory_planning_is_planned_from_the_last_step_before_it(dynamic):
    dynamic.run_to_end()
    last = dynamic.step_at(-1)
    m = dynamic.memory(last.index)
    assert m["step"] == last.index and m["from_step"] < last.index
    assert dynamic.step_at(m["from_step"]).pass_name == "CallTIRRewrite"
    assert [r["value"] for r in m["by_length"]["rows"]] == list(LENGTHS)
    with pytest.raises(BuildError, match="StaticPlanBlockMemory"):
        memory_by_length(last.mod, m["dims"])


def test_a_static_model_has_no_figures_by_length():
    ws = Workspace(log=lambda line: None)
    ws.open("sample:mlp")
    m = ws.memory()
    assert m["by_length"] is None and m["dims"] == {} and m["peak_bytes"] > 0


def test_check_json_memory_by_length(capsys):
    code = main(["check", "sample:dynamic_mlp", "--no-weights", "--no-estimate", "--json", "-"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["ok"]
    mem = out["memory"]
    assert mem["dims"] == {"batch": 2, "seq": 8}
    assert [r["value"] for r in mem["by_length"]["rows"]] == list(LENGTHS)
    assert mem["weights_bytes"] > 0
