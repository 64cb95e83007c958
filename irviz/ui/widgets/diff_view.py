"""Diff of two steps, from the engine's ``diff`` reply: side-by-side or unified, one function or
all, intra-line highlights, next/previous hunk."""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QTextCharFormat
from PySide6.QtWidgets import (QButtonGroup, QComboBox, QHBoxLayout, QLabel, QSizePolicy, QSplitter,
                               QStackedWidget, QVBoxLayout, QWidget)

import re

from irviz.ui import themes
from irviz.ui.widgets.code_view import CodeView, line_format, line_mark, span_mark
from irviz.ui.widgets.idle_work import idle_work
from irviz.ui.widgets.tool_button import tool_button

ALL = "All changed functions"

# a line of TVMScript that binds a var: "lv3 = ..." or "lv3: R.Tensor(...) = ..."
_BINDS = re.compile(r"^\s*([A-Za-z_]\w*)\s*[:=]")


def _bound_var(line: str | None) -> str | None:
    m = _BINDS.match(line or "")
    return m.group(1) if m else None


def _full_lines(blocks: list[tuple[int, str]], out: list) -> None:
    """Full-width backgrounds for (block, colour) pairs, appended to `out` as marks (see
    CodeView._base_extra); runs of adjacent blocks with one colour become one mark."""
    formats: dict = {}
    i = 0
    while i < len(blocks):
        first, color = blocks[i]
        last = first
        while i + 1 < len(blocks) and blocks[i + 1] == (last + 1, color):
            i += 1
            last += 1
        fmt = formats.get(color)
        if fmt is None:
            fmt = formats[color] = line_format(color)
        out.append(line_mark(first, last, fmt))
        i += 1


def _span_format(color: QColor) -> QTextCharFormat:
    fmt = QTextCharFormat()
    fmt.setBackground(color)
    return fmt


class _Side(CodeView):

    def set_rows(self, lines: list[str], labels: list[str] | None, extra_fn) -> None:
        """Text now; the row colours a slice at a time between events, so a big diff never holds
        the window (a newer set_rows replaces a pending colouring).  ``extra_fn(out)`` is a
        generator that appends marks (:data:`irviz.ui.widgets.code_view.Mark`) to ``out``;
        ``labels`` None: line numbers."""
        self._base_extra = []
        self.set_text("\n".join(lines))
        self.set_line_labels(labels)

        def colour():
            out: list = []
            yield from extra_fn(out)
            self._base_extra = out
            self._refresh_extra()

        idle_work().submit(self, colour())

    def colouring(self) -> bool:
        return idle_work().pending(self)


