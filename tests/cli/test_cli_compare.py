"""`irviz compare MODEL --pipeline A --pipeline B --out DIR`: compare.json rows and alignment,
compare.html, and a clear non-zero exit on bad input."""
import json

from irviz.cli.main import main

NO_FOLD = "LegalizeOps,AnnotateTIROpPattern,FuseOps,FuseTIR"


def test_compare_writes_json_rows_and_aligned_steps(tmp_path, capsys):
    out = tmp_path / "cmp"
    code = main(["compare", "sample:mlp", "--pipeline", "zero", "--pipeline", NO_FOLD,
                 "--out", str(out), "--repeats", "1"])
    assert code == 0, capsys.readouterr().err
    data = json.loads((out / "compare.json").read_text())
    a, b = data["pipelines"]
    assert a["pipeline"] == "zero" and b["pipeline"] == NO_FOLD
    assert a["steps"][3] == "FoldConstant" and "FoldConstant" not in b["steps"]
    for row in (a, b):
        assert row["tvm_ms"] > 0 and row["build_seconds"] > 0 and row["max_abs_error"] < 1e-4
    assert (a["kernels"], b["kernels"]) == (2, 4)
    assert data["aligned"] == [[0, 0], [1, 1], [2, 2], [3, None], [4, 3], [5, 4]]
    page = (out / "compare.html").read_text()
    assert "only in A" in page and "transpose" in page and "<script src" not in page


def test_compare_rejects_one_pipeline_and_a_bad_text(tmp_path, capsys):
    assert main(["compare", "sample:mlp", "--pipeline", "zero", "--out", str(tmp_path)]) == 2
    assert "exactly two pipelines" in capsys.readouterr().err
    assert main(["compare", "sample:mlp", "--pipeline", "zero", "--pipeline", "LegalizeOps,Nope",
                 "--out", str(tmp_path)]) == 1
    assert "unknown pass 'Nope'" in capsys.readouterr().err
    assert not (tmp_path / "compare.json").exists()


def test_compare_for_a_target_not_here_builds_both_for_it_and_runs_neither(tmp_path, capsys):
    out = tmp_path / "cmp"
    code = main(["compare", "sample:mlp", "--pipeline", "zero", "--pipeline", "tir-cpu",
                 "--target", "aarch64", "--out", str(out), "--repeats", "1"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    a, b = json.loads((out / "compare.json").read_text())["pipelines"]
    for row in (a, b):
        assert row["build_seconds"] > 0 and row["tvm_ms"] is None and row["error"] is None
        assert row["not_run"].startswith("built for aarch64; no such device here, not run")
    assert printed.out.count("no such device here, not run") == 2
