"""The Run pane's kernel table: columns are a list, a new one is one add_column."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

pytest.importorskip("pytestqt")

KERNELS = [{"name": "add", "calls": 1, "ms": 0.1, "binding": "lv1"},
           {"name": "matmul", "calls": 2, "ms": 0.3, "binding": "lv, lv2"}]


def test_rows_sorted_by_time_and_a_click_names_the_binding(qtbot):
    from irviz.ui.panes.kernel_table import KernelTable

    t = KernelTable()
    qtbot.addWidget(t)
    t.set_kernels(KERNELS)
    assert [t.item(r, 0).text() for r in range(2)] == ["matmul", "add"]
    assert t.item(0, t.column_index("%")).text() == "75.0"
    with qtbot.waitSignal(t.bindingClicked) as sig:
        t.selectRow(0)
    assert sig.args == ["lv"]


def test_a_column_added_after_another_fills_from_the_context(qtbot):
    from irviz.ui.panes.kernel_table import Column, KernelTable, Num

    t = KernelTable()
    qtbot.addWidget(t)
    t.set_kernels(KERNELS)
    t.add_column(Column("Doubled", lambda k, c: Num(c.get("factor", 1) * k["ms"],
                                                      f"{c.get('factor', 1) * k['ms']:.1f}")), after="ms")
    col = t.column_index("Doubled")
    assert col == t.column_index("ms") + 1 and t.horizontalHeaderItem(col).text() == "Doubled"
    t.set_context(factor=2)
    assert t.kernel_at(0)["name"] == "matmul" and t.item(0, col).text() == "0.6"
