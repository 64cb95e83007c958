"""What surrounds the panes in the main window: actions with their shortcuts, menus, the
toolbar, the status bar, recent files and the samples menu, and the corner notification."""
from __future__ import annotations

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import (QFrame, QGraphicsOpacityEffect, QHBoxLayout, QLabel, QProgressBar,
                               QPushButton, QScrollArea, QToolButton, QVBoxLayout, QWidget)

from irviz.ui import themes
from irviz.ui.generation_dialog import GenerationOpening
from irviz.ui.graph_chooser import CaptureBar
from irviz.ui.help import HelpDialog
from irviz.ui.result_stamp import STALE_OPACITY
from irviz.ui.widgets.tool_button import tool_button

MAX_RECENT = 10


class Toast(QFrame):
    """A non-modal notification in the bottom-right corner; hides itself after a while. A long
    message (a pass's traceback) scrolls inside it, so the toast and its × stay inside the window.
    ``mark_stale`` greys the message and says why once what it was about is no longer open."""

    def __init__(self, parent: QWidget):
        super().__init__(parent)
        self.setObjectName("Toast")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.title = QLabel()
        f = self.title.font()
        f.setBold(True)
        self.title.setFont(f)
        self.title.setWordWrap(True)
        self.body = QLabel()
        self.body.setWordWrap(True)
        self.body.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.body.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.scroll_area = QScrollArea()
        self.scroll_area.setWidget(self.body)
        self.scroll_area.setWidgetResizable(True)
        self.scroll_area.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.stale_note = QLabel()
        self.stale_note.setWordWrap(True)
        self.stale_note.hide()
        self.close_button = tool_button("✕")
        self.close_button.setAutoRaise(True)
        self.close_button.setToolTip("Close")
        self.close_button.clicked.connect(self.hide)
        head = QHBoxLayout()
        head.addWidget(self.title, 1)
        head.addWidget(self.close_button, 0, Qt.AlignmentFlag.AlignTop)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(10, 6, 6, 8)
        lay.addLayout(head)
        lay.addWidget(self.stale_note)
        lay.addWidget(self.scroll_area)
        self.setFixedWidth(420)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self.hide)
        self.stale_reason: str | None = None
        self.hide()

    def show_message(self, title: str, body: str, kind: str = "error", ms: int = 10000) -> None:
        self.setProperty("kind", kind)
        self.style().unpolish(self)
        self.style().polish(self)
        self.title.setText(title)
        self.body.setText(body)
        self.mark_stale(None)
        self.reposition()
        self.show()
        self.raise_()
        self._timer.start(ms)

    def mark_stale(self, reason: str | None) -> None:
        """Grey the message and say why it is no longer about what is open; None: current."""
        self.stale_reason = reason
        faded = self.scroll_area.viewport()  # not the area: see result_stamp.faded_parts
        faded.setGraphicsEffect(None)  # type: ignore[arg-type]  # None removes the effect; the stubs omit it
        if reason is None:
            self.stale_note.hide()
            self.stale_note.setText("")
        else:
            self.stale_note.setText(f"No longer current: {reason}.")
            self.stale_note.setStyleSheet(f"color: {themes.colors().bad};")
            self.stale_note.show()
            effect = QGraphicsOpacityEffect(faded)
            effect.setOpacity(STALE_OPACITY)
            faded.setGraphicsEffect(effect)
        if self.isVisible():
            self.reposition()

    def reposition(self) -> None:
        """Bottom right of the parent, never taller than the room between its menus and status bar."""
        p = self.parentWidget()
        if p is None:
            return
        bar = getattr(p, "menuBar", None)
        top = (bar().height() if callable(bar) else 0) + 8
        bottom = p.height() - (p.statusBar().height() if hasattr(p, "statusBar") else 0) - 12
        room = max(120, min(bottom - top, int(0.6 * p.height())))  # a corner, not a wall
        lay = self.layout()
        assert lay is not None  # made in __init__
        m = lay.contentsMargins()
        inner = self.width() - m.left() - m.right()
        head = max(self.title.heightForWidth(inner - self.close_button.sizeHint().width() - lay.spacing()),
                   self.close_button.sizeHint().height())
        note = self.stale_note.heightForWidth(inner) + lay.spacing() if self.stale_note.isVisibleTo(self) else 0
        fixed = m.top() + m.bottom() + head + note + lay.spacing()
        want = self.body.heightForWidth(inner - self.scroll_area.verticalScrollBar().sizeHint().width())
        self.scroll_area.setFixedHeight(max(20, min(want + 2, room - fixed)))
        self.setFixedHeight(min(room, fixed + self.scroll_area.height()))
        self.move(p.width() - self.width() - 16, max(top, bottom - self.height()))


