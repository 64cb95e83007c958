"""The app on an IR file with schedule(sch) (offscreen, real engine): the Pipeline pane lists each
primitive as the learner's step with its line, stepping shows that primitive's diff, and a file
whose schedule fails at a primitive opens with the steps before it and says which line failed."""
from __future__ import annotations

import importlib.util
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

pytest.importorskip("pytestqt")
if importlib.util.find_spec("tvm") is None:
    pytest.skip("needs TVM in the engine", allow_module_level=True)

from irviz.core.frontend.sample_files import sample_path

T = 300_000  # ms
PRIMITIVES = ["split", "reorder", "reverse_compute_at", "parallel", "vectorize", "decompose_reduction"]


@pytest.fixture(scope="module")
def win(real_window):
    return real_window


def shot(widget, name):
    shots = os.environ.get("IRVIZ_SHOTS")
    if shots:
        widget.grab().save(os.path.join(shots, name))


def test_schedule_steps_in_the_pipeline_pane(qtbot, win):
    win.open_spec("sample:course_schedule_steps")
    qtbot.waitUntil(lambda: win.state.get("model") == "course_schedule_steps:MyModule"
                    and win.all_filled() or win.last_error is not None, timeout=T)
    assert win.last_error is None, win.last_error
    steps = win.state["steps"]
    assert [s["pass"] for s in steps[1:]] == PRIMITIVES
    assert {s["origin"] for s in steps[1:]} == {"schedule"}
    table = win.pipeline.table
    assert table.rowCount() == 1 + len(PRIMITIVES)
    split_line = steps[1]["params"]["line"]
    assert table.item(1, 1).text() == f"split · line {split_line}"
    assert "steps 1–6 are your schedule()" in win.pipeline.info.text()
    assert "j0, j1 = sch.split(j, factors=[None, 4])" in table.item(1, 1).toolTip()
    assert table.item(1, 1).font().italic()
    assert win.pipeline.planned_list.count() == 5 and win.pipeline.pipeline_box.currentText() == "zero"

    win.act_step.trigger()
    qtbot.waitUntil(lambda: win.state.get("cursor") == 1 and win.all_filled(), timeout=T)
    qtbot.waitUntil(lambda: win.diff.pair == (0, 1) and "j_0 * 4 + j_1" in win.diff.view.right.toPlainText(),
                    timeout=T)
    assert "j_0" not in win.diff.view.left.toPlainText()
    win.pipeline.jump(4)
    qtbot.waitUntil(lambda: win.state.get("cursor") == 4 and win.all_filled(), timeout=T)
    qtbot.waitUntil(lambda: win.diff.pair == (3, 4) and "T.parallel(128)" in win.diff.view.right.toPlainText(),
                    timeout=T)
    assert "T.parallel" not in win.diff.view.left.toPlainText()
    # a crashed engine is replayed from the passes alone: the file brings its schedule back
    assert win.bridge.recipe["applied"] == [] and win.bridge.recipe["cursor"] == 4
    shot(win.pipeline, "schedule_steps_pipeline.png")
    shot(win, "schedule_steps_window.png")


def test_a_failing_primitive_opens_with_the_steps_before_it(qtbot, win, tmp_path):
    src = sample_path("course_schedule_steps").read_text()
    path = tmp_path / "bad_block.py"
    path.write_text(src.replace('sch.get_sblock("C", "mm_relu")', 'sch.get_sblock("Z", "mm_relu")'))
    line = next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if '"Z"' in ln)
    win.last_error = None
    win.open_spec(str(path))
    qtbot.waitUntil(lambda: win.last_error is not None and win.state.get("model") == "bad_block:MyModule"
                    and not win.bridge.busy, timeout=T)
    assert f"bad_block.py:{line}" in win.last_error["message"]
    assert win.messages[-1].startswith("Your schedule failed") and "stays at step" not in win.messages[-1]
    assert [s["pass"] for s in win.state["steps"][1:]] == ["split", "reorder"]
    assert win.state["cursor"] == 2
    qtbot.waitUntil(lambda: win.all_filled() and not win.bridge.busy, timeout=T)
    assert f"bad_block.py:{line}" in win.status_label.text()
    assert win.pipeline.table.rowCount() == 3
    assert win.recent_files()[0] == str(path)  # it opened: File ▸ Recent has it
    shot(win, "schedule_failed_window.png")
