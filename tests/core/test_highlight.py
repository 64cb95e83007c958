"""The shared code highlighter: report.html's diff lines keep their text and marks."""
from __future__ import annotations

import html
import re

from irviz.core.views.highlight import code_lexer, highlighted_html, html_style_defs

LINE = '    lv: R.Tensor((1, 3), dtype="float32") = R.add(x, y)  # a < b'


def _text(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def test_line_text_is_kept_exactly():
    for line in (LINE, "", "   ", "def f():", 'x = "unterminated'):
        assert _text(highlighted_html(line)) == line


def test_changed_ranges_are_marked_and_tokens_coloured():
    out = highlighted_html(LINE, [(4, 6), (46, 49)])
    assert re.findall(r"<mark>(.*?)</mark>", out) and \
        [_text(m) for m in re.findall(r"<mark>(.*?)</mark>", out)] == ["lv", "add"]
    # the string token is coloured as one span; how its quotes are escaped is pygments' choice
    strings = [_text(m) for m in re.findall(r'<span class="hl-s2">(.*?)</span>', out)]
    assert strings == ['"float32"']
    assert ".diff .hl-s2 {" in html_style_defs(".diff")


def test_one_lexer_for_every_view():
    assert code_lexer() is code_lexer()
    assert code_lexer().name == "Python"
