"""`irviz snapshot` renders the real main window (with its engine) to a PNG, offscreen."""
import os
import subprocess
import sys


def test_snapshot_writes_a_window_sized_png_after_n_steps(tmp_path):
    out = tmp_path / "shot.png"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "IRVIZ_ENGINE_SPARE": "0"}
    proc = subprocess.run([sys.executable, "-m", "irviz", "snapshot", "sample:mul_add", "--steps", "2",
                           "--out", str(out), "--size", "1200x800"],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    from PySide6.QtGui import QImage

    img = QImage(str(out))
    assert (img.width(), img.height()) == (1200, 800)
    # a rendered window has many colours; a blank grab has one
    colours = {img.pixel(x, y) for x in range(0, 1200, 37) for y in range(0, 800, 29)}
    assert len(colours) > 20


def test_snapshot_of_a_missing_model_fails_with_a_message(tmp_path):
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "IRVIZ_ENGINE_SPARE": "0"}
    proc = subprocess.run([sys.executable, "-m", "irviz", "snapshot", str(tmp_path / "nope.py"),
                           "--out", str(tmp_path / "x.png"), "--timeout", "120"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode != 0
    assert "nope.py" in proc.stderr + proc.stdout
    assert not (tmp_path / "x.png").exists()


def test_snapshot_json_writes_the_run_panes_figures_as_shown(tmp_path):
    import json

    out, figures = tmp_path / "shot.png", tmp_path / "run.json"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "IRVIZ_ENGINE_SPARE": "0"}
    proc = subprocess.run([sys.executable, "-m", "irviz", "snapshot", "sample:mlp", "--steps", "1",
                           "--build-run", "--json", str(figures), "--out", str(out), "--size", "1200x800"],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    f = json.loads(figures.read_text())
    assert f["step"] == 1 and f["pipeline"] == "zero" and f["verdict"] == "PASS"
    assert f["tvm_ms"] > 0 and f["torch_ms"] > 0 and f["max_abs_error"] < 1e-4
    assert isinstance(f["reliable"], bool)
    shown = f["shown"]
    if f["reliable"]:
        assert f["reason"] is None and abs(f["ratio"] - f["tvm_ms"] / f["torch_ms"]) < 1e-9
        assert shown["ratio"] == f"{f['ratio']:.3g}×"
    else:
        assert f["ratio"] is None and shown["ratio"].startswith("unreliable")
        assert f["reason"] and f["reason"].split(" (after")[0] in f["timing_note"]
    assert shown["tvm_ms"] == f"{f['tvm_ms']:.4g} ms"


def test_snapshot_loads_pass_files_before_the_pipeline_is_read(tmp_path):
    import json

    out, figures = tmp_path / "shot.png", tmp_path / "run.json"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "IRVIZ_ENGINE_SPARE": "0"}
    chapter = "sample:course_chapter_passes"
    proc = subprocess.run([sys.executable, "-m", "irviz", "snapshot", chapter, "--passes", chapter,
                           "--pipeline", "MatmulAddFuse,LowerToTensorIR,FuseTIR", "--steps", "3",
                           "--build-run", "--json", str(figures), "--out", str(out), "--size", "1200x800"],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    f = json.loads(figures.read_text())
    assert f["step"] == 3 and f["verdict"] == "PASS" and f["max_abs_error"] < 1e-4
