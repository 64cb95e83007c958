"""The main window: docks for the six panes, menus, toolbar, shortcuts, status bar with progress
and Cancel, notifications, drag and drop, settings (geometry, dock layout, recent files, theme).

It owns the bridge and the event hub and hands both to every pane; the panes never talk to each
other. The window itself only routes: open/step commands out, state/provenance/errors in."""
from __future__ import annotations

import os

from PySide6.QtCore import QByteArray, QSettings, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import (QDockWidget, QFileDialog, QFrame, QHBoxLayout, QLabel,
                               QMainWindow, QProgressBar, QPushButton, QToolButton, QVBoxLayout,
                               QWidget)

from irviz.ui import themes
from irviz.ui.events import EventHub
from irviz.ui.help import HelpDialog
from irviz.ui.panes.diff import DiffPane
from irviz.ui.panes.fx import FxPane
from irviz.ui.panes.pipeline import PipelinePane
from irviz.ui.panes.relax import RelaxPane
from irviz.ui.panes.run import RunPane
from irviz.ui.panes.tir import TirPane

MAX_RECENT = 10
LAYOUT_VERSION = 1
# Failures of these commands are worth a notification; others (view requests) go to the status bar.
LOUD_CMDS = {"open", "step", "back", "run_to_end", "jump", "set_pipeline", "replay", "build_run",
             "export", "load_pass_file", "reimport", "load_converters"}
CONVERTER_FILTER = "Converter files (*.py);;All files (*)"
IMPORT_ADVICE = ("Load a converter file for this op (File ▸ Load converters…, Ctrl+Shift+L; "
                 "example: irviz/samples/example_converter.py), then Re-import (Ctrl+Shift+R). "
                 "The FX graph marks the node in red.")
OPEN_FILTER = ("Models and steps (*.py *.pt2);;Python model file or exported TVMScript step (*.py);;"
               "Exported program (*.pt2);;All files (*)")


class Toast(QFrame):
    """A non-modal notification in the bottom-right corner; hides itself after a while."""

    def __init__(self, parent: QWidget):
        super().__init__(parent)
        self.setObjectName("Toast")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.title = QLabel()
        f = self.title.font()
        f.setBold(True)
        self.title.setFont(f)
        self.body = QLabel()
        self.body.setWordWrap(True)
        self.body.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        close = QToolButton(text="✕")
        close.setAutoRaise(True)
        close.clicked.connect(self.hide)
        head = QHBoxLayout()
        head.addWidget(self.title, 1)
        head.addWidget(close)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(10, 6, 6, 8)
        lay.addLayout(head)
        lay.addWidget(self.body)
        self.setFixedWidth(420)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self.hide)
        self.hide()

    def show_message(self, title: str, body: str, kind: str = "error", ms: int = 10000) -> None:
        self.setProperty("kind", kind)
        self.style().unpolish(self)
        self.style().polish(self)
        self.title.setText(title)
        self.body.setText(body)
        self.adjustSize()
        self.reposition()
        self.show()
        self.raise_()
        self._timer.start(ms)

    def reposition(self) -> None:
        p = self.parentWidget()
        if p is None:
            return
        bottom = p.height() - (p.statusBar().height() if hasattr(p, "statusBar") else 0)
        self.move(p.width() - self.width() - 16, bottom - self.height() - 12)


