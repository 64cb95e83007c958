"""The CLI contract scripts and CI rely on: exit codes, --json fields, listings, export layout."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from irviz.cli.main import main

STAGES = {None, "load", "capture", "import", "pipeline", "build", "run", "compare"}


def _check(capsys, *argv):
    code = main(["check", *argv, "--json", "-", "--repeats", "2"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_samples_lists_names_usable_as_sample_specs(capsys):
    assert main(["samples"]) == 0
    names = [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()]
    assert {"mlp", "matmul_relu", "mul_add", "small_cnn", "resnet18", "gpt"} <= set(names)


def test_passes_and_pipelines_put_the_name_first(capsys):
    assert main(["passes"]) == 0
    names = [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()]
    assert {"LegalizeOps", "FuseOps", "FuseTIR", "EwiseFMA", "MatmulAddFuse", "LowerToTensorIR",
            "LibraryDispatch", "CPUTileReductions", "VMShapeLower"} <= set(names)
    assert main(["pipelines"]) == 0
    names = [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()]
    assert {"zero", "course", "default_build", "fast-cpu", "tir-cpu"} <= set(names)


def test_check_passes_and_reports_every_step(capsys):
    code, summary = _check(capsys, "sample:mul_add", "--pipeline", "zero")
    assert code == 0 and summary["ok"] is True
    assert summary["failed_stage"] is None and summary["error"] is None
    assert [s["pass"] for s in summary["steps"]] == ["LegalizeOps", "AnnotateTIROpPattern",
                                                    "FoldConstant", "FuseOps", "FuseTIR"]
    assert all(isinstance(s["changed"], bool) and s["seconds"] >= 0 for s in summary["steps"])
    assert summary["max_abs_error"] < 1e-5
    assert summary["tvm_ms"] > 0 and summary["torch_ms"] > 0


def test_check_course_pipeline_rewrites_to_ewise_fma(capsys):
    code, summary = _check(capsys, "sample:mul_add", "--pipeline", "course")
    assert code == 0, summary["error"]
    assert summary["steps"][0] == {**summary["steps"][0], "pass": "EwiseFMA", "changed": True}


def test_missing_file_fails_at_load_with_a_message(capsys, tmp_path):
    code, summary = _check(capsys, str(tmp_path / "nope.py"))
    assert code == 1 and summary["ok"] is False
    assert summary["failed_stage"] == "load"
    assert "nope.py" in summary["error"]
    assert summary["steps"] == []


def test_unknown_pipeline_is_a_clear_error(capsys):
    code, summary = _check(capsys, "sample:mul_add", "--pipeline", "warp-speed")
    assert code == 1 and "warp-speed" in summary["error"] and "zero" in summary["error"]


def test_import_failure_names_the_fx_node_and_op(capsys, tmp_path):
    model = tmp_path / "erf.py"
    model.write_text(
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return torch.special.erfinv(x) + 1\n"
        "def get_model():\n"
        "    return M(), (torch.rand(2, 3) * 0.5,)\n"
    )
    code, summary = _check(capsys, str(model))
    assert code == 1
    assert summary["failed_stage"] == "import"
    assert "erfinv" in summary["error"] and "aten.erfinv" in summary["error"]


def test_export_writes_scripts_params_diffs_summary_and_report(tmp_path, capsys):
    out = tmp_path / "trace"
    assert main(["export", "sample:mlp", "--pipeline", "zero", "--out", str(out)]) == 0
    steps = json.loads((out / "steps.json").read_text())
    assert len(steps["steps"]) == 6
    assert (out / "report.html").read_text().count("FuseTIR") >= 1
    assert list(out.glob("step_*.py")) and list(out.glob("step_*.params"))
    assert list(out.rglob("*.diff"))


def test_entry_point_exit_code_and_stderr_message(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def get_model(:\n")
    proc = subprocess.run([sys.executable, "-m", "irviz", "check", str(bad)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 1
    assert "load failed" in proc.stderr and "bad.py" in proc.stderr
    assert "Traceback" not in proc.stderr


def _fake_gui(monkeypatch):
    """Replace the app by a recorder: these tests must never open a window."""
    from irviz.cli import main as cli

    opened = []
    monkeypatch.setitem(cli.COMMANDS, "gui", cli.COMMANDS["gui"]._replace(
        run=lambda args: opened.append(args.model) or 0))
    return opened


def test_an_unknown_first_word_is_an_error_listing_the_commands(capsys, monkeypatch):
    from irviz.cli import main as cli

    opened = _fake_gui(monkeypatch)
    assert main(["chekc", "sample:mlp"]) == 2
    err = capsys.readouterr().err
    assert "'chekc'" in err and all(name in err for name in cli.COMMANDS)
    assert main(["nope.py:get_model"]) == 2       # FILE.py:NAME of a file that is not there
    assert opened == []


def test_a_model_as_first_word_opens_the_app(monkeypatch, tmp_path):
    opened = _fake_gui(monkeypatch)
    model = tmp_path / "m.py"
    model.write_text("")
    for word in ("sample:mlp", str(model), f"{model}:get_model"):
        assert main([word]) == 0
    assert main([]) == 0 and main(["gui", "sample:mlp"]) == 0
    assert opened == ["sample:mlp", str(model), f"{model}:get_model", None, "sample:mlp"]


def test_every_command_in_the_table_has_help(capsys):
    from irviz.cli import main as cli

    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    listing = capsys.readouterr().out
    for name, command in cli.COMMANDS.items():
        assert command.help and name in listing
        with pytest.raises(SystemExit) as exc:
            main([name, "--help"])
        assert exc.value.code == 0
        assert f"usage: irviz {name}" in capsys.readouterr().out


def test_entry_point_refuses_an_unknown_word_and_lists_samples():
    proc = subprocess.run([sys.executable, "-m", "irviz", "frobnicate"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and "check" in proc.stderr and "samples" in proc.stderr
    assert proc.stdout == ""
    proc = subprocess.run([sys.executable, "-m", "irviz", "samples"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith("mlp\t")


def test_each_command_is_a_module_that_imports_what_the_commands_share_never_the_table():
    """irviz/cli/main.py holds the table and imports every command's module; a command module
    imports the shared helpers (common, graph_breaks), core, and (the app's) ui, never the table;
    every command that opens a model does so through common."""
    import ast

    from irviz.cli.main import COMMANDS

    root = Path(__file__).resolve().parents[2] / "irviz" / "cli"
    modules = {p.stem for p in root.glob("*.py")} - {"__init__", "__main__", "main", "common", "graph_breaks"}
    owners = {cmd.run.__module__.rsplit(".", 1)[1] for cmd in COMMANDS.values()}
    assert owners == modules  # one module per command (check and export, compare and query apart)
    for name in sorted(modules):
        tree = ast.parse((root / f"{name}.py").read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | \
            {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        irviz_mods = {m for m in imported if m and m.startswith("irviz")}
        helpers = {"irviz.cli.common", "irviz.cli.graph_breaks"}
        assert all(m in helpers or m.startswith(("irviz.core", "irviz.ui")) for m in irviz_mods), name
        if name in ("check", "export", "compare", "query", "bisect", "code", "tune"):
            assert "irviz.cli.common" in irviz_mods, name


_NO_REFERENCE = '''
from tvm.script import ir as I
from tvm.script import relax as R


@I.ir_module
class Mod:
    @R.function
    def main(x: R.Tensor((4,), "float32")):
        with R.dataflow():
            y = R.add(x, x)
            R.output(y)
        return y
'''


def test_check_without_a_reference_says_ran_not_judged(tmp_path, capsys):
    # exit 0 (nothing failed) but no "OK": there was nothing to judge the numbers against
    path = tmp_path / "no_ref.py"
    path.write_text(_NO_REFERENCE)
    code = main(["check", str(path), "--repeats", "1"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.strip().splitlines()[-1] == "ran, not judged: no reference to compare with"
    assert "OK" not in out.split()
    code = main(["check", str(path), "--repeats", "1", "--json", "-"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["ok"] is True
    assert summary["reference"] == "none" and summary["verdict"] == "not judged"


_BATCHED_MATMUL = '''
from tvm.script import ir as I
from tvm.script import relax as R


@I.ir_module
class Mod:
    @R.function
    def main(x: R.Tensor((2, 4, 8), "float32"), w: R.Tensor((8, 3), "float32"),
             b: R.Tensor((3,), "float32")):
        with R.dataflow():
            y = R.add(R.matmul(x, w), b)
            R.output(y)
        return y
'''


def test_check_output_says_why_a_pass_did_nothing_and_which_changed_only_attributes(tmp_path, capsys):
    path = tmp_path / "batched.py"
    path.write_text(_BATCHED_MATMUL)
    argv = ["check", str(path), "--repeats", "1", "--pipeline",
            "MatmulAddFuse,LegalizeOps,AnnotateTIROpPattern"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "MatmulAddFuse matches 2-D matmul only" in out
    assert "attributes only" in out
    assert main([*argv, "--json", "-"]) == 0
    steps = json.loads(capsys.readouterr().out)["steps"]
    assert [s["changed_what"] for s in steps] == ["none", "ir", "attrs"]
    assert any("2-D matmul only" in n for n in steps[0]["notes"])
    assert steps[2]["changed"] is True and steps[2]["notes"] == []
