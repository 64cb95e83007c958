"""`--pipeline TEXT` with parameters, `--keep-params` + BindParams, pipeline_text in the JSON and
in steps.json (and rerunning it gives the same steps)."""
import json

import numpy as np

from irviz.cli.main import main


def _check(capsys, *argv):
    code = main(["check", *argv, "--json", "-", "--repeats", "1"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_text_pipeline_with_parameters_dispatches_the_mlp_matmuls(capsys):
    code, s = _check(capsys, "sample:mlp", "--pipeline", "LibraryDispatch(min_macs=0),zero")
    assert code == 0, s["error"]
    assert s["pipeline_text"] == ("LibraryDispatch(min_macs=0),LegalizeOps,AnnotateTIROpPattern,"
                                  "FoldConstant,FuseOps,FuseTIR")
    assert s["steps"][0]["pass"] == "LibraryDispatch" and s["steps"][0]["changed"] is True
    assert s["allclose"] is True


def test_bad_pipeline_text_names_the_column(capsys):
    code, s = _check(capsys, "sample:mlp", "--pipeline", "LegalizeOps,FuseOps(fuse_opt_level=high)")
    assert code == 1 and s["failed_stage"] == "pipeline"
    assert "column 36" in s["error"] and "must be an integer" in s["error"]
    assert s["steps"] == []


def test_keep_params_passes_before_and_after_bind_params(capsys):
    code, s = _check(capsys, "sample:mlp", "--keep-params", "--pipeline", "zero")
    assert code == 0 and s["allclose"] is True, s["error"]
    params_file = s["params_file"]
    with np.load(params_file) as w:
        assert sorted(w.files) == ["p_linear0_bias", "p_linear0_weight", "p_linear1_bias", "p_linear1_weight"]
        assert w["p_linear0_weight"].shape == (128, 784)

    code, s = _check(capsys, "sample:mlp", "--keep-params", "--pipeline", "BindParams,LegalizeOps,FuseOps,FuseTIR")
    assert code == 0 and s["allclose"] is True, s["error"]
    assert [x["pass"] for x in s["steps"]] == ["BindParams", "LegalizeOps", "FuseOps", "FuseTIR"]
    assert s["steps"][0]["changed"] is True
    # the planned BindParams names the file the import wrote: the text reruns exactly this
    assert s["pipeline_text"].startswith(f"BindParams(params={params_file}),")


def test_bind_params_without_keep_params_says_what_to_do(capsys):
    code, s = _check(capsys, "sample:mlp", "--pipeline", "BindParams,zero")
    assert code == 1 and s["failed_stage"] == "pipeline"
    assert "weights are already bound; open with --keep-params" in s["error"]
    assert "does not have parameter" not in s["error"]


def test_export_writes_the_weights_and_a_pipeline_text_that_reruns(tmp_path, capsys):
    out = tmp_path / "trace"
    code = main(["export", "sample:mlp", "--keep-params", "--pipeline", "BindParams,LegalizeOps",
                 "--out", str(out), "--no-build"])
    assert code == 0
    capsys.readouterr()
    summary = json.loads((out / "steps.json").read_text())
    npz = out / "mlp.params.npz"
    assert npz.is_file()
    assert summary["pipeline_text"] == f"BindParams(params={npz}),LegalizeOps"
    diff = (out / summary["steps"][1]["diff_file"]).read_text()
    # the BindParams step's own diff: main loses the weight parameters, constants take their place
    assert "-def main(x: R.Tensor((1, 784), dtype=\"float32\"), p_linear0_weight" in diff
    assert "+def main(x: R.Tensor((1, 784), dtype=\"float32\")) ->" in diff
    assert "R.permute_dims(metadata[" in diff

    # the text from steps.json, given back to --pipeline, gives the same steps
    code, s = _check(capsys, "sample:mlp", "--keep-params", "--pipeline", summary["pipeline_text"])
    assert code == 0, s["error"]
    assert [x["pass"] for x in s["steps"]] == [x["pass"] for x in summary["steps"][1:]]
    assert s["pipeline_text"] == summary["pipeline_text"]


def test_keep_params_with_the_course_importer_binds_in_its_own_step(capsys):
    code, s = _check(capsys, "sample:course_fx_mlp", "--keep-params", "--pipeline", "BindParams,zero")
    assert code == 0 and s["importer"] == "course" and s["allclose"] is True, s["error"]
    assert s["steps"][0]["pass"] == "BindParams" and s["steps"][0]["changed"]
    assert s["pipeline_text"].startswith(f"BindParams(params={s['params_file']}),")
