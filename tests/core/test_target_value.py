"""A target is one value, `core.target.Target`: chosen once from what the user wrote, it knows its
TVM target, what the passes need, whether its code runs here and which CPU figures describe its
code. The planner returns it, the Workspace keeps it, and no other module turns a name into a TVM
target (a scan below keeps it so)."""
import ast
import json
from pathlib import Path

import pytest
import torch

import irviz
from irviz.cli.main import main
from irviz.core.errors import IrvizError, RequestError
from irviz.core.passes.plan import plan
from irviz.core.target import Target, cpu_info
from irviz.core.workspace import Workspace

TEXT = "target=x86-avx2; LegalizeOps"
HASWELL = {"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": "haswell"}


def test_a_named_cpu_target_knows_its_tvm_target_its_code_and_its_label():
    avx2 = Target.of(" x86-avx2 ")
    assert avx2.name == "x86-avx2" and avx2.label == "x86-avx2" and not avx2.is_host
    assert str(avx2.for_passes.attrs["mcpu"]) == "haswell" and avx2.for_passes is avx2.tvm
    assert (avx2.cpu_info.isa, avx2.cpu_info.vector_lanes, avx2.cpu_info.mcpu) == ("AVX2", 8, "haswell")
    assert avx2.cpu_info.model == cpu_info().model  # the machine the code runs on is this one
    assert not avx2.is_gpu and avx2.kind == "llvm" and avx2.as_dict() == HASWELL


def test_the_host_is_chosen_by_none_empty_or_host_and_its_passes_take_no_target():
    host = Target.of(None)
    assert host == Target.of("host") == Target.of("  ") == Target()
    assert host.name is None and host.is_host and host.for_passes is None
    assert host.not_runnable_here is None and host.device is None and not host.is_gpu
    assert host.label == f"host ({cpu_info().mcpu})" and host.cpu_info == cpu_info()


def test_two_spellings_of_one_target_are_equal_and_keep_their_own_names():
    named, as_json, as_dict = Target.of("x86-avx2"), Target.of(json.dumps(HASWELL)), Target.of(HASWELL)
    assert named == as_json == as_dict and len({named, as_json, as_dict}) == 1
    assert named.name == "x86-avx2" and as_json.name == json.dumps(HASWELL) and as_json.label == "llvm"
    assert named != Target.of("aarch64") and named != Target.of("x86-avx2 -mcpu=skylake-avx512")
    assert Target.of(named) is named


@pytest.mark.parametrize("text, says, hint", [
    ("sparc", "unknown target 'sparc'", "targets available here: host"),
    ("x86-avx2 fast", "'fast' is not an option of the form -key=value", "-arch=sm_86"),
    ('{"kind": "llvm"', "is not valid JSON", '"kind"'),
    ("x86-avx2 -no_such_attr=1", "TVM rejects target 'x86-avx2 -no_such_attr=1'", "irviz targets"),
])
def test_a_bad_target_raises_with_a_hint(text, says, hint):
    with pytest.raises(RequestError) as err:
        Target.of(text)
    assert says in err.value.message and hint in err.value.hint


def test_the_planner_returns_the_target_the_passes_ran_under():
    chosen = plan(TEXT)
    assert isinstance(chosen.target, Target) and chosen.target == Target.of("x86-avx2")
    assert chosen.target.name == "x86-avx2" and str(chosen.target.for_passes) == str(Target.of("x86-avx2").tvm)
    assert [inv.name for inv in chosen.passes] == ["LegalizeOps"]
    assert plan("zero").target.is_host and plan("zero").target.for_passes is None
    assert plan("zero", default=Target.of("aarch64")).target.name == "aarch64"
    assert plan("zero", target="aarch64", default=Target.of("x86-avx2")).target.name == "aarch64"
    with pytest.raises(IrvizError, match="differ"):
        plan(TEXT, target="aarch64")


def test_a_gpu_targets_code_on_a_machine_without_that_gpu_is_built_not_run():
    cuda = Target.of("cuda")
    assert cuda.is_gpu and cuda.kind == "cuda" and cuda.label == "cuda"
    assert cuda.cpu_info == cpu_info()  # a GPU's code: the host's CPU line as it is
    why = cuda.not_runnable_here
    if why is None:
        pytest.skip("a CUDA device TVM can run on is here")
    assert "cuda" in why and cuda.device is None


def test_the_workspace_keeps_the_target_it_planned_and_a_bad_name_changes_nothing():
    ws = Workspace()
    assert ws.target.is_host
    ws.open("sample:mlp", planned=TEXT)
    assert isinstance(ws.target, Target) and ws.target == Target.of("x86-avx2")
    assert ws.session.chosen_target is ws.target.for_passes
    assert ws.builds_for is ws.target and ws.build_target() is ws.target.for_passes
    assert ws.builds_for.cpu_info.vector_lanes == 8
    ws.set_pipeline("target=aarch64; zero", whole=True)
    assert ws.target.name == "aarch64" and ws.not_run_reason() == ws.target.not_runnable_here
    with pytest.raises(RequestError, match="unknown target"):
        ws.set_target("sparc")
    assert ws.target.name == "aarch64"
    ws.set_target(None)
    assert ws.target.is_host and ws.session.chosen_target is None


class _Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        return torch.relu(self.fc(x))


def test_the_notebook_api_and_the_cli_agree_on_the_target_of_one_pipeline_text(tmp_path, capsys):
    torch.manual_seed(0)
    report = irviz.report(_Mlp().eval(), (torch.randn(2, 8),), pipeline=TEXT, build=False)
    out = tmp_path / "check.json"
    main(["check", "sample:mlp", "--pipeline", TEXT, "--json", str(out), "--repeats", "1", "--no-estimate"])
    capsys.readouterr()
    summary = json.loads(out.read_text())
    assert report.error is None and report.target == summary["target"] == "x86-avx2"
    assert Target.of(report.target).as_dict() == summary["target_dict"] == HASWELL


# Turning a name into a TVM target belongs to core/target.py, where these are defined and where
# Target.of calls them; every other module asks a Target (Target.of, for_passes, tvm, ...), so a
# name means the same target in the CLI, the engine, the notebook API and the app.
_RESOLVERS = {"resolve_target", "pass_target", "target_spec", "normalised_target"}
_ALLOWED = {"irviz/core/target.py"}


def _uses(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            out += [f"{node.lineno}: imports {a.name}" for a in node.names if a.name in _RESOLVERS]
        elif isinstance(node, ast.Call):
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if name in _RESOLVERS:
                out.append(f"{node.lineno}: calls {name}")
    return out


def test_no_module_but_the_target_module_turns_a_name_into_a_tvm_target():
    root = Path(irviz.__file__).resolve().parent.parent
    found = [f"{rel}:{use}" for path in sorted((root / "irviz").rglob("*.py"))
             if (rel := path.relative_to(root).as_posix()) not in _ALLOWED for use in _uses(path)]
    assert not found, "resolve the target through core.target.Target instead:\n" + "\n".join(found)
