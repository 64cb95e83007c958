"""One pipeline text, one target: the notebook API, the CLI and the app's engine plan a pipeline
and its target through the Workspace alone, so `target=x86-avx2; ...` means Haswell in all three."""
import json

import pytest
import torch

import irviz
from irviz.cli.main import main
from irviz.core.errors import IrvizError
from irviz.core.workspace import Workspace
from irviz.engine import Engine

TEXT = "target=x86-avx2; LegalizeOps"


class _Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        return torch.relu(self.fc(x))


def test_notebook_cli_and_engine_take_the_same_target_from_one_pipeline_text(capsys, tmp_path):
    torch.manual_seed(0)
    report = irviz.report(_Mlp().eval(), (torch.randn(2, 8),), pipeline=TEXT, build=False)
    assert report.error is None and report.target == "x86-avx2"

    out = tmp_path / "check.json"
    main(["check", "sample:mlp", "--pipeline", TEXT, "--json", str(out), "--repeats", "1"])
    capsys.readouterr()
    summary = json.loads(out.read_text())
    assert summary["target"] == "x86-avx2" and summary["target_dict"]["mcpu"] == "haswell"

    engine = Engine(type("C", (), {"send": lambda self, m: None})())
    reply = engine.handle({"id": 1, "cmd": "open", "args": {"spec": "sample:mlp", "pipeline": TEXT}})
    assert reply["ok"], reply
    assert reply["result"]["target"] == "x86-avx2"
    assert str(engine.ws.session.chosen_target.attrs["mcpu"]) == "haswell"
    assert reply["result"]["pipeline_text"].startswith("target=x86-avx2; ")


def test_a_target_and_a_text_naming_another_are_refused_before_anything_loads():
    ws = Workspace()
    with pytest.raises(IrvizError, match="differ"):
        ws.open("no_such_model.py", planned="target=aarch64; zero", target="x86-avx2")
    assert ws.stage == "pipeline" and ws.session is None and ws.target.is_host


def test_a_failed_open_keeps_the_session_and_its_target():
    ws = Workspace()
    ws.open("sample:mlp", planned="target=x86-avx2; zero")
    first = ws.session
    with pytest.raises(IrvizError):
        ws.open("no_such_model.py", planned="target=aarch64; zero")
    assert ws.session is first and ws.target.name == "x86-avx2"


def test_a_text_naming_its_target_mid_session_runs_the_whole_pipeline_under_it():
    ws = Workspace()
    ws.open("sample:mlp", planned="zero")
    ws.step()
    ws.set_pipeline("target=x86-avx2; LegalizeOps,FuseOps", whole=True)
    assert ws.target.name == "x86-avx2"
    assert str(ws.session.chosen_target.attrs["mcpu"]) == "haswell"
    with pytest.raises(IrvizError, match="another target"):
        ws.set_pipeline("target=aarch64; FuseTIR")
    assert ws.target.name == "x86-avx2"


def test_a_pipeline_naming_no_such_target_fails_as_the_pipeline():
    ws = Workspace()
    with pytest.raises(IrvizError, match="unknown target 'sparc'") as err:
        ws.open("sample:mlp", planned="target=sparc; zero")
    assert err.value.stage == "pipeline" and ws.session is None


def test_a_speed_figure_names_the_vector_width_of_the_code_that_ran():
    # x86-avx2 code timed on any x86 host is 8-lane code, whatever the host's own width
    from irviz.core.target import cpu_info, cpu_info_for, resolve_target

    avx2 = cpu_info_for(resolve_target("x86-avx2"))
    assert (avx2.isa, avx2.vector_lanes, avx2.mcpu) == ("AVX2", 8, "haswell")
    assert avx2.model == cpu_info().model and cpu_info_for(None) == cpu_info()
    assert cpu_info_for(resolve_target("cuda")) == cpu_info()  # a GPU's code: the host as it is