class DiffView(QWidget):
    """``set_diff(result)`` with a ``diff`` reply; ``next_hunk()``, ``prev_hunk()``,
    ``set_mode("side"|"unified")``, ``set_function(name)``."""

    hunkChanged = Signal(int, int)  # index (0-based), count

    def __init__(self, parent=None):
        super().__init__(parent)
        self._diff: dict = {"unified": "", "functions": []}
        self._hunks: list[int] = []  # block numbers where hunks start (current mode)
        self._hunk = -1
        # Relax bindings of main to mark on the "after" side (values that diverge from torch)
        self.marked: dict = {}
        self.first_marked: str | None = None
        self.marked_blocks: list[int] = []  # blocks marked in the current mode

        bar = QHBoxLayout()
        bar.setContentsMargins(0, 0, 0, 0)
        self.function_box = QComboBox()
        self.function_box.setMinimumContentsLength(12)
        self.function_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.function_box.currentIndexChanged.connect(lambda _i: self._render())
        self.side_button = tool_button("Side by side", checkable=True, checked=True)
        self.unified_button = tool_button("Unified", checkable=True)
        group = QButtonGroup(self)
        group.setExclusive(True)
        group.addButton(self.side_button)
        group.addButton(self.unified_button)
        self.side_button.toggled.connect(lambda on: self.set_mode("side") if on else None)
        self.unified_button.toggled.connect(lambda on: self.set_mode("unified") if on else None)
        self.prev_button = tool_button("▲ Prev hunk")
        self.prev_button.setToolTip("Previous hunk (Alt+Up)")
        self.prev_button.clicked.connect(self.prev_hunk)
        self.next_button = tool_button("▼ Next hunk")
        self.next_button.setToolTip("Next hunk (Alt+Down)")
        self.next_button.clicked.connect(self.next_hunk)
        self.summary = QLabel("")
        self.summary.setProperty("role", "dim")
        self.summary.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        bar.addWidget(self.function_box, 1)
        bar.addWidget(self.side_button)
        bar.addWidget(self.unified_button)
        bar.addSpacing(8)
        bar.addWidget(self.prev_button)
        bar.addWidget(self.next_button)
        bar.addWidget(self.summary)

        self.left = _Side()
        self.right = _Side()
        self.split = QSplitter(Qt.Orientation.Horizontal)
        self.split.addWidget(self.left)
        self.split.addWidget(self.right)
        self.unified = _Side()
        for a, b in ((self.left, self.right), (self.right, self.left)):
            a.verticalScrollBar().valueChanged.connect(b.verticalScrollBar().setValue)
            a.horizontalScrollBar().valueChanged.connect(b.horizontalScrollBar().setValue)
        self.stack = QStackedWidget()
        self.stack.addWidget(self.split)
        self.stack.addWidget(self.unified)

        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        lay.addLayout(bar)
        lay.addWidget(self.stack, 1)
        self.mode = "side"
        # what each mode's views show: (diff, function, marks) it was drawn for, its hunks and
        # marked blocks; switching back to a mode drawn for the same diff draws nothing again
        self._version = 0
        self._drawn: dict[str, tuple] = {}

    # -- API -----------------------------------------------------------------------------------
    def set_diff(self, result: dict | None) -> None:
        """`result["language"]`: the pygments lexer of the text (default TVMScript's, Python)."""
        self._diff = result or {"unified": "", "functions": []}
        self._version += 1
        language = self._diff.get("language") or "python"
        for view in (self.left, self.right, self.unified):
            if view.language != language:
                view.set_text("", language=language)
        funcs = self._diff.get("functions") or []
        current = self.function_box.currentText()
        self.function_box.blockSignals(True)
        self.function_box.clear()
        self.function_box.addItem(ALL if funcs else "No changes")
        for f in funcs:
            self.function_box.addItem(f"{f['name']}  ({f.get('status', 'changed')})", f["name"])
        idx = self.function_box.findText(current)
        self.function_box.setCurrentIndex(max(0, idx))
        self.function_box.blockSignals(False)
        n = {s: sum(1 for f in funcs if f.get("status") == s) for s in ("added", "removed", "changed")}
        self.summary.setText(", ".join(f"{v} {k}" for k, v in n.items() if v) or "no changes")
        self._render()

    def clear(self) -> None:
        self.set_diff(None)

    def set_marked_bindings(self, marks: dict | None, first: str | None = None) -> None:
        """Mark the lines of main (after side) that bind these vars ({var: {"fx_node", "max_abs"}});
        shown from the next set_diff or mode change."""
        self.marked = dict(marks or {})
        self.first_marked = first if first in self.marked else None
        self._version += 1

    def _mark_label(self, var: str, label: str) -> str:
        return ("✗▶" if var == self.first_marked else "✗") + " " + label

    def set_function(self, name: str | None) -> None:
        i = self.function_box.findData(name) if name else 0
        if i >= 0:
            self.function_box.setCurrentIndex(i)

    def set_mode(self, mode: str) -> None:
        self.mode = mode
        self.side_button.setChecked(mode == "side")
        self.unified_button.setChecked(mode == "unified")
        self.stack.setCurrentIndex(0 if mode == "side" else 1)
        self._render()

    def hunk_count(self) -> int:
        return len(self._hunks)

    def current_hunk(self) -> int:
        return self._hunk

    def next_hunk(self) -> None:
        self._go(self._hunk + 1)

    def prev_hunk(self) -> None:
        self._go(self._hunk - 1)

    def restyle(self) -> None:
        self._drawn.clear()
        self._render()

    # -- rendering -----------------------------------------------------------------------------
    # "All changed functions" shows whole functions up to this many rows; the rest are named in a
    # last line and shown one at a time from the list (a 4,000-line diff froze the window ~0.3 s)
    MAX_ALL_ROWS = 900

    def _selected_functions(self) -> list[dict]:
        funcs = self._diff.get("functions") or []
        name = self.function_box.currentData()
        if name:
            return [f for f in funcs if f["name"] == name]
        shown: list[dict] = []
        rows = 0
        for f in funcs:
            n = len(f.get("rows") or [])
            if shown and rows + n > self.MAX_ALL_ROWS:
                break
            shown.append(f)
            rows += n
        self._not_shown = [f["name"] for f in funcs[len(shown):]]
        return shown

    def _not_shown_note(self) -> str | None:
        names = getattr(self, "_not_shown", [])
        if not names:
            return None
        listed = ", ".join(names[:6]) + (", …" if len(names) > 6 else "")
        return f"@@ {len(names)} more changed functions, pick one in the list above: {listed}"

    def _render(self) -> None:
        key = (self._version, self.function_box.currentData())
        drawn = self._drawn.get(self.mode)
        if drawn is not None and drawn[0] == key:
            self._hunks, self.marked_blocks = list(drawn[1]), list(drawn[2])
        else:
            if self.mode == "side":
                self._render_side()
            else:
                self._render_unified()
            self._drawn[self.mode] = (key, list(self._hunks), list(self.marked_blocks))
        self._hunk = -1
        if self._hunks:
            self._go(0)
        else:
            self.hunkChanged.emit(-1, 0)

    def _render_side(self) -> None:
        c = themes.colors()
        left: list[str] = []
        right: list[str] = []
        llab: list[str] = []
        rlab: list[str] = []
        marks: list[tuple] = []  # (block, tag, lranges, rranges)
        hunks = []
        diverging = []  # right-side blocks binding a marked var
        for f in self._selected_functions():
            header = f"@@ {f['name']} ({f.get('status', 'changed')})"
            marks.append((len(left), "header", [], []))
            hunks.append(len(left))
            left.append(header)
            right.append(header)
            llab.append("")
            rlab.append("")
            prev_equal = True
            for row in f.get("rows") or []:
                ln, lt, rn, rt, tag = row[:5]
                lr = row[5] if len(row) > 5 else []
                rr = row[6] if len(row) > 6 else []
                if tag != "equal" and prev_equal and hunks[-1] != len(left) - 1:
                    hunks.append(len(left))
                prev_equal = tag == "equal"
                marks.append((len(left), tag, lr or [], rr or []))
                left.append(lt if lt is not None and ln is not None else "")
                right.append(rt if rt is not None and rn is not None else "")
                llab.append("" if ln is None else str(ln))
                rlab.append("" if rn is None else str(rn))
                var = _bound_var(rt) if f["name"] == "main" and rn is not None and self.marked else None
                if var is not None and var in self.marked:
                    diverging.append(len(right) - 1)
                    rlab[-1] = self._mark_label(var, rlab[-1])
        note = self._not_shown_note()
        if note:
            marks.append((len(left), "header", [], []))
            left.append(note)
            right.append(note)
            llab.append("")
            rlab.append("")
        self._hunks = hunks
        self.marked_blocks = diverging
        bad = QColor(c.bad)
        bad.setAlpha(70)
        bad_name = bad.name(QColor.NameFormat.HexArgb)

        def extras(side: str):
            def fn(out):
                lines, spans = [], []
                labels = llab if side == "left" else rlab
                bg = c.diff_del_bg if side == "left" else c.diff_add_bg
                strong = _span_format(QColor(c.diff_del_fg_strong if side == "left" else c.diff_add_fg_strong))
                for k, (block, tag, lr, rr) in enumerate(marks):
                    if k % 500 == 499:
                        yield
                    if tag == "equal":
                        continue
                    if tag == "header":
                        lines.append((block, c.diff_hunk_bg))
                        continue
                    if not labels[block]:
                        lines.append((block, c.diff_filler))
                        continue
                    lines.append((block, bg))
                    for start, end in (lr if side == "left" else rr):
                        spans.append(span_mark(block, int(start), int(end), strong))
                yield
                if side == "right":  # drawn last: over the diff's own colours
                    lines.extend((b, bad_name) for b in diverging)
                _full_lines(lines, out)
                out.extend(spans)
            return fn

        self.left.set_rows(left, llab, extras("left"))
        self.right.set_rows(right, rlab, extras("right"))

    def _render_unified(self) -> None:
        c = themes.colors()
        funcs = self._selected_functions()
        note = None if self.function_box.currentData() else self._not_shown_note()
        if self.function_box.currentData() or note:
            text = _unified_from_rows(funcs) + (f"\n{note}" if note else "")
        else:
            text = self._diff.get("unified") or _unified_from_rows(funcs)
        lines = text.split("\n")
        hunks, marked, diverging = [], [], []
        func = None
        for i, line in enumerate(lines):
            if line.startswith("@@"):
                hunks.append(i)
                marked.append((i, c.diff_hunk_bg))
                head = line.strip("@ ").split()
                if head and head[0][0] not in "+-":  # "@@ main (changed) @@"
                    func = head[0]
            elif line.startswith("+++ "):
                func = line[4:].strip().removeprefix("b/")
            elif line.startswith("+") and not line.startswith("+++"):
                marked.append((i, c.diff_add_bg))
            elif line.startswith("-") and not line.startswith("---"):
                marked.append((i, c.diff_del_bg))
            if (self.marked and func == "main" and line[:1] in ("+", " ")
                    and not line.startswith("+++") and _bound_var(line[1:]) in self.marked):
                diverging.append(i)
        bad = QColor(c.bad)
        bad.setAlpha(70)
        marked.extend((i, bad.name(QColor.NameFormat.HexArgb)) for i in diverging)
        self.marked_blocks = diverging

        def colours(out):
            _full_lines(marked, out)
            yield

        self.unified.set_rows(lines, None, colours)
        self._hunks = hunks

    def _go(self, i: int) -> None:
        if not self._hunks:
            return
        i = max(0, min(i, len(self._hunks) - 1))
        self._hunk = i
        block = self._hunks[i]
        views = (self.left, self.right) if self.mode == "side" else (self.unified,)
        for v in views:
            v.goto_line(block + 1)
            top = max(0, block - 3)
            v.verticalScrollBar().setValue(top)
        self.hunkChanged.emit(i, len(self._hunks))


def _unified_from_rows(funcs: list[dict]) -> str:
    out = []
    for f in funcs:
        out.append(f"@@ {f['name']} ({f.get('status', 'changed')}) @@")
        for row in f.get("rows") or []:
            ln, lt, rn, rt, tag = row[:5]
            if tag == "equal":
                out.append(" " + (lt or ""))
                continue
            if ln is not None and lt is not None:
                out.append("-" + lt)
            if rn is not None and rt is not None:
                out.append("+" + rt)
    return "\n".join(out)
