"""The one choice of syntax lexer for code shown to users, and its HTML rendering.

The GUI's code views and report.html colour TVMScript the same way because both take the lexer
from here.  Plain Python + pygments (no Qt, torch or TVM): the GUI process imports it.
"""
from __future__ import annotations

import functools
import io
import threading

_LEXER = None
_LEXER_LOCK = threading.Lock()

HTML_CLASS_PREFIX = "hl-"   # keeps pygments' short classes apart from the page's own


_OTHER_LEXERS: dict = {}


def code_lexer(language: str = "python"):
    """TVMScript is Python syntax.  One lexer for every view: building one compiles its
    regexes (~0.5 s), so only when first needed, and once even when two threads ask.
    `language`: another pygments lexer by name, for the code a kernel becomes ("gas", "llvm",
    "cuda", "c", "wgsl"); an unknown name gets plain text."""
    global _LEXER
    with _LEXER_LOCK:
        if language != "python":
            if language not in _OTHER_LEXERS:
                from pygments.lexers import get_lexer_by_name
                from pygments.util import ClassNotFound

                try:
                    _OTHER_LEXERS[language] = get_lexer_by_name(language)
                except ClassNotFound:
                    _OTHER_LEXERS[language] = get_lexer_by_name("text")
            return _OTHER_LEXERS[language]
        if _LEXER is None:
            from pygments.lexers.python import PythonLexer

            _LEXER = PythonLexer()
    return _LEXER


@functools.lru_cache(maxsize=2)
def html_formatter(style: str = "default"):
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(style=style, nowrap=True, classprefix=HTML_CLASS_PREFIX)


def html_style_defs(scope: str, style: str = "default") -> str:
    """CSS for the token classes :func:`highlighted_html` emits, inside ``scope``."""
    return "\n".join(html_formatter(style).get_token_style_defs(scope))


# a diff repeats most lines from step to step, and lexing is the slow part (~1 ms a line)
@functools.lru_cache(maxsize=1 << 15)
def line_tokens(text: str) -> tuple[tuple[object, str], ...]:
    """(token type, text) pieces of one line, covering it exactly."""
    toks = list(code_lexer().get_tokens(text))
    # the lexer ends its output with a newline the line does not have
    if toks and toks[-1][1].endswith("\n") and not text.endswith("\n"):
        ttype, value = toks[-1]
        toks[-1] = (ttype, value[:-1])
    return tuple((t, v) for t, v in toks if v)


def highlighted_html(text: str, marks=(), style: str = "default") -> str:
    """One code line as HTML: pygments' token spans, and ``<mark>`` around the character ranges
    ``marks`` [(start, end), ...] (the changed parts of a diff line)."""
    marks = [(max(0, s), min(e, len(text))) for s, e in (marks or []) if e > s]
    runs: list[tuple[bool, list]] = []     # (marked, tokens), neighbours merged
    pos = 0
    for ttype, piece in line_tokens(text):
        start, end = pos, pos + len(piece)
        pos = end
        cuts = {start, end}
        for s, e in marks:
            if start < s < end:
                cuts.add(s)
            if start < e < end:
                cuts.add(e)
        bounds = sorted(cuts)
        for a, b in zip(bounds, bounds[1:]):
            marked = any(s <= a and b <= e for s, e in marks)
            if runs and runs[-1][0] == marked:
                runs[-1][1].append((ttype, text[a:b]))
            else:
                runs.append((marked, [(ttype, text[a:b])]))
    fmt = html_formatter(style)
    out = []
    for marked, toks in runs:
        buf = io.StringIO()
        fmt.format(toks, buf)
        html = buf.getvalue()
        if html.endswith("\n"):     # the formatter ends every line; ours go into a <div>
            html = html[:-1]
        out.append(f"<mark>{html}</mark>" if marked else html)
    return "".join(out)
