"""Latency across the pipeline: every step built and timed, unbuildable steps reported, the SVG chart."""
import xml.etree.ElementTree as ET

import pytest

from irviz.core.backend import build as build_mod
from irviz.core.frontend import capture
from irviz.core.frontend import importer
from irviz.core.frontend import model_file
from irviz.core import passes
from irviz.core.errors import BuildError
from irviz.core.backend.latency import latency_trace
from irviz.core.views.latency_svg import latency_svg, log_ticks, torch_ms_of
from irviz.core.session import Session

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def mlp():
    loaded = model_file.load_model("sample:mlp")
    captured = capture.capture(loaded)
    s = Session(importer.import_model(captured), captured)
    s.set_pipeline(passes.get_pipeline("zero"))
    assert s.run_to_end() is not None
    return s, loaded


@pytest.fixture(scope="module")
def trace(mlp):
    s, loaded = mlp
    seen = []
    tr = latency_trace(s, loaded, repeats=2, progress=lambda text, f: seen.append((text, f)))
    return tr, seen


def test_every_zero_step_builds_runs_and_matches(mlp, trace):
    s, _ = mlp
    tr, _ = trace
    assert [e["step"] for e in tr] == list(range(len(s.steps)))
    assert [e["pass"] for e in tr] == [st.pass_name for st in s.steps]
    for e in tr:
        assert e["ok"] and e["error"] is None, e
        assert e["tvm_ms"] > 0 and e["torch_ms"] > 0 and e["build_seconds"] > 0
        assert e["allclose"] is True and e["max_abs_error"] < 1e-4


def test_progress_once_per_step_then_done(trace):
    tr, seen = trace
    assert len(seen) == len(tr) + 1
    assert [f for _, f in seen] == sorted(f for _, f in seen) and seen[-1][1] == 1.0
    assert "step 0 (import)" in seen[0][0]


def test_cache_reuses_unchanged_modules(mlp):
    s, loaded = mlp
    cache = {}
    first = latency_trace(s, loaded, steps=[0, -1], repeats=1, cache=cache)
    assert [e["cached"] for e in first] == [False, False] and len(cache) == 2
    again = latency_trace(s, loaded, steps=[-1], repeats=1, cache=cache)
    assert again[0]["cached"] is True and again[0]["tvm_ms"] == first[1]["tvm_ms"]
    with pytest.raises(IndexError):
        latency_trace(s, loaded, steps=[99])


def test_a_trace_for_another_cpu_builds_for_it_and_is_not_the_hosts_cached_figure(mlp, monkeypatch):
    from irviz.core.target import not_runnable_here, resolve_target

    avx2 = resolve_target("x86-avx2")
    if not_runnable_here(avx2) is not None:
        pytest.skip("this CPU cannot run AVX2 code")
    s, loaded = mlp
    cache, targets = {}, []
    real = build_mod.build
    monkeypatch.setattr(build_mod, "build", lambda mod, target=None: targets.append(target) or real(mod, target))
    latency_trace(s, loaded, steps=[-1], repeats=1, cache=cache)
    again = latency_trace(s, loaded, steps=[-1], repeats=1, cache=cache, target=avx2)
    assert again[0]["cached"] is False and len(cache) == 2
    assert targets[0] is None and str(targets[-1].attrs["mcpu"]) == "haswell"


def test_a_step_that_cannot_build_reports_its_error(mlp, monkeypatch):
    s, loaded = mlp
    real = build_mod.build
    broken = s.steps[2].mod

    def fake_build(mod, target=None):
        if mod.same_as(broken):
            raise BuildError("default_build pass CallTIRRewrite failed: boom", "hint")
        return real(mod, target)

    monkeypatch.setattr(build_mod, "build", fake_build)
    tr = latency_trace(s, loaded, steps=[1, 2, 3], repeats=1)
    assert [e["ok"] for e in tr] == [True, False, True]
    bad = tr[1]
    assert "boom" in bad["error"] and bad["tvm_ms"] is None and bad["torch_ms"] is None
    assert bad["allclose"] is None
    svg = latency_svg(tr)
    root = ET.fromstring(svg)
    assert len(root.findall(f".//{SVG}circle[@class='point']")) == 2
    assert len(root.findall(f".//{SVG}g[@class='unbuilt']")) == 1
    assert "boom" in svg  # the error is in the marker's tooltip


