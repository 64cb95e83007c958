"""Read-only code view: TVMScript highlighted as Python by pygments, line numbers, find,
and a highlight-lines API for cross-pane links."""
from __future__ import annotations

import functools
import re
import threading
import time

from PySide6.QtCore import QRect, QSize, Qt, Signal
from PySide6.QtGui import (QColor, QFont, QFontDatabase, QPainter, QTextCharFormat, QTextCursor,
                           QTextDocument, QTextFormat, QTextLayout)
from PySide6.QtWidgets import QPlainTextEdit, QTextEdit, QWidget

from irviz.core.views.highlight import code_lexer
from irviz.ui import themes
from irviz.ui.widgets.idle_work import idle_work


def mono_font(size: int = 10) -> QFont:
    f = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    f.setPointSize(size)
    f.setStyleHint(QFont.StyleHint.Monospace)
    return f


@functools.lru_cache(maxsize=4)
def _formats_for_style(style_name: str) -> dict:
    """Token type -> format, only for types the style actually styles (GUI thread)."""
    from pygments.styles import get_style_by_name

    style = get_style_by_name(style_name)
    out = {}
    for ttype, st in style:
        if not (st["color"] or st["bold"] or st["italic"]):
            continue
        fmt = QTextCharFormat()
        if st["color"]:
            fmt.setForeground(QColor("#" + st["color"]))
        if st["bold"]:
            fmt.setFontWeight(QFont.Weight.Bold)
        if st["italic"]:
            fmt.setFontItalic(True)
        out[ttype] = fmt
    return out


class _LexState:
    """Where an incremental lex of one text stands: the token stream and the lines so far."""

    def __init__(self, text: str, styled: frozenset, language: str = "python"):
        self.tokens = iter(code_lexer(language).get_tokens(text))
        self.styled = styled
        self.effective: dict = {}
        self.lines: list[list] = [[]]
        self.col = 0
        self.done = False

    def advance(self, budget_s: float) -> None:
        """Lex for about `budget_s` seconds (pure Python, on the GUI thread between events: a worker
        thread competed with the GUI for the GIL and slowed everything else down instead)."""
        from pygments.token import Token

        deadline = time.perf_counter() + budget_s
        lines, effective, styled = self.lines, self.effective, self.styled
        for n, (ttype, value) in enumerate(self.tokens):
            if ttype not in effective:
                t = ttype
                while t is not None and t not in styled:
                    t = t.parent
                effective[ttype] = t
            styled_as = effective[ttype]
            parts = value.split("\n")
            for i, part in enumerate(parts):
                if i > 0:
                    lines.append([])
                    self.col = 0
                if part and styled_as is not None and ttype is not Token.Text:
                    lines[-1].append((self.col, len(part), styled_as))
                self.col += len(part)
            if n % 64 == 63 and time.perf_counter() > deadline:
                return
        self.done = True


def warm_up_lexer() -> None:
    """Build the shared lexer off the GUI thread (compiling its regexes takes ~0.3-0.5 s)."""
    threading.Thread(target=code_lexer, name="irviz-lexer-warmup", daemon=True).start()


# An extra selection (a background) as data, made into a QTextEdit.ExtraSelection (with its
# QTextCursor) only while near the view: (first block, last block, format, first column, end
# column), the columns None for whole lines. Thousands of live cursors cost milliseconds to make,
# to free, and to move on every change of the document.
Mark = tuple[int, int, QTextCharFormat, "int | None", "int | None"]


def line_mark(first: int, last: int, fmt: QTextCharFormat) -> Mark:
    """Lines first..last (block numbers) in full width (`fmt` from :func:`line_format`)."""
    return (first, last, fmt, None, None)


def span_mark(block: int, start: int, end: int, fmt: QTextCharFormat) -> Mark:
    """Columns start..end of one block."""
    return (block, block, fmt, start, end)


def line_format(color: str | QColor) -> QTextCharFormat:
    fmt = QTextCharFormat()
    fmt.setBackground(QColor(color))
    fmt.setProperty(QTextFormat.Property.FullWidthSelection, True)
    return fmt


