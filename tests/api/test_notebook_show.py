"""irviz.show(obj) starts the real app as a process of its own, on the file it wrote for obj:
offscreen to a PNG (snapshot=), or as a window that keeps running until closed."""
import time
from pathlib import Path

import pytest

tvm = pytest.importorskip("tvm")
pytest.importorskip("PySide6")

from tvm.script import ir as I
from tvm.script import relax as R

import irviz
from irviz.core.frontend.ir_file import ir_file_spec, load_ir_file
from irviz.core.tvm_compat import structural_equal


@I.ir_module
class MyModule:
    @R.function
    def main(x: R.Tensor((1, 128), "float32"), w: R.Tensor((128, 128), "float32")):
        with R.dataflow():
            lv0 = R.matmul(x, w)
            lv1 = R.nn.relu(lv0)
            R.output(lv1)
        return lv1


@pytest.fixture
def offscreen(monkeypatch):
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
    monkeypatch.setenv("IRVIZ_ENGINE_SPARE", "0")


def test_show_with_a_snapshot_renders_the_app_on_the_module(tmp_path, offscreen):
    out = tmp_path / "shot.png"
    app = irviz.show(MyModule, snapshot=out, steps=4, size="1200x800")
    assert app.snapshot == out and app.process is None
    # the file the app opened is the module, under the name the caller gave it
    assert Path(app.file).name == "MyModule.py"
    spec = str(app.file)
    assert structural_equal(load_ir_file(*ir_file_spec(spec), spec).mod, MyModule)
    from PySide6.QtGui import QImage

    img = QImage(str(out))
    assert (img.width(), img.height()) == (1200, 800)
    colours = {img.pixel(x, y) for x in range(0, 1200, 37) for y in range(0, 800, 29)}
    assert len(colours) > 20
    assert app._repr_png_() == out.read_bytes() and out.read_bytes()[:4] == b"\x89PNG"


def _state(pid: int) -> str | None:
    """The process's state letter (R, S, Z, ...), None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _alive(pid: int) -> bool:
    return _state(pid) not in (None, "Z", "X")


def _engines(app_pid: int) -> list[int]:
    """The live irviz.engine processes whose parent is the app."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or not _alive(int(entry.name)):
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError, ValueError):
            continue
        if parent == app_pid and "irviz.engine" in cmd:
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process table from /proc")
def test_show_starts_the_app_and_its_engine_without_waiting_and_close_ends_both(offscreen):
    app = irviz.show(MyModule, pipeline="LegalizeOps,FuseOps,FuseTIR")
    try:
        assert app.running
        assert "gui" in app.process.args and "LegalizeOps,FuseOps,FuseTIR" in app.process.args
        deadline = time.monotonic() + 120
        engines = []
        while time.monotonic() < deadline and not engines and app.running:
            engines = _engines(app.process.pid)
            time.sleep(0.2)
        assert engines, f"the app started no engine; its log:\n{Path(app.log).read_text()[-2000:]}"
        assert app.running
    finally:
        app.close()
    assert not app.running
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(_alive(p) for p in engines):
        time.sleep(0.2)
    assert not any(_alive(p) for p in engines), "closing the app left its engine running"


def test_show_without_a_display_says_to_take_a_snapshot(monkeypatch):
    for var in ("QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY", "XDG_SESSION_TYPE"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(RuntimeError) as err:
        irviz.show(MyModule)
    assert "no display" in str(err.value) and "snapshot=" in str(err.value)


def test_show_refuses_a_misspelt_pass_before_starting_anything(offscreen):
    from irviz.core.errors import IrvizError

    with pytest.raises(IrvizError) as err:
        irviz.show(MyModule, pipeline="LegalizeOps,FuseOpz")
    assert "FuseOpz" in str(err.value)


def test_the_app_command_takes_the_pipeline_show_plans(monkeypatch):
    from irviz.cli import main as cli

    asked = []
    monkeypatch.setitem(cli.COMMANDS, "gui", cli.COMMANDS["gui"]._replace(
        run=lambda args: asked.append((args.model, args.pipeline)) or 0))
    assert cli.main(["sample:mlp", "--pipeline", "LegalizeOps,FuseOps"]) == 0
    assert cli.main(["gui", "sample:mlp"]) == 0
    assert asked == [("sample:mlp", "LegalizeOps,FuseOps"), ("sample:mlp", "zero")]


def test_the_notebook_example_runs_as_a_script_without_a_display(tmp_path):
    import os
    import subprocess
    import sys

    example = Path(__file__).resolve().parents[2] / "examples" / "notebook_example.py"
    env = {k: v for k, v in os.environ.items()
           if k not in ("QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY", "XDG_SESSION_TYPE")}
    env["IRVIZ_ENGINE_SPARE"] = "0"
    proc = subprocess.run([sys.executable, str(example)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "irviz report on" in proc.stdout and "FuseTIR" in proc.stdout
    assert "irviz snapshot of" in proc.stdout and (tmp_path / "mymodule.png").stat().st_size > 10_000
