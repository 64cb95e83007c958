"""The Code tab under TensorIR: what the selected kernel becomes on the session's target (or one
picked in the tab) — its assembly or LLVM IR for a CPU, its GPU source with the launch shape for a
GPU — with its counts, coloured and searchable. Asked of the engine (`kernel_code`) only while the
tab is shown."""
from __future__ import annotations

import json

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from irviz.protocol.commands import State
from irviz.ui.panes.base import SearchBox, dim_label
from irviz.ui.panes.loop_links import code_to_loop, loop_to_code
from irviz.ui.result_stamp import ResultSlot, ResultStamp, model_key, step_identity
from irviz.ui.widgets.code_view import CodeView
from irviz.ui.widgets.tool_button import tool_button

HOST = "host"
FORMAT_TITLES = {"asm": "Assembly", "ll": "LLVM IR", "cuda": "CUDA C", "opencl": "OpenCL C",
                 "wgsl": "WGSL", "metal": "Metal"}


def fill_target_box(box: QComboBox, targets: list[dict]) -> None:
    """An editable target box gets the engine's `list_targets` names this wheel and machine can
    build for, each with its TVM target in the tooltip; the text shown (typed or chosen) stays,
    as any other name or a TVM target as JSON can be typed and the engine says if it cannot."""
    text = box.currentText()
    box.blockSignals(True)
    box.clear()
    for t in targets or []:
        if t.get("unavailable"):
            continue
        box.addItem(t["name"])
        box.setItemData(box.count() - 1, f"{t.get('description', '')}\n{json.dumps(t.get('target'))}",
                        Qt.ItemDataRole.ToolTipRole)
    box.setEditText(text)
    box.blockSignals(False)


def _widths(bits: dict) -> str:
    def key(kv):
        return -int(kv[0]) if str(kv[0]).isdigit() else 0

    return ", ".join(f"{n}×{b}-bit" if str(b).isdigit() else f"{n}×{b}" for b, n in sorted(bits.items(), key=key))


def counts_text(result: dict, kernel: dict) -> str:
    """One line of what the kernel's code does, for the tab's header."""
    if kernel.get("error"):
        return f"Not compiled: {kernel['error']}"
    c = kernel.get("counts") or {}
    if result.get("kind") != "llvm":
        shapes = "; ".join(f"grid {'×'.join(map(str, launch['grid']))}, block "
                           f"{'×'.join(map(str, launch['block']))}" for launch in kernel.get("launch") or [])
        return f"{shapes or 'no launch'} · {c.get('shared_bytes', 0)} B shared · {c.get('barriers', 0)} barriers"
    calls = ", ".join(f"{f}×{n}" for f, n in list((c.get("callees") or {}).items())[:4])
    vec = _widths(c.get("vector_bits") or {})
    return (f"{c.get('instructions', 0)} instructions · {c.get('vector', 0)} vector"
            + (f" ({vec})" if vec else "") + f" · {c.get('fma', 0)} FMA ({c.get('vector_fma', 0)} vector)"
            + f" · {c.get('calls', 0)} calls out" + (f": {calls}" if calls else ""))