class WindowChrome(QObject):
    """The main window's actions, menus, toolbar and status bar, owned by the window (built once
    its panes and docks are); the actions call the window's commands (open_dialog, step,
    build_run, ...) and the window reaches what it built through :meth:`parts`."""

    def __init__(self, window):
        super().__init__(window)
        self._w = window
        self._build_actions()
        self.generation = GenerationOpening(window)  # a causal LM as prefill and decode programs
        self._build_menus()
        self._build_toolbar()
        self._build_status()

    def parts(self) -> dict:
        """The actions, menus and status widgets by the names the window (and tests) use."""
        out = {k: v for k, v in vars(self).items() if not k.startswith("_")}
        out["recent_files"] = self.recent_files
        return out

    def _action(self, text: str, slot, shortcut: str | None = None, tip: str | None = None) -> QAction:
        act = QAction(text, self._w)
        if shortcut:
            act.setShortcut(QKeySequence(shortcut))
            act.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        if tip or shortcut:
            act.setToolTip(f"{tip or text.replace('&', '').rstrip('…')}" + (f" ({shortcut})" if shortcut else ""))
        act.triggered.connect(lambda _checked=False: slot())
        self._w.addAction(act)
        return act

    def _build_actions(self) -> None:
        a = self._action
        self.act_open = a("&Open…", self._w.open_dialog, "Ctrl+O", "Open a model file")
        self.act_export_step = a("Export current &step…", lambda: self._w.export_dialog(current_only=True), "Ctrl+E",
                                 "Write the current step's TVMScript and its parameters to a folder")
        self.act_export_trace = a("Export whole &trace…", lambda: self._w.export_dialog(current_only=False), "Ctrl+Shift+E",
                                  "Write every step's script, the diffs, steps.json and report.html")
        self.act_export_relax_png = a("Relax graph as PNG…", lambda: self._w.export_graph("relax", "png"))
        self.act_export_relax_svg = a("Relax graph as SVG…", lambda: self._w.export_graph("relax", "svg"))
        self.act_export_fx_png = a("FX graph as PNG…", lambda: self._w.export_graph("fx", "png"))
        self.act_export_fx_svg = a("FX graph as SVG…", lambda: self._w.export_graph("fx", "svg"))
        self.act_load_converters = a("Load &converters…", self._w.load_converters_dialog, "Ctrl+Shift+L",
                                     "Load a Python file with CONVERTERS = {aten op: fn} for ops TVM cannot import")
        self.act_reimport = a("Re-&import", self._w.reimport, "Ctrl+Shift+R",
                              "Import the captured model into Relax again, with the loaded converters")
        self.act_restart = a("Restart engine", lambda: self._w.bridge.restart("Restarted the engine on request."),
                             None, "Start a new engine process and replay the session to the current step")
        self.act_quit = a("&Quit", self._w.close, "Ctrl+Q")
        self.act_find = a("&Find", self._w.focus_search, "Ctrl+F", "Search in the focused pane")
        self.act_step = a("&Step", self._w.step, "F10", "Apply the next pass")
        self.act_back = a("Step &back", self._w.back, "Shift+F10", "Undo the last pass")
        self.act_run_to_end = a("&Run to end", self._w.run_to_end, "F5", "Apply every planned pass")
        self.act_first = a("Jump to &import", lambda: self._w.jump(0), "Ctrl+Home", "Go to step 0")
        self.act_build_run = a("&Build && Run", self._w.build_run, "Ctrl+R", "Build the current step and compare with PyTorch")
        self.act_cancel = a("&Cancel", self._w.cancel, "Esc", "Stop the engine's current work")
        self.act_remeasure = a("Re-&measure CPU decisions", self._w.remeasure, None,
                               "Apply the passes again, timing each library-or-TensorIR choice and "
                               "conv2d tile on this machine instead of reading the cache")
        self.act_compare = a("&Compare with pipeline…", self._w.compare_dialog, None,
                             "Run another pipeline on the same model and compare the two, step by step")
        self.act_next_hunk = a("Next hunk", self._w.diff.view.next_hunk, "Alt+Down", "Scroll the Diff pane to its next change")
        self.act_prev_hunk = a("Previous hunk", self._w.diff.view.prev_hunk, "Alt+Up", "Scroll the Diff pane to its previous change")
        self.act_fit = a("&Fit graphs", self._w.fit_graphs, "Ctrl+0", "Fit the FX and Relax graphs to their panes")
        self.act_bookkeeping = a("Show &bookkeeping nodes", lambda: None, "Ctrl+Shift+B",
                                 "Draw asserts, copies of lifted constants, aliases and scalar "
                                 "constants in the FX and Relax graphs")
        self.act_bookkeeping.setCheckable(True)
        self.act_bookkeeping.toggled.connect(self._w.set_show_bookkeeping)
        self.act_reset_layout = a("Reset &layout", self._w.reset_layout, None, "Put every pane back where it starts")
        self.act_toggle_theme = a("Toggle dark theme", self._w.toggle_theme, "Ctrl+Shift+T")
        self.act_help = a("&Shortcuts and panes", lambda: HelpDialog(self._w).show(), "F1")
        self.act_about = a("&About irviz", lambda: HelpDialog(self._w, about=True).show())
        self.theme_group = QActionGroup(self._w)
        self.theme_actions = {}
        for name in themes.THEMES:
            act = QAction(name.capitalize(), self._w, checkable=True)
            act.triggered.connect(lambda _c=False, n=name: self._w.set_theme(n))
            self.theme_group.addAction(act)
            self.theme_actions[name] = act

    def _build_menus(self) -> None:
        mb = self._w.menuBar()
        m = mb.addMenu("&File")
        m.addAction(self.act_open)
        m.addAction(self.generation.act_open)
        self.samples_menu = m.addMenu("Samples")
        self.samples_menu.addAction("(asking the engine…)").setEnabled(False)
        self.recent_menu = m.addMenu("Open &Recent")
        m.addSeparator()
        m.addAction(self.act_load_converters)
        m.addAction(self.act_reimport)
        m.addSeparator()
        m.addAction(self.act_export_step)
        m.addAction(self.act_export_trace)
        g = m.addMenu("Export graph")
        for act in (self.act_export_relax_png, self.act_export_relax_svg, self.act_export_fx_png,
                    self.act_export_fx_svg):
            g.addAction(act)
        m.addSeparator()
        m.addAction(self.act_restart)
        m.addAction(self.act_quit)
        m = mb.addMenu("&Edit")
        m.addAction(self.act_find)
        m = mb.addMenu("&View")
        for row in self._w.pane_rows:
            m.addAction(self._w.docks[row.key].toggleViewAction())
        m.addSeparator()
        m.addAction(self.act_fit)
        m.addAction(self.act_bookkeeping)
        t = m.addMenu("Theme")
        for act in self.theme_actions.values():
            t.addAction(act)
        t.addAction(self.act_toggle_theme)
        m.addAction(self.act_reset_layout)
        m = mb.addMenu("&Pipeline")
        for act in (self.act_step, self.act_back, self.act_run_to_end, self.act_first):
            m.addAction(act)
        m.addSeparator()
        m.addAction(self.act_build_run)
        m.addAction(self.act_cancel)
        m.addAction(self.act_remeasure)
        m.addAction(self.act_compare)
        m.addSeparator()
        m.addAction(self.act_next_hunk)
        m.addAction(self.act_prev_hunk)
        m = mb.addMenu("&Help")
        m.addAction(self.act_help)
        m.addAction(self.act_about)
        self._fill_recent()

    def _build_toolbar(self) -> None:
        tb = self._w.addToolBar("Main")
        tb.setObjectName("toolbar_main")
        tb.setMovable(False)
        tb.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        tb.addAction(self.act_open)
        samples = QToolButton()
        samples.setText("Samples")
        samples.setMenu(self.samples_menu)
        samples.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        tb.addWidget(samples)
        tb.addSeparator()
        for act in (self.act_back, self.act_step, self.act_run_to_end):
            tb.addAction(act)
        tb.addSeparator()
        tb.addAction(self.act_build_run)
        tb.addAction(self.act_cancel)
        tb.addSeparator()
        tb.addAction(self.act_fit)
        tb.addSeparator()
        self.capture_bar = CaptureBar(self._w)  # which capture fallback, and which graph of graph breaks
        self.capture_bar.graphChosen.connect(self._w.choose_graph)
        tb.addWidget(self.capture_bar)
        tb.addWidget(self.generation.bar)
        self.toolbar = tb

    def _build_status(self) -> None:
        sb = self._w.statusBar()
        self.status_label = QLabel("Open a model: File ▸ Open, a sample, or drop a file here.")
        self.step_label = QLabel("")
        self.progress = QProgressBar()
        self.progress.setFixedWidth(200)
        self.progress.setTextVisible(False)
        self.progress.setRange(0, 1000)
        self.progress.hide()
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop the engine's current work (Esc)")
        self.cancel_button.clicked.connect(self._w.cancel)
        self.cancel_button.hide()
        sb.addWidget(self.status_label, 1)
        sb.addPermanentWidget(self.step_label)
        sb.addPermanentWidget(self.progress)
        sb.addPermanentWidget(self.cancel_button)


    def recent_files(self) -> list[str]:
        v = self._w.settings.value("recent", [])
        if isinstance(v, str):
            v = [v]
        return [str(x) for x in (v or [])]

    def add_recent(self, spec: str) -> None:
        items = [spec] + [x for x in self.recent_files() if x != spec]
        self._w.settings.setValue("recent", items[:MAX_RECENT])
        self._fill_recent()

    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        items = self.recent_files()
        for spec in items:
            act = self.recent_menu.addAction(spec)
            act.triggered.connect(lambda _c=False, s=spec: self._w.open_spec(s))
        if not items:
            self.recent_menu.addAction("(none)").setEnabled(False)
        else:
            self.recent_menu.addSeparator()
            self.recent_menu.addAction("Clear", self._clear_recent)

    def _clear_recent(self) -> None:
        self._w.settings.setValue("recent", [])
        self._fill_recent()


    def fill_samples(self) -> None:
        self.samples_menu.clear()
        for s in self._w.samples:
            act = self.samples_menu.addAction(s["name"])
            act.setToolTip(s.get("description", ""))
            act.setStatusTip(s.get("description", ""))
            act.triggered.connect(lambda _c=False, n=s["name"]: self._w.open_spec(f"sample:{n}"))
        self.samples_menu.setToolTipsVisible(True)


    def update_actions(self) -> None:
        has = self._w._has_model()
        cursor = int(self._w.state.get("cursor", 0) or 0)
        steps = self._w.state.get("steps") or []
        more = bool(self._w.state.get("planned")) or cursor < len(steps) - 1
        self.act_step.setEnabled(has and more)
        self.act_run_to_end.setEnabled(has and more)
        self.act_back.setEnabled(has and cursor > 0)
        self.act_first.setEnabled(has and cursor > 0)
        for act in (self.act_build_run, self.act_export_step, self.act_export_trace,
                    self.act_export_relax_png, self.act_export_relax_svg, self.act_export_fx_png,
                    self.act_export_fx_svg):
            act.setEnabled(has)
        self.act_cancel.setEnabled(bool(getattr(self._w.bridge, "busy", False)))
        self.act_reimport.setEnabled(self._w._can_reimport())