def _selection(doc: QTextDocument, mark: Mark) -> QTextEdit.ExtraSelection | None:
    first, last, fmt, start, end = mark
    block = doc.findBlockByNumber(first)
    if not block.isValid():
        return None
    cur = QTextCursor(block)
    if start is None:
        tail = doc.findBlockByNumber(last)
        if last != first and tail.isValid():
            cur.setPosition(tail.position() + max(0, tail.length() - 1), QTextCursor.MoveMode.KeepAnchor)
    else:
        room = block.length() - 1
        stop = start if end is None else end  # a span marks start..end; one of no end is empty
        cur.setPosition(block.position() + min(start, room))
        cur.setPosition(block.position() + max(min(start, room), min(stop, room)), QTextCursor.MoveMode.KeepAnchor)
    sel = QTextEdit.ExtraSelection()
    sel.cursor = cur
    sel.format = fmt
    return sel


class _Highlighter:
    """Applies formats computed by lexing the whole text once (multi-line strings stay right).

    The text is lexed and styled a slice at a time between events (see :mod:`idle_work`), the
    lines lexed so far first; a newer text replaces the older work. The formats go straight into
    the blocks' layouts: a QSyntaxHighlighter was called back for every block of every new text
    while it was set (before anything was lexed), 15-30 ms of a 3,000-line diff's side."""

    LEX_S = 0.003          # lexing per slice; styling blocks comes on top
    BLOCKS_PER_SLICE = 24

    def __init__(self, doc: QTextDocument):
        self._doc = doc
        self.lines: list[list[tuple[int, int, object]]] = []
        self.formats: dict = {}
        self._state: _LexState | None = None
        self._styled_upto = 0

    def relex(self, text: str, style_name: str, language: str = "python") -> None:
        self.lines = []
        self._state = None
        if not text:
            idle_work().cancel(self)
            return
        self.formats = _formats_for_style(style_name)
        self._state = _LexState(text, frozenset(self.formats), language)
        self._styled_upto = 0
        idle_work().submit(self, self._work(self._state))

    def busy(self) -> bool:
        return idle_work().pending(self)

    def _work(self, state: _LexState):
        doc = self._doc
        while True:
            state.advance(self.LEX_S)
            self.lines = state.lines
            # the last line may still grow, unless the text is done
            complete = len(state.lines) if state.done else len(state.lines) - 1
            n = self._styled_upto
            while n < complete:
                block = doc.findBlockByNumber(n)
                if block.isValid():
                    self._style(block, self.lines[n])
                n += 1
                if n % self.BLOCKS_PER_SLICE == 0:
                    self._styled_upto = n
                    yield
            self._styled_upto = max(self._styled_upto, complete)
            if state.done:
                self._state = None
                return
            yield

    def _style(self, block, spans: list[tuple[int, int, object]]) -> None:
        """What QSyntaxHighlighter.rehighlightBlock does: the block's formats, then its layout again."""
        layout = block.layout()
        if layout is None:
            return
        formats, ranges = self.formats, []
        for start, length, ttype in spans:
            r = QTextLayout.FormatRange()
            r.start, r.length, r.format = start, length, formats[ttype]
            ranges.append(r)
        if ranges or layout.formats():
            layout.setFormats(ranges)
            self._doc.markContentsDirty(block.position(), block.length())


class _LineNumbers(QWidget):
    def __init__(self, view: CodeView):
        super().__init__(view)
        self.view = view

    def sizeHint(self) -> QSize:
        return QSize(self.view.line_number_width(), 0)

    def paintEvent(self, event) -> None:
        self.view.paint_line_numbers(event)


