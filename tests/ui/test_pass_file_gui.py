"""Load passes… with the course chapter's passes (they take the built-in course passes' names), with
the real engine: the steps already applied stay the built-ins (builtin:NAME), and the pane says
whose each pass is."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

pytest.importorskip("pytestqt")

from irviz.core.frontend.sample_files import sample_path

T = 180_000


def test_load_passes_taking_builtin_names(qtbot, real_window):
    win = real_window
    win.open_spec("sample:course_chapter_passes", pipeline="MatmulAddFuse,LowerToTensorIR,FuseTIR")
    qtbot.waitUntil(lambda: bool(win.state.get("model")) or win.last_error is not None, timeout=T)
    assert win.last_error is None, win.last_error
    pane = win.pipeline
    pane.step()
    qtbot.waitUntil(lambda: len(win.state.get("steps") or []) == 2, timeout=T)

    path = str(sample_path("course_chapter_passes"))
    pane.load_pass_file(path)
    qtbot.waitUntil(lambda: "builtin:MatmulAddFuse" in [s["pass"] for s in win.state["steps"]]
                    or win.last_error is not None, timeout=T)
    assert win.last_error is None, win.last_error
    assert [p["name"] for p in win.state["planned"]] == ["builtin:LowerToTensorIR", "FuseTIR"]
    assert pane.info.text() == ("Loaded MatmulAddFuse, LowerToTensorIR from course_chapter_passes.py; "
                                "the built-ins are now builtin:MatmulAddFuse, builtin:LowerToTensorIR")
    assert pane.origin("MatmulAddFuse") == f"user: {path}:107"
    assert pane.origin("builtin:MatmulAddFuse") == "built-in (course)"
    assert pane.table.item(1, 1).toolTip().splitlines()[:2] == ["builtin:MatmulAddFuse", "built-in (course)"]
    assert pane.planned_list.item(0).toolTip() == "built-in (course)"
    user_menu = next(a.menu() for a in pane.add_menu.actions() if a.text() == "user")
    labels = [a.text() for a in user_menu.actions()]
    assert "MatmulAddFuse  (course_chapter_passes.py:107)" in labels

    # the user's pass, added after the built-ins, runs as a step of its own
    pane.add_pass("MatmulAddFuse")
    qtbot.waitUntil(lambda: "MatmulAddFuse" in [p["name"] for p in win.state["planned"]], timeout=T)
    pane.run_to_end()
    qtbot.waitUntil(lambda: not win.state.get("planned") or win.last_error is not None, timeout=T)
    assert win.last_error is None, win.last_error
    names = [s["pass"] for s in win.state["steps"]]
    assert "MatmulAddFuse" in names and names[1] == "builtin:MatmulAddFuse"
    row = names.index("MatmulAddFuse")
    assert pane.table.item(row, 1).toolTip().splitlines()[1] == f"user: {path}:107"
    if os.environ.get("IRVIZ_SHOTS"):
        qtbot.waitUntil(win.all_filled, timeout=T)
        pane.grab().save(os.path.join(os.environ["IRVIZ_SHOTS"], "pipeline_pane_user_passes.png"))
        user_menu.popup(pane.mapToGlobal(pane.rect().center()))
        qtbot.wait(200)
        user_menu.grab().save(os.path.join(os.environ["IRVIZ_SHOTS"], "pipeline_add_menu_user.png"))
        user_menu.hide()
