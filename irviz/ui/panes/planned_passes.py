"""The Pipeline pane's planning job: the passes planned after the cursor, a named pipeline chosen
or one composed (add, remove, reorder, edit params, load a user pass file), and the whole pipeline
copied and pasted as text."""
from __future__ import annotations

import os

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QGuiApplication
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QFileDialog, QHBoxLayout, QLabel,
                               QListWidget, QListWidgetItem, QMenu, QToolButton, QVBoxLayout, QWidget)

from irviz.protocol.commands import Invocation
from irviz.ui import themes
from irviz.ui.panes.pass_params import PassParamsBox, params_text
from irviz.ui.panes.pipeline_link import PaneLink
from irviz.ui.panes.target_box import TargetBox
from irviz.ui.widgets.tool_button import tool_button

CUSTOM = "(custom)"


class PlannedPasses(QWidget):
    """The lower half of the Pipeline pane; the pane hands it the pass and pipeline catalogues
    (set_passes, set_pipelines) and has it show each new state (show_plan)."""

    def __init__(self, link: PaneLink, target_box: TargetBox, parent=None):
        super().__init__(parent)
        self._link = link
        self.passes: list[dict] = []
        self.pipelines: list[dict] = []
        self.pipeline_box = QComboBox()
        self.pipeline_box.setToolTip("Named pipeline: replaces the passes planned after the cursor")
        self.pipeline_box.activated.connect(self._pipeline_chosen)
        self.planned_list = QListWidget()
        self.planned_list.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.planned_list.currentRowChanged.connect(self._show_params)
        self.add_button = tool_button("Add ▾")
        self.add_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.add_menu = QMenu(self)
        self.add_button.setMenu(self.add_menu)
        self.remove_button = tool_button("Remove")
        self.remove_button.clicked.connect(self.remove_selected)
        self.up_button = tool_button("↑")
        self.up_button.setToolTip("Move up")
        self.up_button.clicked.connect(lambda: self.move_selected(-1))
        self.down_button = tool_button("↓")
        self.down_button.setToolTip("Move down")
        self.down_button.clicked.connect(lambda: self.move_selected(1))
        self.load_button = tool_button("Load passes…")
        self.load_button.setToolTip("Load passes from a Python file: module_pass / function_pass classes, "
                                    "Sequentials, @irviz_pass, IRVIZ_PASSES; a built-in's name becomes "
                                    "the file's, the built-in is then builtin:NAME")
        self.load_button.clicked.connect(self.load_pass_file_dialog)
        edit_bar = QHBoxLayout()
        edit_bar.setContentsMargins(0, 0, 0, 0)
        for b in (self.add_button, self.remove_button, self.up_button, self.down_button):
            edit_bar.addWidget(b)
        edit_bar.addStretch(1)
        edit_bar.addWidget(self.load_button)
        # the engine writes and parses the text: this process has no pass registry
        self.copy_text_button = tool_button("Copy pipeline as text")
        self.copy_text_button.setToolTip("Copy the applied and planned passes as one line, e.g. "
                                         "LegalizeOps,LibraryDispatch(min_macs=0),FuseOps "
                                         "(irviz check --pipeline takes it)")
        self.copy_text_button.clicked.connect(self.copy_pipeline_text)
        self.paste_text_button = tool_button("Paste pipeline")
        self.paste_text_button.setToolTip("Replace the whole pipeline with the text on the clipboard; "
                                          "steps that match its start are kept")
        self.paste_text_button.clicked.connect(self.paste_pipeline_text)
        text_bar = QHBoxLayout()
        text_bar.setContentsMargins(0, 0, 0, 0)
        text_bar.addWidget(self.copy_text_button)
        text_bar.addWidget(self.paste_text_button)
        text_bar.addStretch(1)
        self.params_box = PassParamsBox(on_invalid=lambda text: link.info.setText(text))
        self.params_form = self.params_box.form

        pl = QVBoxLayout(self)
        pl.setContentsMargins(0, 0, 0, 0)
        pl.setSpacing(3)
        head = QHBoxLayout()
        head.addWidget(QLabel("Planned"))
        head.addWidget(self.pipeline_box, 1)
        head.addWidget(QLabel("Target"))
        head.addWidget(target_box, 1)
        pl.addLayout(head)
        # a named pipeline chosen past the import runs after the steps already applied: the box
        # naming it alone would pass it off as the whole pipeline
        self.plan_note = QLabel("")
        self.plan_note.setWordWrap(True)
        self.plan_note.setObjectName("planNote")
        self.plan_note.hide()
        self.chosen: dict | None = None  # {"name", "step", "kept"}: the named pipeline chosen
        pl.addWidget(self.plan_note)
        pl.addWidget(self.planned_list, 1)
        pl.addLayout(edit_bar)
        pl.addLayout(text_bar)
        pl.addWidget(self.params_box)

    def set_passes(self, passes: list[dict]) -> None:
        self.passes = passes
        self._fill_add_menu()

    def set_pipelines(self, pipelines: list[dict]) -> None:
        self.pipelines = pipelines
        self._fill_pipelines()

    def show_plan(self) -> None:
        """The planned passes and the named pipeline they are, of the pane's steps and plan."""
        self.fill_planned()
        self._match_pipeline()

    def update_buttons(self, has_model: bool) -> None:
        state = self._link.state()
        self.copy_text_button.setEnabled(has_model and bool(state and state.get("pipeline_text")))
        self.paste_text_button.setEnabled(has_model)

    def _fill_add_menu(self) -> None:
        self.add_menu.clear()
        by_cat: dict[str, list[dict]] = {}
        for p in self.passes:
            by_cat.setdefault(p.get("category") or "other", []).append(p)
        for cat, items in by_cat.items():
            sub = self.add_menu.addMenu(cat)
            sub.setToolTipsVisible(True)
            for p in items:
                where = os.path.basename(p.get("source") or "")
                act = QAction(p["name"] + (f"  ({where})" if where else ""), sub)
                act.setToolTip(f"{self.origin(p['name'])}: {p.get('description', '')}")
                act.triggered.connect(lambda _c=False, name=p["name"]: self.add_pass(name))
                sub.addAction(act)

    def origin(self, name: str) -> str:
        """Whose pass `name` is: "user: file.py:LINE" or "built-in (course)"."""
        spec = self._spec(name) or {}
        if spec.get("category") == "user":
            return f"user: {spec.get('source') or 'a pass file'}"
        return f"built-in ({spec['category']})" if spec.get("category") else "built-in"

    def loaded_text(self) -> str:
        """What the last Load passes… added (the newest source file's passes)."""
        users = [p for p in self.passes if p.get("category") == "user"]
        if not users:
            return f"{len(self.passes)} passes available"
        newest = (users[-1].get("source") or "").rsplit(":", 1)[0]
        mine = [p for p in users if (p.get("source") or "").rsplit(":", 1)[0] == newest]
        shadows = [p["shadows"] for p in mine if p.get("shadows")]
        return (f"Loaded {', '.join(p['name'] for p in mine)} from {os.path.basename(newest)}"
                + (f"; the built-in{'s are' if len(shadows) > 1 else ' is'} now {', '.join(shadows)}"
                   if shadows else ""))

    def _fill_pipelines(self) -> None:
        self.pipeline_box.blockSignals(True)
        self.pipeline_box.clear()
        for p in self.pipelines:
            self.pipeline_box.addItem(p["name"], p["name"])
            self.pipeline_box.setItemData(self.pipeline_box.count() - 1, p.get("description", ""),
                                          Qt.ItemDataRole.ToolTipRole)
        self.pipeline_box.addItem(CUSTOM, None)
        self.pipeline_box.blockSignals(False)
        self._match_pipeline()

    def _pass_names(self) -> list[str]:
        """The pipeline's pass names, applied then planned (a schedule()'s primitives are no pass)."""
        return [s.get("pass", "") for s in self._link.steps()[1:] if s.get("origin") != "schedule"] + \
            [p.get("name", "") for p in self._link.planned()]

    def _match_pipeline(self) -> None:
        """Show the named pipeline whose passes are exactly applied + planned; else the one chosen
        after a step, while the pipeline is still those steps and it (the note says so); else
        (custom)."""
        names = self._pass_names()
        for i, p in enumerate(self.pipelines):
            if [x["name"] for x in p.get("passes", [])] == names:
                self.pipeline_box.setCurrentIndex(i)
                self._say_chosen(None)
                return
        chosen = self.chosen
        at = self.pipeline_box.findData(chosen["name"]) if chosen else -1
        spec = next((p for p in self.pipelines if chosen and p["name"] == chosen["name"]), None)
        if at >= 0 and chosen is not None and spec is not None and \
                names == chosen["kept"] + [x["name"] for x in spec.get("passes", [])]:
            self.pipeline_box.setCurrentIndex(at)
            self._say_chosen(chosen)
            return
        self.chosen = None
        self._say_chosen(None)
        self.pipeline_box.setCurrentIndex(self.pipeline_box.count() - 1)

    def _say_chosen(self, chosen: dict | None) -> None:
        if chosen is None:
            self.plan_note.clear()
            self.plan_note.hide()
            self.pipeline_box.setToolTip("Named pipeline: replaces the passes planned after the cursor")
            return
        n = chosen["step"]
        text = (f"{chosen['name']} planned after step {n} (steps 1–{n} stay; choose it at step 0 "
                f"to run it from the import)")
        self.plan_note.setText("⚠ " + text)
        self.plan_note.setStyleSheet(f"color: {themes.colors().warn};")
        self.plan_note.show()
        self.pipeline_box.setToolTip(text)

    def fill_planned(self) -> None:
        row = self.planned_list.currentRow()
        self.planned_list.blockSignals(True)
        self.planned_list.clear()
        for p in self._link.planned():
            text = p.get("name", "")
            if p.get("params"):
                text += f"  ({params_text(p['params'])})"
            item = QListWidgetItem(text)
            item.setToolTip(self.origin(p.get("name", "")))
            self.planned_list.addItem(item)
        self.planned_list.blockSignals(False)
        if 0 <= row < self.planned_list.count():
            self.planned_list.setCurrentRow(row)
        else:
            self._show_params(-1)

    def use_pipeline(self, name: str) -> None:
        self._link.request("set_pipeline", pipeline=name)

    def set_planned(self, passes: list[Invocation]) -> None:
        self._link.request("set_pipeline", passes=[{"name": p["name"], "params": dict(p.get("params") or {})}
                                                   for p in passes])

    def _pipeline_chosen(self, index: int) -> None:
        name = self.pipeline_box.itemData(index)
        if name:
            # the engine keeps the steps up to the cursor and plans the pipeline after them
            step = self._link.cursor() or 0
            kept = [s.get("pass") for s in self._link.steps()[1:step + 1] if s.get("origin") != "schedule"]
            self.chosen = {"name": name, "step": step, "kept": kept} if step else None
            self.use_pipeline(name)

    def add_pass(self, name: str) -> None:
        spec = self._spec(name)
        params = {p["name"]: p.get("default") for p in (spec or {}).get("params") or []}
        at = self.planned_list.currentRow()
        planned = list(self._link.planned())
        item: Invocation = {"name": name, "params": params}
        if 0 <= at < len(planned):
            planned.insert(at + 1, item)
        else:
            planned.append(item)
        self.set_planned(planned)

    def remove_selected(self) -> None:
        at = self.planned_list.currentRow()
        if 0 <= at < len(self._link.planned()):
            planned = list(self._link.planned())
            del planned[at]
            self.set_planned(planned)

    def move_selected(self, delta: int) -> None:
        at = self.planned_list.currentRow()
        to = at + delta
        n = len(self._link.planned())
        if 0 <= at < n and 0 <= to < n:
            planned = list(self._link.planned())
            planned[at], planned[to] = planned[to], planned[at]
            self.set_planned(planned)
            self.planned_list.setCurrentRow(to)

    def copy_pipeline_text(self) -> str:
        state = self._link.state()
        text = (state.get("pipeline_text") if state else None) or ""
        if text:
            QGuiApplication.clipboard().setText(text)
            self._link.info.setText(f"Copied: {text}")
        return text

    def paste_pipeline_text(self, text: str | None = None) -> int | None:
        """Send the clipboard's text (or `text`) as the whole pipeline; the engine parses it and a
        bad text comes back as an error with its column, the pipeline unchanged."""
        if text is None:
            text = QGuiApplication.clipboard().text()
        text = (text or "").strip()
        if not text:
            self._link.info.setText("Paste pipeline: the clipboard holds no text")
            return None
        return self._link.ask("paste", "set_pipeline", text=text)

    def load_pass_file_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Load passes", "", "Python files (*.py)")
        if path:
            self.load_pass_file(path)

    def load_pass_file(self, path: str) -> None:
        self._link.ask("load", "load_pass_file", path=path)

    # -- params form -----------------------------------------------------------------------------
    def _spec(self, name: str) -> dict | None:
        return next((p for p in self.passes if p.get("name") == name), None)

    def _show_params(self, row: int) -> None:
        planned = self._link.planned()
        if not (0 <= row < len(planned)):
            self.params_box.show_pass(None, {}, lambda name, value: None)
            return
        inv = planned[row]
        self.params_box.show_pass(inv, self._spec(inv.get("name", "")) or {},
                                  lambda name, value: self._set_param(row, name, value))

    def _set_param(self, row: int, name: str, value) -> None:
        planned = [p.copy() for p in self._link.planned()]
        if not (0 <= row < len(planned)):
            return
        if (planned[row].get("params") or {}).get(name) == value:
            return
        planned[row]["params"] = dict(planned[row].get("params") or {}, **{name: value})
        self.set_planned(planned)
