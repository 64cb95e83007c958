"""`irviz check` on a model file with get_alt_inputs(): the build runs on the second sizes too."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("tvm")

from irviz.cli.main import main


def test_check_dynamic_mlp_reports_alt_sizes(tmp_path):
    out = tmp_path / "check.json"
    code = main(["check", "sample:dynamic_mlp", "--json", str(out), "--repeats", "1"])
    summary = json.loads(out.read_text())
    assert code == 0, summary
    assert summary["ok"] is True and summary["failed_stage"] is None
    alt = summary["alt_sizes"]
    assert len(alt) == 1
    assert alt[0]["allclose"] is True
    assert alt[0]["max_abs_error"] is not None and alt[0]["max_abs_error"] < 1e-4
    # other sizes than the example input (batch/seq are dynamic)
    import torch  # noqa: F401 - loaded before load_model, as the CLI does

    from irviz.core.frontend.model_file import load_model

    loaded = load_model("sample:dynamic_mlp")
    example = [list(t.shape) for t in loaded.example_inputs]
    assert alt[0]["shapes"] != example
    assert alt[0]["shapes"] == [list(t.shape) for t in loaded.alt_inputs]


def test_check_without_alt_inputs_has_no_alt_sizes(tmp_path):
    out = tmp_path / "check.json"
    assert main(["check", "sample:mul_add", "--json", str(out), "--repeats", "1"]) == 0
    assert "alt_sizes" not in json.loads(out.read_text())


def test_alt_sizes_of_a_user_model_file(tmp_path, tmp_model_file):
    path = tmp_model_file('''
        import torch
        from torch.export import Dim

        class M(torch.nn.Module):
            def forward(self, x):
                return x * 2.0

        def get_model():
            return M().eval(), (torch.randn(4, 8),)

        def get_dynamic_shapes():
            return {"x": {0: Dim("batch", min=2, max=64)}}

        def get_alt_inputs():
            return (torch.randn(6, 8),)
    ''')
    out = tmp_path / "ok.json"
    assert main(["check", str(path), "--json", str(out), "--repeats", "1"]) == 0
    ok = json.loads(out.read_text())
    assert ok["alt_sizes"][0]["shapes"] == [[6, 8]] and ok["alt_sizes"][0]["allclose"] is True


def test_alt_sizes_that_differ_fail_compare(tmp_path, monkeypatch):
    """When the run on the other sizes does not match torch, check fails at `compare`."""
    import dataclasses

    from irviz.core.backend import run as run_mod

    real = run_mod.run_and_compare

    def fake(br, loaded, *a, inputs=None, **kw):
        res = real(br, loaded, *a, inputs=inputs, **kw)
        if inputs is not None:   # pretend the second size came out wrong
            res = dataclasses.replace(res, allclose=False, max_abs_error=0.5)
        return res

    monkeypatch.setattr(run_mod, "run_and_compare", fake)
    out = tmp_path / "bad.json"
    assert main(["check", "sample:dynamic_mlp", "--json", str(out), "--repeats", "1"]) == 1
    bad = json.loads(out.read_text())
    assert bad["ok"] is False and bad["failed_stage"] == "compare"
    assert bad["allclose"] is True                      # the example size still matches
    assert bad["alt_sizes"][0]["allclose"] is False and bad["alt_sizes"][0]["max_abs_error"] == 0.5
    assert "other input sizes" in bad["error"]
