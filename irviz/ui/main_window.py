"""The main window: a dock for every pane of the pane table, menus, toolbar, shortcuts, status bar with progress
and Cancel, notifications, drag and drop, settings (geometry, dock layout, recent files, theme).

Actions, menus, toolbar and status bar are in :mod:`irviz.ui.window_chrome`; which panes there
are, and where they dock, is :mod:`irviz.ui.pane_table`.
It owns the bridge and the event hub and hands both to every pane; the panes never talk to each
other. The window itself only routes: open/step commands out, state/provenance/errors in."""
from __future__ import annotations

import os

from PySide6.QtCore import QByteArray, QSettings, Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QDockWidget, QFileDialog, QMainWindow

from irviz.protocol.commands import ErrorDict, State, empty_state
from irviz.ui import pane_table, themes
from irviz.ui.bridge import EngineBridge
from irviz.ui.events import EventHub
from irviz.ui.export_dialog import ask_export, exported_text
from irviz.ui.launch_pipeline import refused_pipeline, reopen_with_zero
from irviz.ui.open_dialog import OpenDialog
from irviz.ui.panes.compare_window import CompareDialog
from irviz.ui.result_stamp import ResultStamp
from irviz.ui.window_chrome import Toast, WindowChrome
from irviz.ui.window_parts import WindowParts

LAYOUT_VERSION = 1
# Failures of these commands are worth a notification; others (view requests) go to the status bar.
LOUD_CMDS = {"open", "step", "back", "run_to_end", "jump", "set_pipeline", "set_target", "replay", "build_run",
             "export", "load_pass_file", "reimport", "load_converters", "remeasure", "choose_graph"}
CONVERTER_FILTER = "Converter files (*.py);;All files (*)"
IMPORT_ADVICE = ("Load a converter file for this op (File ▸ Load converters…, Ctrl+Shift+L; "
                 "example: irviz/samples/example_converter.py), then Re-import (Ctrl+Shift+R). "
                 "The FX graph marks the node in red.")


# what a window's frame (title bar, borders) adds around its client area, at most
FRAME_MARGIN = (16, 48)


def available_geometry(widget):
    """The usable part of the screen the widget is on (no taskbar), or None offscreen-less."""
    screen = widget.screen() or QGuiApplication.primaryScreen()
    return screen.availableGeometry() if screen is not None else None


def fit_to(width: int, height: int, available) -> tuple[int, int]:
    """`width` x `height`, shrunk so the window with its frame fits `available` (a QRect)."""
    if available is None or available.width() <= 0 or available.height() <= 0:
        return width, height
    return (min(width, available.width() - FRAME_MARGIN[0]),
            min(height, available.height() - FRAME_MARGIN[1]))