class MainWindow(QMainWindow):
    allFilled = Signal()  # every pane shows the current step

    def __init__(self, bridge=None, settings: QSettings | None = None, parent=None):
        super().__init__(parent)
        if bridge is None:
            from irviz.ui.bridge import EngineBridge

            bridge = EngineBridge(self)
        self.bridge = bridge
        self.hub = EventHub(self)
        self.settings = settings if settings is not None else QSettings("irviz", "irviz")
        self.state: dict = {}
        self._own: dict[int, str] = {}  # request id -> purpose, for the window's own requests
        self._pending_open: str | None = None
        self.samples: list[dict] = []
        self.last_error: dict | None = None
        self.messages: list[str] = []  # every notification shown (tests read it)

        self.setWindowTitle("irviz")
        self.setAcceptDrops(True)
        self.setDockNestingEnabled(True)
        self.setDockOptions(QMainWindow.DockOption.AnimatedDocks | QMainWindow.DockOption.AllowNestedDocks
                            | QMainWindow.DockOption.AllowTabbedDocks)

        self.fx = FxPane(bridge, self.hub)
        self.relax = RelaxPane(bridge, self.hub)
        self.tir = TirPane(bridge, self.hub)
        self.pipeline = PipelinePane(bridge, self.hub)
        self.diff = DiffPane(bridge, self.hub)
        self.run = RunPane(bridge, self.hub)
        self.panes = [self.fx, self.relax, self.tir, self.pipeline, self.diff, self.run]
        for p in self.panes:
            p.filledChanged.connect(self._check_filled)
        self.docks: dict[str, QDockWidget] = {}
        self._build_docks()
        self._build_actions()
        self._build_menus()
        self._build_toolbar()
        self._build_status()
        self.toast = Toast(self)

        bridge.stateChanged.connect(self._on_state)
        bridge.replied.connect(self._on_replied)
        bridge.failed.connect(self._on_failed)
        bridge.progress.connect(self._on_progress)
        bridge.busyChanged.connect(self._on_busy)
        bridge.engineRestarted.connect(self._on_restarted)
        self._on_busy(bool(getattr(bridge, "busy", False)))  # the panes' first requests are out already

        self._default_state = self.saveState(LAYOUT_VERSION)
        self.resize(1600, 1000)
        self._restore_settings()
        self._ask("samples", "list_samples")
        self._update_actions()

    # -- construction ------------------------------------------------------------------------------
    def _dock(self, key: str, pane, area) -> QDockWidget:
        dock = QDockWidget(pane.title, self)
        dock.setObjectName(f"dock_{key}")
        dock.setWidget(pane)
        dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable
                         | QDockWidget.DockWidgetFeature.DockWidgetFloatable
                         | QDockWidget.DockWidgetFeature.DockWidgetClosable)
        self.addDockWidget(area, dock)
        self.docks[key] = dock
        return dock

    def _build_docks(self) -> None:
        # Everything lives in one dock area, nested, and there is no central widget: with docks
        # in several areas around an empty centre, Qt hands all spare width to one area whenever
        # a size hint changes. The order of the splits makes Diff|Run span the three IR panes.
        area = Qt.DockWidgetArea.LeftDockWidgetArea
        H, V = Qt.Orientation.Horizontal, Qt.Orientation.Vertical
        pipeline = self._dock("pipeline", self.pipeline, area)
        fx = self._dock("fx", self.fx, area)
        self.splitDockWidget(pipeline, fx, H)
        diff = self._dock("diff", self.diff, area)
        self.splitDockWidget(fx, diff, V)
        relax = self._dock("relax", self.relax, area)
        self.splitDockWidget(fx, relax, H)
        tir = self._dock("tir", self.tir, area)
        self.splitDockWidget(relax, tir, H)
        run = self._dock("run", self.run, area)
        self.splitDockWidget(diff, run, H)
        self._apply_default_sizes()

    def _apply_default_sizes(self) -> None:
        d = self.docks
        w, h = max(self.width(), 800), max(self.height(), 500)
        left = min(300, int(w * 0.19))
        rest = w - left
        self.resizeDocks([d["pipeline"]], [left], Qt.Orientation.Horizontal)
        self.resizeDocks([d["fx"], d["relax"], d["tir"]], [int(rest * 0.3), int(rest * 0.38), int(rest * 0.32)],
                         Qt.Orientation.Horizontal)
        self.resizeDocks([d["diff"], d["run"]], [int(rest * 0.62), int(rest * 0.38)], Qt.Orientation.Horizontal)
        self.resizeDocks([d["fx"], d["diff"]], [int(h * 0.62), int(h * 0.32)], Qt.Orientation.Vertical)

    def _action(self, text: str, slot, shortcut: str | None = None, tip: str | None = None) -> QAction:
        act = QAction(text, self)
        if shortcut:
            act.setShortcut(QKeySequence(shortcut))
            act.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        if tip or shortcut:
            act.setToolTip(f"{tip or text.replace('&', '').rstrip('…')}" + (f" ({shortcut})" if shortcut else ""))
        act.triggered.connect(lambda _checked=False: slot())
        self.addAction(act)
        return act

    def _build_actions(self) -> None:
        a = self._action
        self.act_open = a("&Open…", self.open_dialog, "Ctrl+O", "Open a model file")
        self.act_export_step = a("Export current &step…", lambda: self.export_dialog(current_only=True), "Ctrl+E")
        self.act_export_trace = a("Export whole &trace…", lambda: self.export_dialog(current_only=False), "Ctrl+Shift+E")
        self.act_export_relax_png = a("Relax graph as PNG…", lambda: self.export_graph("relax", "png"))
        self.act_export_relax_svg = a("Relax graph as SVG…", lambda: self.export_graph("relax", "svg"))
        self.act_export_fx_png = a("FX graph as PNG…", lambda: self.export_graph("fx", "png"))
        self.act_export_fx_svg = a("FX graph as SVG…", lambda: self.export_graph("fx", "svg"))
        self.act_load_converters = a("Load &converters…", self.load_converters_dialog, "Ctrl+Shift+L",
                                     "Load a Python file with CONVERTERS = {aten op: fn} for ops TVM cannot import")
        self.act_reimport = a("Re-&import", self.reimport, "Ctrl+Shift+R",
                              "Import the captured model into Relax again, with the loaded converters")
        self.act_restart = a("Restart engine", lambda: self.bridge.restart("Restarted the engine on request."))
        self.act_quit = a("&Quit", self.close, "Ctrl+Q")
        self.act_find = a("&Find", self.focus_search, "Ctrl+F", "Search in the focused pane")
        self.act_step = a("&Step", self.step, "F10", "Apply the next pass")
        self.act_back = a("Step &back", self.back, "Shift+F10", "Undo the last pass")
        self.act_run_to_end = a("&Run to end", self.run_to_end, "F5", "Apply every planned pass")
        self.act_first = a("Jump to &import", lambda: self.jump(0), "Ctrl+Home", "Go to step 0")
        self.act_build_run = a("&Build && Run", self.build_run, "Ctrl+R", "Build the current step and compare with PyTorch")
        self.act_cancel = a("&Cancel", self.cancel, "Esc", "Stop the engine's current work")
        self.act_next_hunk = a("Next hunk", self.diff.view.next_hunk, "Alt+Down")
        self.act_prev_hunk = a("Previous hunk", self.diff.view.prev_hunk, "Alt+Up")
        self.act_fit = a("&Fit graphs", self.fit_graphs, "Ctrl+0")
        self.act_reset_layout = a("Reset &layout", self.reset_layout)
        self.act_toggle_theme = a("Toggle dark theme", self.toggle_theme, "Ctrl+Shift+T")
        self.act_help = a("&Shortcuts and panes", lambda: HelpDialog(self).show(), "F1")
        self.act_about = a("&About irviz", lambda: HelpDialog(self, about=True).show())
        self.theme_group = QActionGroup(self)
        self.theme_actions = {}
        for name in themes.THEMES:
            act = QAction(name.capitalize(), self, checkable=True)
            act.triggered.connect(lambda _c=False, n=name: self.set_theme(n))
            self.theme_group.addAction(act)
            self.theme_actions[name] = act

    def _build_menus(self) -> None:
        mb = self.menuBar()
        m = mb.addMenu("&File")
        m.addAction(self.act_open)
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
        for key in ("fx", "relax", "tir", "pipeline", "diff", "run"):
            m.addAction(self.docks[key].toggleViewAction())
        m.addSeparator()
        m.addAction(self.act_fit)
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
        m.addSeparator()
        m.addAction(self.act_next_hunk)
        m.addAction(self.act_prev_hunk)
        m = mb.addMenu("&Help")
        m.addAction(self.act_help)
        m.addAction(self.act_about)
        self._fill_recent()

    def _build_toolbar(self) -> None:
        tb = self.addToolBar("Main")
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
        self.toolbar = tb

    def _build_status(self) -> None:
        sb = self.statusBar()
        self.status_label = QLabel("Open a model: File ▸ Open, a sample, or drop a file here.")
        self.step_label = QLabel("")
        self.progress = QProgressBar()
        self.progress.setFixedWidth(200)
        self.progress.setTextVisible(False)
        self.progress.setRange(0, 1000)
        self.progress.hide()
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop the engine's current work (Esc)")
        self.cancel_button.clicked.connect(self.cancel)
        self.cancel_button.hide()
        sb.addWidget(self.status_label, 1)
        sb.addPermanentWidget(self.step_label)
        sb.addPermanentWidget(self.progress)
        sb.addPermanentWidget(self.cancel_button)

    # -- settings ----------------------------------------------------------------------------------
    def _restore_settings(self) -> None:
        s = self.settings
        geo = s.value("window/geometry")
        if isinstance(geo, (QByteArray, bytes)) and geo:
            self.restoreGeometry(QByteArray(geo))
        st = s.value("window/state")
        self._layout_restored = False
        if isinstance(st, (QByteArray, bytes)) and st:
            self._layout_restored = self.restoreState(QByteArray(st), LAYOUT_VERSION)
        self.set_theme(str(s.value("theme", "light")), save=False)
        self.diff.view.set_mode(str(s.value("diff/mode", "side")))
        self.pipeline.hide_unchanged.setChecked(s.value("pipeline/hide_unchanged", False, type=bool))
        mode = str(s.value("relax/view", "split"))
        self.relax.set_view(mode if mode in self.relax.mode_buttons else "split")
        self.fx.tabs.setCurrentIndex(1 if s.value("fx/tab", "graph") == "table" else 0)

    def save_settings(self) -> None:
        s = self.settings
        s.setValue("window/geometry", self.saveGeometry())
        s.setValue("window/state", self.saveState(LAYOUT_VERSION))
        s.setValue("theme", themes.colors().name)
        s.setValue("diff/mode", self.diff.view.mode)
        s.setValue("pipeline/hide_unchanged", self.pipeline.hide_unchanged.isChecked())
        s.setValue("relax/view", self.relax.view_mode())
        s.setValue("fx/tab", "table" if self.fx.tabs.currentIndex() == 1 else "graph")
        s.sync()

    def showEvent(self, event) -> None:  # noqa: N802
        super().showEvent(event)
        if not self._layout_restored and not getattr(self, "_sized", False):
            self._sized = True  # dock sizes only stick once the dock layout has its real geometry
            self.layout().activate()
            self._apply_default_sizes()

    def closeEvent(self, event) -> None:  # noqa: N802
        self.save_settings()
        super().closeEvent(event)

    def recent_files(self) -> list[str]:
        v = self.settings.value("recent", [])
        if isinstance(v, str):
            v = [v]
        return [str(x) for x in (v or [])]

    def _add_recent(self, spec: str) -> None:
        items = [spec] + [x for x in self.recent_files() if x != spec]
        self.settings.setValue("recent", items[:MAX_RECENT])
        self._fill_recent()

    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        items = self.recent_files()
        for spec in items:
            act = self.recent_menu.addAction(spec)
            act.triggered.connect(lambda _c=False, s=spec: self.open_spec(s))
        if not items:
            self.recent_menu.addAction("(none)").setEnabled(False)
        else:
            self.recent_menu.addSeparator()
            self.recent_menu.addAction("Clear", self._clear_recent)

    def _clear_recent(self) -> None:
        self.settings.setValue("recent", [])
        self._fill_recent()

    def set_theme(self, name: str, save: bool = True) -> None:
        themes.apply_theme(name)
        self.theme_actions.get(name, self.theme_actions["light"]).setChecked(True)
        for view in (self.relax.code, self.tir.code):
            view.restyle()
        self.diff.view.restyle()
        for g in (self.fx.graph, self.relax.graph):
            g.set_dark(name == "dark")
        self.pipeline.restyle()
        self.tir.restyle()
        if save:
            self.settings.setValue("theme", name)

    def toggle_theme(self) -> None:
        self.set_theme("light" if themes.colors().name == "dark" else "dark")

    def reset_layout(self) -> None:
        self.restoreState(self._default_state, LAYOUT_VERSION)
        for d in self.docks.values():
            d.show()
        self._apply_default_sizes()

    # -- commands ----------------------------------------------------------------------------------
    def _ask(self, purpose: str, cmd: str, **args) -> int:
        rid = self.bridge.request(cmd, **args)
        self._own[rid] = purpose
        return rid

    def open_spec(self, spec: str, pipeline: str = "zero") -> int:
        spec = str(spec)
        self._pending_open = spec
        self.hub.clear()
        self.status(f"Opening {spec}…")
        for p in (self.fx, self.relax, self.tir, self.pipeline):
            p.show_loading(f"Opening {spec}: torch.export and import into Relax…")
        return self._ask("open", "open", spec=spec, pipeline=pipeline)

    def open_dialog(self) -> None:
        start = os.path.dirname(self.recent_files()[0]) if self.recent_files() else ""
        if start.startswith("sample:"):
            start = ""
        path, _ = QFileDialog.getOpenFileName(self, "Open model", start, OPEN_FILTER)
        if path:
            self.open_spec(path)

    def load_converters_dialog(self) -> None:
        start = os.path.dirname(self.bridge.converter_files[-1]) \
            if getattr(self.bridge, "converter_files", None) else ""
        path, _ = QFileDialog.getOpenFileName(self, "Load converters", start, CONVERTER_FILTER)
        if path:
            self.load_converters(path)

    def load_converters(self, path: str) -> int:
        """Load a converter file in the engine (kept for every later import and replay)."""
        self.status(f"Loading converters from {path}…")
        return self._ask("converters", "load_converters", path=str(path))

    def reimport(self) -> int | None:
        """Import the captured model again with the loaded converters (no re-capture, no restart)."""
        if not self._can_reimport():
            return None
        self.status("Re-importing into Relax…")
        return self._ask("reimport", "reimport")

    def _can_reimport(self) -> bool:
        if self.state.get("import_error"):
            return True
        return self._has_model() and self.state.get("importer") != "tvmscript"

    def step(self) -> None:
        if self._has_model():
            self.pipeline.step()

    def back(self) -> None:
        if self._has_model():
            self.pipeline.back()

    def run_to_end(self) -> None:
        if self._has_model():
            self.pipeline.run_to_end()

    def jump(self, index: int) -> None:
        if self._has_model():
            self.pipeline.jump(index)

    def build_run(self) -> None:
        if self._has_model():
            self.docks["run"].show()
            self.docks["run"].raise_()
            self.run.build_run()

    def cancel(self) -> None:
        if self.bridge.cancel():
            self.status("Cancelling… the engine restarts and replays to the last good step.")

    def fit_graphs(self) -> None:
        for g in (self.fx.graph, self.relax.graph):
            g.fit_to_view()

    def focus_search(self) -> None:
        w = self.focusWidget()
        for p in self.panes:
            if w is not None and (w is p or p.isAncestorOf(w)):
                p.focus_search()
                return
        self.fx.focus_search()

    def export_dialog(self, current_only: bool) -> None:
        if not self._has_model():
            return
        out = QFileDialog.getExistingDirectory(self, "Export to folder")
        if out:
            self.export_to(out, current_only)

    def export_to(self, out_dir: str, current_only: bool) -> int:
        steps = [int(self.state.get("cursor", 0))] if current_only else "all"
        self.status(f"Exporting to {out_dir}…")
        return self._ask("export", "export", out_dir=str(out_dir), steps=steps)

    def export_graph(self, which: str, fmt: str, path: str | None = None) -> str | None:
        view = self.fx.graph if which == "fx" else self.relax.graph
        if path is None:
            model = self.state.get("model") or "graph"
            suggestion = f"{model}_{which}_step{self.state.get('cursor', 0)}.{fmt}"
            path, _ = QFileDialog.getSaveFileName(self, f"Export {which} graph", suggestion,
                                                  f"{fmt.upper()} (*.{fmt})")
            if not path:
                return None
        getattr(view, f"export_{fmt}")(path)
        self.status(f"Saved {path}")
        return path

    # -- bridge signals ------------------------------------------------------------------------------
    def _on_state(self, state: dict) -> None:
        prev = self.state
        self.state = state or {}
        model = self.state.get("model")
        err = self.state.get("import_error")
        if not model and err:
            spec = self.state.get("spec")
            if self._pending_open is not None and spec:
                self._pending_open = None
                self._add_recent(spec)
            name = err.get("model") or spec or ""
            self.setWindowTitle(f"irviz — {name} — import failed")
            self.step_label.setText(f"{name} · import failed at {err.get('node') or '?'}")
            self.hub.set_provenance(None)
            self._import_error_status()
            self._update_actions()
            return
        if not model:
            self.setWindowTitle("irviz")
            self.step_label.setText("")
            self.hub.set_provenance(None)
            self._update_actions()
            return
        spec = self.state.get("spec")
        if self._pending_open is not None and spec:
            self._pending_open = None
            self._add_recent(spec)
        cursor = int(self.state.get("cursor", 0))
        steps = self.state.get("steps") or []
        name = next((s.get("pass") for s in steps if s.get("index") == cursor), "")
        total = len(steps) - 1 + len(self.state.get("planned") or [])
        self.setWindowTitle(f"irviz — {model} — step {cursor}: {name}")
        self.step_label.setText(f"{model} · step {cursor}/{total} · {name}")
        if (cursor, spec) != (prev.get("cursor"), prev.get("spec")) or not prev.get("model"):
            self.hub.set_provenance(None)
            self._ask("provenance", "provenance", step=cursor)
        if not self.bridge.busy:
            self.status(self._step_text())
        self._update_actions()

    def _import_error_status(self) -> None:
        err = self.state.get("import_error") or {}
        self.status(f"Import failed at FX node {err.get('node') or '?'} ({err.get('op') or '?'}). "
                    + IMPORT_ADVICE, error=True)

    def _step_text(self) -> str:
        cursor = int(self.state.get("cursor", 0))
        step = next((s for s in self.state.get("steps") or [] if s.get("index") == cursor), {})
        text = f"Step {cursor}: {step.get('pass', '')}"
        if cursor > 0:
            text += " — changed the module" if step.get("changed") else " — changed nothing"
        return text

    def _on_replied(self, rid: int, cmd: str, result) -> None:
        purpose = self._own.pop(rid, None)
        if purpose is None:
            return
        if purpose in ("open", "reimport"):
            self.state = {}
            self.hub.sessionReset.emit()  # before the bridge emits the new state
            if purpose == "reimport":
                self.notify("Re-imported", "The model imports into Relax now; the session is back "
                            "at step 0 with the same planned passes.", kind="info")
        elif purpose == "converters":
            res = result or {}
            ops = ", ".join(res.get("ops") or []) or "no ops"
            path = res.get("path", "")
            if self.state.get("import_error"):
                text = f"Loaded converters for {ops} from {path}. Re-import (Ctrl+Shift+R) to use them."
            else:
                text = f"Loaded converters for {ops} from {path}; used by every import from now on."
            self.status(text)
            self.notify("Converters loaded", text, kind="info")
            self._update_actions()
        elif purpose == "samples":
            self.samples = list(result or [])
            self._fill_samples()
        elif purpose == "provenance":
            if (result or {}) and self.state.get("model"):
                self.hub.set_provenance(result)
        elif purpose == "export":
            files = (result or {}).get("files") or []
            path = (result or {}).get("path", "")
            self.notify("Exported", f"{len(files)} files in {path}", kind="info")
            self.status(f"Exported {len(files)} files to {path}")

    def _on_failed(self, rid: int, cmd: str, error: dict) -> None:
        purpose = self._own.pop(rid, None)
        error = error or {}
        stage = error.get("stage", "?")
        msg = error.get("message", "failed")
        hint = error.get("hint")
        if stage == "cancelled":
            self.status(msg)
            return
        if purpose == "open" and stage == "import":
            # the model was captured: its state (import_error, FX graph) follows, a new model
            self.state = {}
            self.hub.sessionReset.emit()
        elif purpose == "open":
            self._pending_open = None
            for p in (self.fx, self.relax, self.tir, self.pipeline):  # undo "Opening…"
                p.refresh()
        if cmd not in LOUD_CMDS and purpose is None:
            return  # a pane's view request: the pane shows its own error
        line = f"{stage}: {msg}" + (f" — {hint}" if hint else "")
        self.status(line, error=True)
        if cmd in LOUD_CMDS or purpose in ("open", "export"):
            self.last_error = error
            title = {"load": "Could not load the model", "capture": "torch.export failed",
                     "import": "Import into Relax failed", "pipeline": "Pass failed",
                     "build": "Build failed", "run": "Run failed", "export": "Export failed",
                     "engine": "Engine problem"}.get(stage, f"{stage} failed")
            body = msg + (f"\n\nHint: {hint}" if hint else "")
            if stage == "import" and error.get("node"):
                title = f"Import into Relax failed at {error.get('node')} ({error.get('op') or '?'})"
                body = msg + "\n\n" + IMPORT_ADVICE
                self.status(f"Import failed at FX node {error.get('node')} ({error.get('op') or '?'}). "
                            + IMPORT_ADVICE, error=True)
            if self.state.get("model") and stage != "import":
                body += f"\n\nThe session stays at step {self.state.get('cursor', 0)}."
            self.notify(title, body)

    def _on_progress(self, rid: int, text: str, fraction: float) -> None:
        self.progress.show()
        self.cancel_button.show()
        if fraction is None or fraction < 0:
            self.progress.setRange(0, 0)
        else:
            self.progress.setRange(0, 1000)
            self.progress.setValue(int(1000 * fraction))
        self.status(text)
        self._progress_status = True

    def _on_busy(self, busy: bool) -> None:
        self.progress.setVisible(busy)
        self.cancel_button.setVisible(busy)
        self.act_cancel.setEnabled(busy)
        if busy:
            self.progress.setRange(0, 0)
        elif self.state.get("model") and self.status_label.styleSheet() == "":
            self.status(self._step_text())
        elif not self.state.get("model") and self.state.get("import_error") \
                and getattr(self, "_progress_status", False):
            self._import_error_status()   # replace the last progress text, not a newer message
        self._update_actions()

    def _on_restarted(self, text: str) -> None:
        self.status(text, error=True)
        self.notify("Engine restarted", text, kind="info")

    # -- feedback ----------------------------------------------------------------------------------
    def status(self, text: str, error: bool = False) -> None:
        self._progress_status = False
        c = themes.colors()
        self.status_label.setStyleSheet(f"color: {c.bad};" if error else "")
        self.status_label.setText(text)
        self.status_label.setToolTip(text)

    def notify(self, title: str, body: str, kind: str = "error") -> None:
        self.messages.append(f"{title}: {body}")
        self.toast.show_message(title, body, kind)

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        if self.toast.isVisible():
            self.toast.reposition()

    def _fill_samples(self) -> None:
        self.samples_menu.clear()
        for s in self.samples:
            act = self.samples_menu.addAction(s["name"])
            act.setToolTip(s.get("description", ""))
            act.setStatusTip(s.get("description", ""))
            act.triggered.connect(lambda _c=False, n=s["name"]: self.open_spec(f"sample:{n}"))
        self.samples_menu.setToolTipsVisible(True)

    def _has_model(self) -> bool:
        return bool(self.state.get("model"))

    def _update_actions(self) -> None:
        has = self._has_model()
        cursor = int(self.state.get("cursor", 0) or 0)
        steps = self.state.get("steps") or []
        more = bool(self.state.get("planned")) or cursor < len(steps) - 1
        self.act_step.setEnabled(has and more)
        self.act_run_to_end.setEnabled(has and more)
        self.act_back.setEnabled(has and cursor > 0)
        self.act_first.setEnabled(has and cursor > 0)
        for act in (self.act_build_run, self.act_export_step, self.act_export_trace,
                    self.act_export_relax_png, self.act_export_relax_svg, self.act_export_fx_png,
                    self.act_export_fx_svg):
            act.setEnabled(has)
        self.act_cancel.setEnabled(bool(getattr(self.bridge, "busy", False)))
        self.act_reimport.setEnabled(self._can_reimport())

    # -- drag and drop -----------------------------------------------------------------------------
    def dragEnterEvent(self, event) -> None:  # noqa: N802
        if event.mimeData().hasUrls() and any(u.isLocalFile() for u in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:  # noqa: N802
        for url in event.mimeData().urls():
            if url.isLocalFile():
                self.open_spec(url.toLocalFile())
                event.acceptProposedAction()
                return

    # -- for tests, snapshot and benchmarks ----------------------------------------------------------
    def all_filled(self) -> bool:
        return bool(self.state.get("model")) and not self.bridge.busy and all(p.is_filled() for p in self.panes)

    def _check_filled(self) -> None:
        if self.all_filled():
            self.allFilled.emit()