class KernelCodeTab(QWidget):
    """A TensorIR loop given with ``show_loop`` is marked in the code; a click in the code emits
    ``loopClicked`` with the loop it is in (see loop_links for how far that goes).

    The code is for the session's target (the one the passes ran under) unless another is picked
    in the tab's own box, which then says so. Code made for another model, step, pipeline, target
    or kernel is greyed with a note until the code for what is open comes."""
    loopClicked = Signal(int)  # index in the kernel's loop nest

    def __init__(self, pane, parent=None):
        super().__init__(parent)
        self.nest: list[dict] = []  # the selected kernel's loop nest (tir_functions' loop_nest)
        self.loop: int | None = None
        self.pane = pane  # asks the engine for us; its on_reply hands "code" replies back
        self.state: State | None = None
        self.step: int | None = None
        self.kernel: str | None = None
        self.result: dict | None = None
        self._asked = None          # what the last request was for (see _want)
        self._asked_stamp: ResultStamp | None = None
        self._code_for: tuple | None = None   # (step, kernel, target) of the code shown
        self._session_shown = HOST  # the session's target as the box last showed it

        self.target = QComboBox()
        self.target.setEditable(True)
        self.target.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.target.addItem(HOST)
        self.target.setToolTip("The target the code is for: the session's (the Pipeline pane's Target) "
                               "unless another is picked here; a name, e.g. 'cuda -arch=sm_86', or a "
                               "TVM target as JSON; Enter compiles for it")
        self.target.textActivated.connect(lambda _t: self.refresh())
        editor = self.target.lineEdit()
        assert editor is not None  # an editable combo box has its line edit
        editor.returnPressed.connect(self.refresh)
        self.format = QComboBox()
        self.format.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.format.currentIndexChanged.connect(lambda _i: self._show_code())
        self.search = SearchBox("Search the code…")
        self.search.textChanged.connect(lambda t: self.code.find_text(t))
        self.search.returnPressed.connect(lambda: self.code.find_text(self.search.text()))
        self.counts = dim_label("Select a kernel")
        self.counts.setWordWrap(True)
        self.target_note = dim_label("")
        self.target_note.setObjectName("CodeTargetNote")
        self.follow_button = tool_button("Use the session's")
        self.follow_button.setToolTip("Show the code for the session's target again")
        self.follow_button.clicked.connect(lambda: self.pick(self.session_target()))
        self.code: CodeView = CodeView()
        # the tab shares the TensorIR dock, whose minimum height sets the first window's: one
        # row of controls and a short least height keep that window within an 800 px screen
        self.code.setMinimumHeight(36)
        self.code.lineClicked.connect(self._line_clicked)
        self.link_note = dim_label("")
        self.stale_note = dim_label("")
        self.stale_note.setObjectName("CodeStaleNote")
        self.slot = ResultSlot([self.code], self.stale_note)

        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel("Target"))
        row.addWidget(self.target, 1)
        row.addWidget(self.format)
        self.search.setMinimumWidth(70)
        row.addWidget(self.search, 1)
        picked = QHBoxLayout()
        picked.setContentsMargins(0, 0, 0, 0)
        picked.addWidget(self.target_note, 1)
        picked.addWidget(self.follow_button)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 2, 0, 0)
        lay.setSpacing(3)
        lay.addLayout(row)
        lay.addLayout(picked)
        lay.addWidget(self.counts)
        lay.addWidget(self.stale_note)
        lay.addWidget(self.link_note)
        lay.addWidget(self.code, 1)
        self.link_note.hide()
        self.target_note.hide()
        self.follow_button.hide()

    # -- targets -----------------------------------------------------------------------------------
    def session_target(self) -> str:
        return (self.state.get("target") if self.state else None) or HOST

    def target_text(self) -> str:
        return self.target.currentText().strip() or self.session_target()

    def picked(self) -> bool:
        """Whether the code is for a target picked here rather than the session's."""
        return self.target_text() != self.session_target()

    def fill_targets(self, targets: list[dict]) -> None:
        """The engine's `list_targets`: the names this wheel and machine can build for."""
        fill_target_box(self.target, targets)

    def pick(self, text: str) -> None:
        """Compile for `text` (the session's target: follow it again)."""
        self.target.setEditText((text or "").strip() or self.session_target())
        self.refresh()

    def _show_target(self) -> None:
        picked = self.picked()
        self.target_note.setText(f"Target: {self.target_text()} (picked here; the session's target is "
                                 f"{self.session_target()})" if picked else "")
        self.target_note.setVisible(picked)
        self.follow_button.setVisible(picked)

    # -- state ---------------------------------------------------------------------------------------
    def on_state(self, state: State) -> None:
        """Every state the engine reports: the box follows the session's target unless another
        was picked here; code for anything else than what is open is greyed."""
        if model_key(state) != model_key(self.state):
            self.forget()
        self.state = state.copy()
        session = self.session_target()
        if self.target.currentText().strip() in ("", self._session_shown):
            self.target.blockSignals(True)
            self.target.setEditText(session)
            self.target.blockSignals(False)
        self._session_shown = session
        self._show_target()
        self._check()

    def _check(self) -> None:
        if self.result is None or self._code_for is None:
            return
        step, kernel, target = self._code_for
        cursor = self.state.get("cursor") if self.state else None
        extra = (f"for step {step}; the cursor is at step {cursor}" if step != cursor else
                 f"for {kernel}, not {self.kernel}" if self.kernel is not None and kernel != self.kernel else
                 f"compiled for {target}, not {self.target_text()}" if target != self.target_text() else None)
        self.slot.check(self.state, extra)

    def show_kernel(self, step: int | None, kernel: str | None, nest: list[dict] | None = None) -> None:
        if (step, kernel) != (self.step, self.kernel):
            self.loop = None
        self.step, self.kernel = step, kernel
        self.nest = list(nest or [])
        if kernel is None:
            self.forget()
            if step is not None:
                self.counts.setText(f"No kernels at step {step}")
            return
        self._check()
        if self.isVisible():
            self.refresh()

    def showEvent(self, event) -> None:  # Qt name
        super().showEvent(event)
        self.refresh()

    def _want(self) -> tuple:
        """What the code asked for is: the kernel at a step of one model, pipeline and target."""
        return (model_key(self.state), step_identity(self.state, self.step or 0), self.step, self.kernel,
                self.target_text())

    def refresh(self) -> None:
        self._show_target()
        self._check()
        if self.kernel is None or self.step is None:
            return
        want = self._want()
        if want == self._asked:
            return
        self._asked = want
        self._asked_stamp = ResultStamp.of(self.state, self.step)
        self.counts.setText(f"Compiling the kernels of step {self.step} for {self.target_text()}…")
        self.pane.ask("code", "kernel_code", step=self.step, target=self.target_text(), kernel=self.kernel)

    def forget(self) -> None:
        self._asked = None
        self.result = None
        self._code_for = None
        self.slot.clear()
        self.code.set_text("")
        self.counts.setText("Select a kernel")

    def on_reply(self, result: dict) -> None:
        self.result = result or {}
        formats = list(self.result.get("formats") or [])
        keep = self.format.currentData()
        self.format.blockSignals(True)
        self.format.clear()
        for f in formats:
            self.format.addItem(FORMAT_TITLES.get(f, f), f)
        if keep in formats:
            self.format.setCurrentIndex(formats.index(keep))
        self.format.blockSignals(False)
        kernel = (self.result.get("kernels") or {}).get(self.kernel) or {}
        _model, _identity, step, name, target = self._asked or self._want()
        self._code_for = (step, name, target)
        self.slot.set(self._asked_stamp)
        self.counts.setText(counts_text(self.result, kernel)
                            + f"  (step {step}, {target}; {self.result.get('seconds', 0):.2f} s)")
        self.counts.setToolTip(str(self.result.get("target")))
        self._show_code()
        self._check()

    def on_error(self, error: dict) -> None:
        self.result = None
        self._code_for = None
        self.slot.clear()
        self._asked = None  # asking again may work (another target, a restarted engine)
        self.counts.setText(f"Not compiled for {self.target_text()}: {error.get('message', 'failed')}")
        self.code.set_text("")

    def _show_code(self) -> None:
        code = (self.result or {}).get("code") or {}
        fmt = self.format.currentData()
        lexer = ((self.result or {}).get("lexers") or {}).get(fmt, "text")
        self.code.set_text(code.get(fmt, ""), language=lexer)
        if self.search.text():
            self.code.find_text(self.search.text())
        self._mark_loop()

    # -- loops -----------------------------------------------------------------------------------
    def show_loop(self, index: int | None) -> None:
        """Mark TensorIR loop `index` of the kernel in its code (now, or when the code comes)."""
        self.loop = index
        self._mark_loop()

    def _mark_loop(self) -> None:
        code = (self.result or {}).get("code") or {}
        fmt = self.format.currentData()
        if self.loop is None or not code or fmt not in ("asm", "ll") or not self.nest:
            self.link_note.hide()
            return
        link = loop_to_code(self.nest, self.loop, code, fmt)
        var = (self.nest[self.loop] if 0 <= self.loop < len(self.nest) else {}).get("var", "?")
        self.link_note.setText(f"loop {var}: " + link.where
                               + (f" · {link.note}" if link.note else ""))
        self.link_note.show()
        self.code.highlight_lines(list(link.lines), scroll=bool(link.lines))

    def _line_clicked(self, line: int) -> None:
        code = (self.result or {}).get("code") or {}
        fmt = self.format.currentData()
        if not self.nest or fmt not in ("asm", "ll") or not code:
            return
        index = code_to_loop(self.nest, line, code, fmt)
        if index is not None:
            self.loop = index
            self._mark_loop()
            self.loopClicked.emit(index)