class MainWindow(WindowParts):
    allFilled = Signal()  # every pane shows the current step

    def __init__(self, bridge=None, settings: QSettings | None = None, parent=None):
        super().__init__(parent)
        if bridge is None:
            bridge = EngineBridge(self)
        self.bridge = bridge
        self.hub = EventHub(self)
        self.settings = settings if settings is not None else QSettings("irviz", "irviz")
        self.state: State = empty_state()  # the engine's last; no model until the first
        self._own: dict[int, str] = {}  # request id -> purpose, for the window's own requests
        self._pending_open: str | None = None
        self.samples: list[dict] = []
        self.last_error: dict | None = None
        self.messages: list[str] = []  # every notification shown (tests read it)
        self._toast_stamp: tuple[ResultStamp, int | None] | None = None  # what the toast is about, and its cursor

        self.setWindowTitle("irviz")
        self.setAcceptDrops(True)
        self.setDockNestingEnabled(True)
        self.setDockOptions(QMainWindow.DockOption.AnimatedDocks | QMainWindow.DockOption.AllowNestedDocks
                            | QMainWindow.DockOption.AllowTabbedDocks)

        self.pane_rows = pane_table.rows()
        self.panes = []
        for row in self.pane_rows:
            pane = row.cls(bridge, self.hub, settings=self.settings)
            setattr(self, row.key, pane)   # window.fx, window.relax, ...
            self.panes.append(pane)
            pane.filledChanged.connect(self._check_filled)
        self.docks: dict[str, QDockWidget] = {}
        self._build_docks()
        self.chrome = WindowChrome(self)
        for name, part in self.chrome.parts().items():
            setattr(self, name, part)   # window.act_step, window.status_label, window.recent_files, ...
        self.toast = Toast(self)

        bridge.stateChanged.connect(self._on_state)
        bridge.replied.connect(self._on_replied)
        bridge.failed.connect(self._on_failed)
        bridge.progress.connect(self._on_progress)
        bridge.busyChanged.connect(self._on_busy)
        bridge.engineRestarted.connect(self._on_restarted)
        self._on_busy(bool(getattr(bridge, "busy", False)))  # the panes' first requests are out already

        self._default_state = self.saveState(LAYOUT_VERSION)
        self.resize(*fit_to(1600, 1000, available_geometry(self)))
        self._restore_settings()
        self._ask("samples", "list_samples")
        self.chrome.update_actions()

    # -- construction ------------------------------------------------------------------------------
    def _build_docks(self) -> None:
        # Everything lives in one dock area, nested, and there is no central widget: with docks
        # in several areas around an empty centre, Qt hands all spare width to one area whenever
        # a size hint changes. The table's dock order makes Diff|Run span the three IR panes.
        area = Qt.DockWidgetArea.LeftDockWidgetArea
        sides = {"right": Qt.Orientation.Horizontal, "below": Qt.Orientation.Vertical}
        for row in sorted(self.pane_rows, key=lambda r: r.dock.order):
            dock = QDockWidget(row.title, self)
            dock.setObjectName(f"dock_{row.key}")   # the saved layout finds the dock by this name
            dock.setWidget(getattr(self, row.key))
            dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable
                             | QDockWidget.DockWidgetFeature.DockWidgetFloatable
                             | QDockWidget.DockWidgetFeature.DockWidgetClosable)
            self.addDockWidget(area, dock)
            if row.dock.of is not None:
                self.splitDockWidget(self.docks[row.dock.of], dock, sides[str(row.dock.side)])
            self.docks[row.key] = dock
        self._apply_default_sizes()

    def _apply_default_sizes(self) -> None:
        # Tuned for the built-in panes; a pane added to the table keeps the size Qt gives it.
        if not {"pipeline", "fx", "relax", "tir", "diff", "run"} <= set(self.docks):
            return
        d = self.docks
        w, h = max(self.width(), 800), max(self.height(), 500)
        left = min(300, int(w * 0.19))
        rest = w - left
        self.resizeDocks([d["pipeline"]], [left], Qt.Orientation.Horizontal)
        self.resizeDocks([d["fx"], d["relax"], d["tir"]], [int(rest * 0.3), int(rest * 0.38), int(rest * 0.32)],
                         Qt.Orientation.Horizontal)
        self.resizeDocks([d["diff"], d["run"]], [int(rest * 0.62), int(rest * 0.38)], Qt.Orientation.Horizontal)
        self.resizeDocks([d["fx"], d["diff"]], [int(h * 0.62), int(h * 0.32)], Qt.Orientation.Vertical)

    # -- settings ----------------------------------------------------------------------------------
    def _restore_settings(self) -> None:
        s = self.settings
        geo = s.value("window/geometry")
        if isinstance(geo, (QByteArray, bytes)) and geo:
            self.restoreGeometry(QByteArray(geo))
            # saved on a bigger screen (or grown past it once): never come back larger than this one
            self.resize(*fit_to(self.width(), self.height(), available_geometry(self)))
        st = s.value("window/state")
        self._layout_restored = False
        if isinstance(st, (QByteArray, bytes)) and st:
            self._layout_restored = self.restoreState(QByteArray(st), LAYOUT_VERSION)
        self.set_theme(str(s.value("theme", "light")), save=False)
        for p in self.panes:
            p.restore_settings(s)
        self.act_bookkeeping.setChecked(bool(s.value("graphs/bookkeeping", False, type=bool)))

    def save_settings(self) -> None:
        s = self.settings
        s.setValue("window/geometry", self.saveGeometry())
        s.setValue("window/state", self.saveState(LAYOUT_VERSION))
        s.setValue("theme", themes.colors().name)
        for p in self.panes:
            p.save_settings(s)
        s.setValue("graphs/bookkeeping", self.act_bookkeeping.isChecked())
        s.sync()

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if not self._layout_restored and not getattr(self, "_sized", False):
            self._sized = True  # dock sizes only stick once the dock layout has its real geometry
            if (layout := self.layout()) is not None:
                layout.activate()
            self._apply_default_sizes()

    def closeEvent(self, event) -> None:
        self.save_settings()
        super().closeEvent(event)

    def set_theme(self, name: str, save: bool = True) -> None:
        themes.apply_theme(name)
        self.theme_actions.get(name, self.theme_actions["light"]).setChecked(True)
        for p in self.panes:
            p.restyle()
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

    def open_spec(self, spec: str, pipeline: str = "zero", capture: str | None = None,
                  importer: str | None = None, importer_maps=None, keep_params: bool = False,
                  no_weights: bool = False) -> int:
        """Open `spec` in the engine; capture / importer None: the engine chooses (see OpenDialog)."""
        self._open_args = {k: v for k, v in locals().items() if k != "self"}  # to open it again
        spec = str(spec)
        self._pending_open = spec
        self.hub.clear()
        self.status(f"Opening {spec}…")
        how = "torch.fx.symbolic_trace" if capture == "symbolic_trace" or importer_maps else "torch.export"
        for p in (self.fx, self.relax, self.tir, self.pipeline):
            p.show_loading(f"Opening {spec}: {how} and import into Relax…")
        # only what was chosen goes out, so the engine's defaults (and the model file's) apply
        extra = {k: v for k, v in (("capture", capture), ("importer", importer),
                                   ("importer_maps", list(importer_maps or ())),
                                   ("keep_params", bool(keep_params)),
                                   ("no_weights", bool(no_weights))) if v}
        return self._ask("open", "open", spec=spec, pipeline=pipeline, **extra)

    def open_dialog(self) -> None:
        start = os.path.dirname(self.recent_files()[0]) if self.recent_files() else ""
        if start.startswith("sample:"):
            start = ""
        st = self.state
        keep = self.settings.value("open/keep_params", False, type=bool)
        dlg = OpenDialog(self, start_dir=start, importer_maps=st.get("importer_maps") or (),
                         keep_params=bool(keep), no_weights=bool(self.settings.value("open/no_weights", False, type=bool)))
        self.open_dialog_widget = dlg  # tests and screenshots reach the dialog through this
        if dlg.exec():
            choice = dlg.choice()
            self.settings.setValue("open/keep_params", choice["keep_params"])
            self.settings.setValue("open/no_weights", choice["no_weights"])
            self.open_spec(**choice)

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

    def remeasure(self) -> int | None:
        """Apply the passes again, timing every library-or-TensorIR choice and conv2d tile afresh."""
        if not self._has_model():
            return None
        self.status("Re-measuring the CPU decisions (library or TensorIR, conv2d tiles) on this machine…")
        return self._ask("remeasure", "remeasure")

    def compare_dialog(self, pipeline_b: str | None = None):
        """Pipeline ▸ Compare with pipeline…: a window comparing the open pipeline with another."""
        if not self._has_model():
            return None
        dlg = getattr(self, "compare_widget", None)
        if dlg is None:
            dlg = self.compare_widget = CompareDialog(self.bridge, self.hub, self.state, self)
        dlg.show()
        dlg.raise_()
        if pipeline_b:
            dlg.pane.compare(pipeline_b)
        return dlg

    def choose_graph(self, graph: int) -> int | None:
        """Show another graph of the open model's graph breaks, its passes planned afresh."""
        if not self.state.get("graph_breaks"):
            return None
        self.status(f"Opening graph {graph} of the model's graph breaks…")
        return self._ask("graph", "choose_graph", graph=int(graph))

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

    def set_show_bookkeeping(self, on: bool) -> None:
        """Draw (or leave out) asserts, copies of lifted constants, aliases and scalar constants."""
        for p in self.panes:
            p.set_show_bookkeeping(bool(on))
        self.settings.setValue("graphs/bookkeeping", bool(on))

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
        choice = ask_export(self, current_only, self.state, self.settings) if self._has_model() else None
        if choice:
            self.export_to(current_only=current_only, **choice)

    def export_to(self, out_dir: str, current_only: bool, peer: str | None = None, peer_freezing: bool = False) -> int:
        steps = [int(self.state.get("cursor", 0))] if current_only else "all"
        self.status(f"Exporting to {out_dir}…" + (" with torch.compile beside TVM (20–100 s)" if peer else ""))
        peer_args = {"peer": peer, "peer_freezing": bool(peer_freezing)} if peer else {}
        return self._ask("export", "export", out_dir=str(out_dir), steps=steps, **peer_args)

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
    def _on_state(self, state: State) -> None:
        prev = self.state
        self.state = state or empty_state()
        self._check_toast()
        self.capture_bar.set_state(self.state)
        model = self.state.get("model")
        err = self.state.get("import_error")
        if not model and err:
            spec = self.state.get("spec")
            if self._pending_open is not None and spec:
                self._pending_open = None
                self.chrome.add_recent(spec)
            name = err.get("model") or spec or ""
            self.setWindowTitle(f"irviz — {name} — import failed")
            self.step_label.setText(f"{name} · import failed at {err.get('node') or '?'}")
            self.hub.set_provenance(None)
            self._import_error_status()
            self.chrome.update_actions()
            return
        if not model:
            self.setWindowTitle("irviz")
            self.step_label.setText("")
            self.hub.set_provenance(None)
            self.chrome.update_actions()
            return
        spec = self.state.get("spec")
        if self._pending_open is not None and spec:
            self._pending_open = None
            self.chrome.add_recent(spec)
        cursor = int(self.state.get("cursor", 0))
        steps = self.state.get("steps") or []
        name = next((s.get("pass") for s in steps if s.get("index") == cursor), "")
        total = len(steps) - 1 + len(self.state.get("planned") or [])
        only = " (structure only)" if self.state.get("structure_only") else ""
        self.setWindowTitle(f"irviz — {model}{only} — step {cursor}: {name}")
        self.step_label.setText(f"{model}{only} · step {cursor}/{total} · {name}")
        if (cursor, spec) != (prev.get("cursor"), prev.get("spec")) or not prev.get("model"):
            self.hub.set_provenance(None)
            self._ask("provenance", "provenance", step=cursor)
        if not self.bridge.busy or self._schedule_error():
            self._resting_status()
        self.chrome.update_actions()

    def _schedule_error(self) -> ErrorDict | None:
        err = self.state.get("error")
        return err if err and str(err.get("message") or "").startswith("schedule()") else None

    def _resting_status(self) -> None:
        """The status line when nothing runs: the step, or, while the file's schedule stopped at a
        primitive (until the learner moves on), why."""
        err = self._schedule_error()
        if err:
            self.status(err["message"] + (f" — {err['hint']}" if err.get("hint") else ""), error=True)
        else:
            self.status(self._step_text())

    def _import_error_status(self) -> None:
        err = self.state.get("import_error")
        self.status(f"Import failed at FX node {err and err.get('node') or '?'} ({err and err.get('op') or '?'}). "
                    + IMPORT_ADVICE, error=True)

    def _step_text(self) -> str:
        cursor = int(self.state.get("cursor", 0))
        step = next((s for s in self.state.get("steps") or [] if s.get("index") == cursor), None)
        text = f"Step {cursor}: {step.get('pass', '') if step else ''}"
        if cursor > 0:
            text += (" — changed only attributes" if step and step.get("changed_what") == "attrs" else
                     " — changed the module" if step and step.get("changed") else " — changed nothing")
        return text

    def _on_replied(self, rid: int, cmd: str, result) -> None:
        purpose = self._own.pop(rid, None)
        if purpose is None:
            return
        if purpose in ("open", "reimport", "graph"):
            self.state = empty_state()
            self.hub.sessionReset.emit()  # before the bridge emits the new state
            if purpose == "open" and (result or {}).get("capture_fallback"):
                gb = result.get("graph_breaks")
                lead = (f"Nothing captures the whole model: each of the {gb['count']} graphs torch.compile "
                        "cut it into is a model of its own here (choose one in the toolbar).\n\n" if gb else "")
                self.notify(f"Captured with {result['capture_fallback']}",
                            lead + "\n".join(result.get("capture_notes") or []), kind="info")
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
            self.chrome.update_actions()
        elif purpose == "samples":
            self.samples = list(result or [])
            self.chrome.fill_samples()
        elif purpose == "provenance":
            if (result or {}) and self.state.get("model"):
                self.hub.set_provenance(result)
        elif purpose == "export":
            self.notify("Exported", exported_text(result or {}), kind="info")
            self.status(exported_text(result or {}))

    def _on_failed(self, rid: int, cmd: str, error: dict) -> None:
        purpose = self._own.pop(rid, None)
        error = error or {}
        stage = error.get("stage", "?")
        msg = error.get("message", "failed")
        hint = error.get("hint")
        if stage == "cancelled" or error.get("not_run"):  # not run: built, no failure (the Run pane says)
            self.status(msg)
            return
        if purpose == "open" and stage == "import":
            # the model was captured: its state (import_error, FX graph) follows, a new model
            self.state = empty_state()
            self.hub.sessionReset.emit()
        elif purpose == "open" and stage == "pipeline" and msg.startswith("schedule()"):
            # the file opened and its schedule stopped at a primitive: a new model all the same
            self.state = empty_state()
            self.hub.sessionReset.emit()
        elif purpose == "graph":
            self.capture_bar.revert()
        elif purpose == "open" and refused_pipeline(self._open_args, error):
            reopen_with_zero(self, self._open_args, error)
            return
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
            title = {"load": "Could not load the model", "capture": "Could not capture the model",
                     "import": "Import into Relax failed", "pipeline": "Pass failed",
                     "build": "Build failed", "run": "Run failed", "export": "Export failed",
                     "engine": "Engine problem"}.get(stage, f"{stage} failed")
            body = msg + (f"\n\nHint: {hint}" if hint else "")
            if cmd == "set_target":
                title = "Target not changed"
            if stage == "pipeline" and msg.startswith("schedule()"):
                title = "Your schedule failed"
            if stage == "import" and error.get("node"):
                title = f"Import into Relax failed at {error.get('node')} ({error.get('op') or '?'})"
                body = msg + "\n\n" + IMPORT_ADVICE
                self.status(f"Import failed at FX node {error.get('node')} ({error.get('op') or '?'}). "
                            + IMPORT_ADVICE, error=True)
            if self.state.get("model") and stage != "import" and title != "Your schedule failed":
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
        elif self.state.get("model") and (self.status_label.styleSheet() == "" or self._schedule_error()):
            self._resting_status()
        elif not self.state.get("model") and self.state.get("import_error") \
                and getattr(self, "_progress_status", False):
            self._import_error_status()   # replace the last progress text, not a newer message
        self.chrome.update_actions()

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
        # what the toast is about: the state once this turn's replies are in (a failure's own
        # state, a new model's first one, follows the reply in the same turn)
        self._toast_stamp = None
        QTimer.singleShot(0, self, self._stamp_toast)

    def _stamp_toast(self) -> None:
        self._toast_stamp = (ResultStamp.of(self.state), self.state.get("cursor"))

    def _check_toast(self) -> None:
        """Grey the toast once another model, step, pipeline or target is open."""
        if self._toast_stamp is None or not self.toast.isVisible():
            return
        stamp, cursor = self._toast_stamp
        reason = stamp.stale_reason(self.state)
        if reason is None and self.state.get("cursor") != cursor:
            reason = f"it came at step {cursor}; the cursor is at step {self.state.get('cursor')} now"
        if reason != self.toast.stale_reason:
            self.toast.mark_stale(reason)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if self.toast.isVisible():
            self.toast.reposition()

    def _has_model(self) -> bool:
        return bool(self.state.get("model"))

    # -- drag and drop -----------------------------------------------------------------------------
    def dragEnterEvent(self, event) -> None:
        if event.mimeData().hasUrls() and any(u.isLocalFile() for u in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:
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
