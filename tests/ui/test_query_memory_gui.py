"""The Relax pane's query box and the Run pane's Memory tab against a real engine."""
import os

import pytest

T = 120_000


@pytest.fixture
def win(qtbot, real_window):
    return real_window


def _shot(widget, name):
    folder = os.environ.get("IRVIZ_SHOTS")
    if folder:
        widget.grab().save(os.path.join(folder, name))


def test_query_box_counts_highlights_and_steps_through_matches(qtbot, win):
    win.open_spec("sample:mlp", pipeline="zero")
    qtbot.waitUntil(lambda: win.all_filled() or win.last_error is not None, timeout=T)
    assert win.last_error is None, win.last_error
    relax = win.relax
    relax.query_box.setText("matmul -> add -> relu")
    relax.run_query()
    qtbot.waitUntil(lambda: relax.query_result is not None, timeout=T)
    assert relax.matches_here() == [["lv1", "lv2", "lv3"]]
    assert relax.graph.highlighted("found") == {"lv1", "lv2", "lv3"}
    assert relax.query_info.text().startswith("1 here")
    relax.goto_match(+1)
    assert relax.query_info.text().startswith("1/1 here")
    assert [relax.query_list.itemText(i) for i in range(relax.query_list.count())] == ["1: lv1 → lv2 → lv3"]
    assert relax.query_list.currentIndex() == 0 and relax.graph.selected() == "lv3"
    _shot(relax, "relax_query.png")

    relax.query_box.setText("matmul -> (relu")
    relax.run_query()
    qtbot.waitUntil(lambda: relax.query_result is None and "column" in relax.query_info.text(), timeout=T)
    assert "column 11" in relax.query_info.text()
    assert not relax.graph.highlighted("found")
    _shot(relax, "relax_query_error.png")
    relax.query_box.setText("")
    relax.run_query()


def test_memory_tab_plans_the_step_and_selects_bindings(qtbot, win):
    run = win.run
    run.tabs.setCurrentIndex(run.tabs.count() - 1)
    run.plan_memory()
    qtbot.waitUntil(lambda: run.memory_view.plan is not None or "failed" in run.memory_status.text(), timeout=T)
    plan = run.memory_view.plan
    assert plan is not None, run.memory_status.text()
    assert plan["planned_by_step"] is False and plan["tokens"] == len(plan["token_list"]) >= 1
    assert plan["planned_bytes"] <= plan["tensor_bytes"]
    assert len(run.memory_view.rows) == len(plan["tensors"])
    seen = []
    run.memory_view.tensorSelected.connect(seen.append)
    from PySide6.QtCore import QPoint, Qt
    from PySide6.QtTest import QTest

    QTest.mouseClick(run.memory_view, Qt.MouseButton.LeftButton, pos=QPoint(300, 56 + 9))
    assert seen == [run.memory_view.binding_of(run.memory_view.rows[0][1])]
    win.resize(1600, 1000)
    _shot(run, "run_memory.png")
