"""A diff of thousands of changed lines (an 8B LLM's LegalizeOps changes 3,000 lines of main): its
colours reach Qt for the lines around the view only (Qt lays out every line it is given a colour
for), and follow the view when it scrolls."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtGui import QTextFormat

N = 3000


def big_diff() -> dict:
    # two changed lines, one the same, over and over: thousands of coloured runs
    rows = [[k + 1, f"    lv{k} = R.matmul(x{k}, w{k})", k + 1,
             f"    lv{k} = R.call_tir(cls.matmul{k}, (x{k}, w{k}))", "replace", [[9, 17]], [[9, 19]]]
            if k % 3 else [k + 1, f"    gv{k} = R.add(x, y)", k + 1, f"    gv{k} = R.add(x, y)", "equal"]
            for k in range(N)]
    return {"unified": "", "functions": [{"name": "main", "status": "changed", "rows": rows}]}


def coloured_blocks(view) -> set[int]:
    """Blocks with a full-line background among the selections Qt has (2 in 3 rows changed: 2 in
    3 lines side by side, 4 in 5 unified)."""
    out = set()
    for sel in view.extraSelections():
        if sel.format.property(QTextFormat.Property.FullWidthSelection):
            doc = view.document()
            first = doc.findBlock(sel.cursor.selectionStart()).blockNumber()
            last = doc.findBlock(sel.cursor.selectionEnd()).blockNumber()
            out.update(range(first, last + 1))
    return out


@pytest.mark.parametrize("mode", ["side", "unified"])
def test_colours_of_a_big_diff_reach_qt_around_the_view_and_follow_it(qtbot, mode):
    from irviz.ui.widgets.diff_view import DiffView
    from irviz.ui.widgets.idle_work import idle_work

    v = DiffView()
    qtbot.addWidget(v)
    v.resize(900, 700)
    v.show()
    v.set_mode(mode)
    v.set_diff(big_diff())
    view = v.right if mode == "side" else v.unified
    while idle_work().pending(view):
        idle_work()._turn()
    qtbot.wait(10)
    first = view.firstVisibleBlock().blockNumber()
    near = coloured_blocks(view)
    assert len(near & set(range(first, first + 30))) >= 15
    assert len(view.extraSelections()) < 800        # not one per changed run (2,000-4,000)
    assert max(near) < first + 400
    # scrolled to the far end: those lines are coloured now (and the first ones no longer)
    view.verticalScrollBar().setValue(view.verticalScrollBar().maximum())
    qtbot.wait(10)
    last = view.firstVisibleBlock().blockNumber()
    assert last > 2000
    near = coloured_blocks(view)
    assert len(near & set(range(last, last + 30))) >= 15 and not near & set(range(0, 30))
    if mode == "side":   # the changed words too, on the lines in view
        spans = [s for s in view.extraSelections()
                 if not s.format.property(QTextFormat.Property.FullWidthSelection)]
        assert spans and all(view.document().findBlock(s.cursor.selectionStart()).blockNumber() >= last - 200
                             for s in spans)


def test_switching_back_to_a_mode_draws_it_again_only_when_something_changed(qtbot):
    from irviz.ui.widgets.diff_view import DiffView

    v = DiffView()
    qtbot.addWidget(v)
    v.set_diff(big_diff())
    hunks, texts = v.hunk_count(), []
    assert hunks > 100
    real = v.right.set_text
    v.right.set_text = lambda text, *a, **k: (texts.append(text), real(text, *a, **k))
    v.set_mode("unified")
    assert v.unified.toPlainText().count("\n") > N
    v.set_mode("side")
    assert texts == [] and v.hunk_count() == hunks and v.current_hunk() == 0
    # marked bindings: the next switch draws the side again, with them
    v.set_marked_bindings({"lv2": {"fx_node": "linear", "max_abs": 1.0}}, "lv2")
    v.set_mode("unified")
    v.set_mode("side")
    assert len(texts) == 1 and [v.right.toPlainText().split("\n")[b].split("=")[0].strip()
                                for b in v.marked_blocks] == ["lv2"]
