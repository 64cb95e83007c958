"""The code view's syntax colours go straight into the lines' layouts: a new text gets its own
colours (none of the old text's), a theme change recolours, and find marks every match."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

pytest.importorskip("pytestqt")

TEXT = '''@R.function
def main(x: R.Tensor((1, 8), "float32")):
    lv = R.add(x, x)  # twice
    return lv
'''


def colours(view, line: int) -> dict[str, str]:
    """{text: colour} of the formatted pieces of a line (0-based)."""
    block = view.document().findBlockByNumber(line)
    return {block.text()[r.start:r.start + r.length]: r.format.foreground().color().name()
            for r in block.layout().formats()}


def settle(view):
    from irviz.ui.widgets.idle_work import idle_work

    while idle_work().pending():
        idle_work()._turn()


def test_colours_follow_the_text_and_the_theme(qtbot):
    from irviz.ui import themes
    from irviz.ui.widgets.code_view import CodeView

    themes.apply_theme("light")
    v = CodeView()
    qtbot.addWidget(v)
    v.set_text(TEXT)
    settle(v)
    light = colours(v, 1)
    assert light["def"] != light.get("main") and light["float32"] not in (light["def"], "#000000")
    assert colours(v, 2)["# twice"]
    # a new text: line 1 is a comment now, coloured as one, with nothing left of `def`
    v.set_text("# only a comment\n# and another\n")
    settle(v)
    assert list(colours(v, 1)) == ["# and another"]
    v.set_text(TEXT)
    settle(v)
    try:
        themes.apply_theme("dark")
        v.restyle()
        settle(v)
        assert colours(v, 1)["def"] != light["def"]
    finally:
        themes.apply_theme("light")


def test_find_marks_every_match_and_the_view_has_those_near_it(qtbot):
    from irviz.ui.widgets.code_view import CodeView

    v = CodeView()
    qtbot.addWidget(v)
    v.resize(600, 400)
    v.show()
    v.set_text("".join(f"    lv{k} = R.add(x, lv)\n" for k in range(3000)))
    assert v.find_text("R.add")
    assert v.match_count() == 3000
    marked = [s for s in v.extraSelections() if s.cursor.selectedText() == "R.add"]
    assert 0 < len(marked) < 400