class CodeView(QPlainTextEdit):
    """``set_text(text)``, ``highlight_lines(lines)``, ``find_text(s)``, ``goto_line(n)``."""

    lineClicked = Signal(int)  # 1-based line number

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setReadOnly(True)
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.setFont(mono_font())
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse
                                     | Qt.TextInteractionFlag.TextSelectableByKeyboard)
        self._numbers = _LineNumbers(self)
        self._hl = _Highlighter(self.document())
        self._highlighted: list[int] = []
        self._matches: list[Mark] = []
        self._base_extra: list[Mark] = []      # subclasses: row backgrounds
        self._extra_window = (0, -1)           # the blocks whose extra selections Qt has
        self._line_labels: list[str] | None = None  # custom gutter labels (diff view)
        self.language = "python"  # the pygments lexer of the text (TVMScript is Python)
        self.blockCountChanged.connect(self._update_margin)
        self.updateRequest.connect(self._update_numbers)
        self.verticalScrollBar().valueChanged.connect(self._follow_extra)
        self._update_margin()

    # -- content -----------------------------------------------------------------------------
    def set_text(self, text: str, language: str | None = None) -> None:
        """`language`: a pygments lexer name for what follows (default: as before, TVMScript)."""
        if language is not None and language != self.language:
            self.language = language
            self.setPlainText("")  # the same text in another language must be lexed again
        if text == self.toPlainText():
            return
        self._highlighted = []
        self._matches = []
        self._hl.relex("", "")    # the old text's formats must not be applied to the new lines
        self.setPlainText(text)
        self._hl.relex(text, themes.colors().pygments_style, self.language)
        self._refresh_extra()

    def text(self) -> str:
        return self.toPlainText()

    def restyle(self) -> None:
        if self.document().isEmpty():
            self._numbers.update()
            return
        self._hl.relex(self.toPlainText(), themes.colors().pygments_style, self.language)
        self._refresh_extra()
        self._numbers.update()

    # -- highlight lines ---------------------------------------------------------------------
    def highlight_lines(self, lines: list[int], scroll: bool = True) -> None:
        """Paint a background on the given 1-based lines and scroll to the first."""
        self._highlighted = sorted(set(int(n) for n in lines))
        self._refresh_extra()
        if scroll and self._highlighted:
            self.goto_line(self._highlighted[0], select=False)

    def highlighted_lines(self) -> list[int]:
        return list(self._highlighted)

    def highlight_words(self, words: list[str], scroll: bool = True) -> list[int]:
        """Highlight lines that contain any of ``words`` as a whole identifier; returns them."""
        words = [w for w in words if w]
        if not words:
            self.highlight_lines([], scroll=False)
            return []
        pat = re.compile(r"(?<![\w.])(?:" + "|".join(re.escape(w) for w in words) + r")(?!\w)")
        hits = [i + 1 for i, line in enumerate(self.toPlainText().split("\n")) if pat.search(line)]
        self.highlight_lines(hits, scroll=scroll)
        return hits

    def goto_line(self, line: int, select: bool = False) -> None:
        block = self.document().findBlockByNumber(max(0, line - 1))
        if not block.isValid():
            return
        cur = QTextCursor(block)
        if select:
            cur.select(QTextCursor.SelectionType.LineUnderCursor)
        self.setTextCursor(cur)
        self.centerCursor()

    # -- find --------------------------------------------------------------------------------
    def find_text(self, text: str, backward: bool = False) -> bool:
        """Mark every match, move to the next one; returns whether anything matched."""
        self._matches = []
        if text:
            fmt = QTextCharFormat()
            fmt.setBackground(QColor(themes.colors().find_match))
            cur = QTextCursor(self.document())
            while True:
                cur = self.document().find(text, cur)
                if cur.isNull():
                    break
                start = cur.selectionStart() - cur.block().position()
                self._matches.append(span_mark(cur.block().blockNumber(), start,
                                               start + cur.selectionEnd() - cur.selectionStart(), fmt))
        self._refresh_extra()
        if not text:
            return False
        flags = QTextDocument.FindFlag.FindBackward if backward else QTextDocument.FindFlag(0)
        if not self.find(text, flags):
            cur = self.textCursor()
            cur.movePosition(QTextCursor.MoveOperation.End if backward
                             else QTextCursor.MoveOperation.Start)
            self.setTextCursor(cur)
            return self.find(text, flags)
        return True

    def match_count(self) -> int:
        return len(self._matches)

    # Qt gets the extra selections of the blocks around the view only, and new ones as it scrolls:
    # setExtraSelections lays out every block it is given a selection in (an 8B LLM's diff coloured
    # 6,000 lines: 60-150 ms at once)
    EXTRA_MARGIN = 150

    def _refresh_extra(self) -> None:
        first = self.firstVisibleBlock().blockNumber()
        lo, hi = first - self.EXTRA_MARGIN, first + self.EXTRA_MARGIN
        self._extra_window = (lo, hi)
        marks = [m for m in self._base_extra if m[0] <= hi and m[1] >= lo]
        if self._highlighted:
            fmt = line_format(themes.colors().highlight_line)
            marks += [line_mark(n - 1, n - 1, fmt) for n in self._highlighted if lo <= n - 1 <= hi]
        marks += [m for m in self._matches if m[0] <= hi and m[1] >= lo]
        doc = self.document()
        self.setExtraSelections([sel for m in marks if (sel := _selection(doc, m)) is not None])

    def _follow_extra(self, _value=None) -> None:
        if not (self._base_extra or self._matches or self._highlighted):
            return
        lo, hi = self._extra_window
        first = self.firstVisibleBlock().blockNumber()
        page = self.viewport().height() // max(1, self.fontMetrics().height())
        if (lo > 0 and first - lo < self.EXTRA_MARGIN // 3) or hi - first < page + self.EXTRA_MARGIN // 3:
            self._refresh_extra()

    # -- line numbers ------------------------------------------------------------------------
    def set_line_labels(self, labels: list[str] | None) -> None:
        """Show these strings in the gutter instead of 1..N (None: plain line numbers)."""
        self._line_labels = labels
        self._update_margin()
        self._numbers.update()

    def line_number_width(self) -> int:
        if self._line_labels is not None:
            digits = max([3] + [len(x or "") for x in self._line_labels])
        else:
            digits = max(3, len(str(max(1, self.blockCount()))))
        return 10 + self.fontMetrics().horizontalAdvance("9") * digits

    def _update_margin(self, *_):
        self.setViewportMargins(self.line_number_width(), 0, 0, 0)
        cr = self.contentsRect()
        self._numbers.setGeometry(QRect(cr.left(), cr.top(), self.line_number_width(), cr.height()))

    def _update_numbers(self, rect, dy):
        if dy:
            self._numbers.scroll(0, dy)
        else:
            self._numbers.update(0, rect.y(), self._numbers.width(), rect.height())

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        cr = self.contentsRect()
        self._numbers.setGeometry(QRect(cr.left(), cr.top(), self.line_number_width(), cr.height()))

    def mouseReleaseEvent(self, event) -> None:
        super().mouseReleaseEvent(event)
        self.lineClicked.emit(self.cursorForPosition(event.position().toPoint()).blockNumber() + 1)

    def paint_line_numbers(self, event) -> None:
        c = themes.colors()
        painter = QPainter(self._numbers)
        painter.fillRect(event.rect(), QColor(c.line_number_bg))
        painter.setFont(self.font())
        block = self.firstVisibleBlock()
        n = block.blockNumber()
        top = round(self.blockBoundingGeometry(block).translated(self.contentOffset()).top())
        bottom = top + round(self.blockBoundingRect(block).height())
        h = self.fontMetrics().height()
        w = self._numbers.width() - 5
        hl = set(self._highlighted)
        while block.isValid() and top <= event.rect().bottom():
            if block.isVisible() and bottom >= event.rect().top():
                painter.setPen(QColor(c.text if (n + 1) in hl else c.line_number_fg))
                if self._line_labels is not None:
                    label = self._line_labels[n] if n < len(self._line_labels) else ""
                else:
                    label = str(n + 1)
                painter.drawText(0, top, w, h, Qt.AlignmentFlag.AlignRight, label or "")
            block = block.next()
            top = bottom
            bottom = top + round(self.blockBoundingRect(block).height())
            n += 1
        painter.end()
