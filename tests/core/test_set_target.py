"""The engine's set_target: the applied passes run again under the chosen target, back to the same
step (a CPU target's vector width shows in the tiles), builds are for it, a bad target changes
nothing; a pipeline text may name the target, and a replay restores it."""
import re

import pytest

from irviz.core.target import cpu_info
from irviz.engine import Engine


def _engine():
    return Engine(type("C", (), {"send": lambda self, m: None})())


def _ask(eng, cmd, **args):
    return eng.handle({"id": 1, "cmd": cmd, "args": args})


def _tile_lanes(eng) -> set[str]:
    """The float32 lanes the reduction tiles were searched for, as the last step records them (the
    sample's one-row matmuls are matrix-vector kernels: their panel search's records)."""
    script = eng.ws.session.steps[-1].mod.script()
    return {w.split("lanes")[1].split('\\"')[0] for w in re.split("mat(?:mul|vec)-tile", script)[1:]}


@pytest.fixture(scope="module")
def tir_cpu():
    eng = _engine()
    assert _ask(eng, "open", spec="sample:mlp", pipeline="tir-cpu")["ok"]
    assert _ask(eng, "run_to_end")["ok"]
    assert _ask(eng, "back")["ok"]
    return eng


def test_a_cpu_target_reapplies_the_passes_with_its_vector_width_to_the_same_step(tir_cpu):
    eng = tir_cpu
    before = _ask(eng, "state")["result"]
    assert before["target"] is None and _tile_lanes(eng) == {str(cpu_info().vector_lanes)}
    rep = _ask(eng, "set_target", target="aarch64")
    assert rep["ok"], rep
    st = rep["result"]
    assert st["target"] == "aarch64" and st["cursor"] == before["cursor"]
    assert [s["pass"] for s in st["steps"]] == [s["pass"] for s in before["steps"]]
    assert st["planned"] == before["planned"]
    assert st["pipeline_text"] == "target=aarch64; " + before["pipeline_text"]
    assert _tile_lanes(eng) == {"4"}  # NEON: 4 float32 lanes
    run = _ask(eng, "build_run")
    assert not run["ok"] and run["error"]["message"].startswith("built for aarch64; no such device here, not run")

    for bad, says in (('{"kind": "llvm"', "is not valid JSON"), ("sparc", "unknown target 'sparc'"),
                      ('{"kind": "cuda"}', "schedules for a CPU, but the target is a GPU"),
                      ('{"kind": "vulkan"}', "cannot build for target 'vulkan'")):
        rep = _ask(eng, "set_target", target=bad)
        assert not rep["ok"] and says in rep["error"]["message"], rep["error"]
        assert eng.ws.target.name == "aarch64" and _tile_lanes(eng) == {"4"}  # unchanged
    planned = _ask(eng, "state")["result"]["planned"]
    rep = _ask(eng, "set_pipeline", pipeline="gpu")  # dlight's GPU rules under a CPU target
    assert not rep["ok"] and "GPU" in rep["error"]["message"] and rep["state"]["planned"] == planned
    st = _ask(eng, "set_target", target="host")["result"]
    assert st["target"] is None and _tile_lanes(eng) == {str(cpu_info().vector_lanes)}


def test_a_pasted_text_with_a_target_sets_both_and_a_replay_restores_the_target():
    eng = _engine()
    assert _ask(eng, "open", spec="sample:mlp", pipeline="target=x86-avx2; zero")["ok"]
    assert eng.ws.target.name == "x86-avx2"
    st = _ask(eng, "run_to_end")["result"]
    rep = _ask(eng, "set_pipeline", text="target=aarch64; zero")
    assert rep["ok"], rep
    st = rep["result"]
    assert st["target"] == "aarch64" and st["cursor"] == 5 and st["pipeline_text"].startswith("target=aarch64; ")
    assert str(eng.ws.build_target().attrs["mtriple"]) == "aarch64-linux-gnu"

    fresh = _engine()
    rep = _ask(fresh, "replay", spec="sample:mlp", applied=[s["pass"] for s in st["steps"][1:]],
               cursor=st["cursor"], target=st["target"])
    assert rep["ok"], rep
    assert rep["result"]["target"] == "aarch64" and rep["result"]["cursor"] == 5
    assert not _ask(fresh, "replay", spec="sample:mlp", target="{nope")["ok"]


def test_the_gpu_pipeline_runs_its_rules_again_under_a_chosen_gpu_target():
    eng = _engine()
    assert _ask(eng, "open", spec="sample:mlp", pipeline="gpu")["ok"]
    st = _ask(eng, "run_to_end")["result"]
    assert eng.ws.target_name == "cuda"  # none chosen: the GPU passes' default
    rep = _ask(eng, "set_target", target="cuda -arch=sm_86")
    assert rep["ok"], rep
    assert [s["pass"] for s in rep["result"]["steps"]] == [s["pass"] for s in st["steps"]]
    assert str(eng.ws.session.target.attrs["arch"]) == "sm_86"
    rep = _ask(eng, "set_target", target="aarch64")  # dlight's GPU rules refuse a CPU target
    assert not rep["ok"] and eng.ws.target.name == "cuda -arch=sm_86"
