"""`irviz check` passes on every core sample with zero, course and default_build: each sample
the app offers must survive every built-in pipeline end to end."""
import json

import pytest

from irviz.cli.main import main

SAMPLES = ["mlp", "matmul_relu", "mul_add", "small_cnn", "gpt", "dynamic_mlp",
           pytest.param("resnet18", marks=pytest.mark.slow)]


@pytest.mark.parametrize("pipeline", ["zero", "course", "default_build"])
@pytest.mark.parametrize("sample", SAMPLES)
def test_check_passes(sample, pipeline, capsys):
    code = main(["check", f"sample:{sample}", "--pipeline", pipeline, "--json", "-", "--repeats", "1"])
    summary = json.loads(capsys.readouterr().out)
    assert summary["error"] is None and code == 0
    assert summary["ok"] is True and summary["failed_stage"] is None
    assert summary["max_abs_error"] < 1e-4
    assert len(summary["steps"]) == {"zero": 5, "course": 5, "default_build": 15}[pipeline]