def test_svg_is_xml_with_a_point_per_built_step_and_a_torch_line(trace):
    tr, _ = trace
    svg = latency_svg(tr, width=800, height=360, title="mlp <zero>")
    root = ET.fromstring(svg)  # valid XML (the title is escaped)
    assert root.tag == f"{SVG}svg" and root.get("width") == "800"
    points = root.findall(f".//{SVG}circle[@class='point']")
    assert len(points) == sum(1 for e in tr if e["ok"])
    torch = root.findall(f".//{SVG}line[@class='torch']")
    assert len(torch) == 1 and torch[0].get("stroke-dasharray")
    assert torch[0].get("y1") == torch[0].get("y2")  # horizontal
    texts = "".join(t.text or "" for t in root.iter(f"{SVG}text"))
    assert "FuseTIR" in texts and "torch eager" in texts


def test_log_scale_puts_slower_steps_higher():
    tr = [{"step": 0, "pass": "a", "ok": True, "tvm_ms": 1.0, "torch_ms": 5.0},
          {"step": 1, "pass": "b", "ok": True, "tvm_ms": 100.0, "torch_ms": 6.0}]
    root = ET.fromstring(latency_svg(tr))
    ys = [float(c.get("cy")) for c in root.findall(f".//{SVG}circle[@class='point']")]
    assert ys[1] < ys[0]  # 100 ms is higher up (smaller y)
    assert torch_ms_of(tr) == 5.0
    lo, hi, ticks = log_ticks(1.0, 100.0)
    assert lo <= 1.0 and hi >= 100.0 and 10.0 in ticks


def test_empty_and_all_failed_traces_still_give_svg():
    ET.fromstring(latency_svg([]))
    root = ET.fromstring(latency_svg([{"step": 0, "pass": "import", "ok": False, "error": "x"}]))
    assert "could be built" in "".join(t.text or "" for t in root.iter(f"{SVG}text"))


def test_engine_latency_trace_streams_progress_caches_and_feeds_the_report(tmp_path):
    from irviz import engine as engine_mod

    sent = []
    eng = engine_mod.Engine(type("C", (), {"send": lambda self, m: sent.append(m)})())
    assert eng.handle({"id": 1, "cmd": "open", "args": {"spec": "sample:mul_add"}})["ok"]
    assert eng.handle({"id": 2, "cmd": "run_to_end"})["ok"]
    reply = eng.handle({"id": 3, "cmd": "latency_trace", "args": {"repeats": 1}})
    assert reply["ok"], reply
    r = reply["result"]
    n = len(eng.session.steps)
    assert [e["step"] for e in r["trace"]] == list(range(n))
    assert all(e["ok"] and e["tvm_ms"] > 0 for e in r["trace"])
    assert r["torch_ms"] > 0 and r["reference"] is True and r["planned"] == 0
    progress = [m for m in sent if m.get("id") == 3 and "progress" in m]
    assert len(progress) == n + 1 and progress[-1]["fraction"] == 1.0
    again = eng.handle({"id": 4, "cmd": "latency_trace", "args": {"steps": [-1]}})["result"]
    assert again["trace"][0]["cached"] is True and again["trace"][0]["step"] == n - 1
    bad = eng.handle({"id": 5, "cmd": "latency_trace", "args": {"steps": [99]}})
    assert not bad["ok"] and bad["error"]["stage"] == "request"
    eng.handle({"id": 6, "cmd": "latency_trace", "args": {"repeats": 1}})
    assert eng.handle({"id": 7, "cmd": "export", "args": {"out_dir": str(tmp_path)}})["ok"]
    assert "Latency per step" in (tmp_path / "report.html").read_text(encoding="utf-8")
