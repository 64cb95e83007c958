"""TensorIR pane: the prim_funcs of the current step (signature, loop-nest summary); the selected
one's TVMScript below, and in the Code tab what it becomes.  A loop row selects the loop in the
text and in the code; a click in the code selects the loop it is in."""
from __future__ import annotations

import re

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QSplitter, QTabWidget, QTreeWidget, QTreeWidgetItem, QVBoxLayout

from irviz.protocol.commands import State
from irviz.ui import themes
from irviz.ui.panes.base import Pane, SearchBox, dim_label
from irviz.ui.panes.kernel_code_tab import KernelCodeTab
from irviz.ui.result_stamp import step_identity
from irviz.ui.widgets.code_view import CodeView


def loop_summary(func: dict, most: int = 3) -> str:
    """One "extent×extent×…" per top-level loop nest, e.g. "1×3×10×10; 1×8×8×8×3×3×3"; a loop
    that is not serial is marked ("8 parallel")."""
    nest = func.get("loop_nest")
    if not nest:
        return f"{len(func.get('loops') or [])} loops" if func.get("loops") else "no loops"
    nests: list[list[str]] = []
    for lp in nest:
        if lp.get("depth", 0) == 0 or not nests:
            nests.append([])
        ext = str(lp.get("extent", "?"))
        kind = lp.get("kind") or "serial"
        nests[-1].append(ext if kind == "serial" else f"{ext} {kind}")
    text = "; ".join("×".join(n) for n in nests[:most])
    return text + (f"; … ({len(nests)} nests)" if len(nests) > most else "")


LOOP_ROLE = Qt.ItemDataRole.UserRole + 1  # a loop row's index in its function's loop_nest


class TirPane(Pane):
    def __init__(self, bridge, hub, parent=None, settings=None):
        super().__init__(bridge, hub, parent, settings=settings)
        self.functions: list[dict] | None = None
        self.selected: str | None = None
        self.text: str | None = None
        self._linked: list[str] = []
        self._shown = None

        self.search = SearchBox("Search function, loop, block…")
        self.search.textChanged.connect(self._filter)
        self.info = dim_label("No model open")
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["Function", "Loops", "Signature"])
        self.tree.setRootIsDecorated(True)
        self.tree.setUniformRowHeights(True)
        self.tree.setAlternatingRowColors(True)
        self.tree.currentItemChanged.connect(self._item_changed)
        self.code = CodeView()
        self.kernel_code = KernelCodeTab(self)  # what the selected kernel becomes on a target
        self.kernel_code.loopClicked.connect(self._code_loop_clicked)
        self.loop: int | None = None  # the selected loop of the selected kernel (loop_nest index)
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.tabs.addTab(self.code, "TensorIR")
        self.tabs.addTab(self.kernel_code, "Code")
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.tree)
        split.addWidget(self.tabs)
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 3)
        split.setSizes([260, 500])
        self.split = split

        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.setSpacing(3)
        lay.addWidget(self.search)
        lay.addWidget(self.info)
        lay.addWidget(split, 1)

        hub.linked.connect(self._on_linked)
        hub.cleared.connect(lambda: self._on_linked(None))
        self.ask("targets", "list_targets")  # the Code tab's targets

    def on_state(self, state: State, prev: State | None) -> None:
        self.kernel_code.on_state(state)
        cursor = self.cursor_of(state)
        if cursor is None:
            self.clear()
            return
        # the same index under another target or pipeline is another step, with other kernels
        key = (cursor, self.model_key(state), step_identity(state, cursor))
        if key == self._shown:
            return
        self._shown = key
        self.functions = None
        self.ask("list", "tir_functions", step=cursor)

    def on_reset(self) -> None:
        super().on_reset()
        self.kernel_code.forget()  # the same file opened again may hold other code

    def clear(self) -> None:
        self._shown = None
        self.functions = None
        self.text = None
        self.tree.clear()
        self.code.set_text("")
        self.kernel_code.forget()
        self.say_no_model()

    def on_reply(self, purpose: str, result) -> None:
        if purpose == "list":
            self.functions = list(result or [])
            self._fill()
        elif purpose == "text":
            self.text = (result or {}).get("text", "")
            self.code.set_text(self.text)
            self._mark_loop_text()
        elif purpose == "code":
            self.kernel_code.on_reply(result)
        elif purpose == "targets":
            self.kernel_code.fill_targets(list(result or []))

    def on_error(self, purpose: str, error: dict) -> None:
        if purpose == "code":
            self.kernel_code.on_error(error)
        elif purpose == "targets":
            return  # the box keeps "host"; any target can still be typed in
        elif purpose == "list":
            self.functions = []
            self.info.setText(f"TensorIR unavailable: {error.get('message', '')}")
        else:
            self.text = ""
            self.code.set_text(f"# {error.get('message', 'failed')}")

    def is_filled(self) -> bool:
        if self.functions is None:
            return False
        return not self.functions or self.text is not None

    def _fill(self) -> None:
        keep = self.selected
        self.tree.blockSignals(True)
        self.tree.clear()
        c = themes.colors()
        for f in self.functions or []:
            loops = f.get("loops") or []
            sizes = list(f.get("sizes") or [])
            shown = f.get("name", "") + (f"  ({', '.join(sizes)})" if sizes else "")
            item = QTreeWidgetItem([shown, loop_summary(f), f.get("signature", "")])
            item.setData(0, Qt.ItemDataRole.UserRole, f.get("name"))
            item.setToolTip(0, f.get("name", "") + (f"\nsymbolic sizes: {', '.join(sizes)}" if sizes else ""))
            item.setToolTip(2, f.get("signature", ""))
            for k, loop in enumerate(loops):
                child = QTreeWidgetItem(["loop", str(loop), ""])
                child.setData(0, LOOP_ROLE, k)
                child.setToolTip(1, "Click: the loop in the TensorIR text and in the Code tab")
                child.setForeground(0, QBrush(QColor(c.dim_text)))
                item.addChild(child)
            for block in f.get("blocks") or []:
                child = QTreeWidgetItem(["block", str(block), ""])
                child.setForeground(0, QBrush(QColor(c.dim_text)))
                item.addChild(child)
            self.tree.addTopLevelItem(item)
        self.tree.blockSignals(False)
        self.tree.resizeColumnToContents(0)
        self.tree.setColumnWidth(0, min(self.tree.columnWidth(0), 220))
        self.tree.setColumnWidth(1, 160)
        n = len(self.functions or [])
        self.info.setText(f"{n} prim_func{'s' if n != 1 else ''} at step {self.cursor_of(self.state)}")
        names = [f.get("name") for f in self.functions or []]
        target = next((x for x in self._linked if x in names), None) or (keep if keep in names else None) \
            or (names[0] if names else None)
        self.text = None if target else ""
        if target:
            self._select(target, emit=False)
        else:
            self.code.set_text("")
            self.kernel_code.show_kernel(self.cursor_of(self.state), None)
        self._paint_linked()
        self._filter(self.search.text())

    def _top_items(self) -> list[QTreeWidgetItem]:
        # topLevelItem(i) is None only past the end
        return [it for i in range(self.tree.topLevelItemCount()) if (it := self.tree.topLevelItem(i)) is not None]

    def _item_for(self, name: str):
        for item in self._top_items():
            if item.data(0, Qt.ItemDataRole.UserRole) == name:
                return item
        return None

    def _select(self, name: str, emit: bool) -> None:
        item = self._item_for(name)
        if item is None:
            return
        self.tree.blockSignals(True)
        self.tree.setCurrentItem(item)
        self.tree.blockSignals(False)
        self.tree.scrollToItem(item)
        self._show(name)
        if emit:
            self.hub.select_tir(name)

    def _show(self, name: str) -> None:
        if name != self.selected:
            self.loop = None
        if name == self.selected and (self.text or self.waiting("text")):
            return
        self.selected = name
        self.text = None
        self.ask("text", "function_text", step=self.cursor_of(self.state), name=name)
        self.kernel_code.show_kernel(self.cursor_of(self.state), name, self.nest_of(name))

    def nest_of(self, name: str) -> list[dict]:
        f = next((f for f in self.functions or [] if f.get("name") == name), None) or {}
        return list(f.get("loop_nest") or [])

    def _item_changed(self, item, _prev) -> None:
        if item is None:
            return
        loop = item.data(0, LOOP_ROLE) if item.parent() is not None else None
        while item.parent() is not None:
            item = item.parent()
        name = item.data(0, Qt.ItemDataRole.UserRole)
        if name:
            self._show(name)
            self.hub.select_tir(name)
            if loop is not None:
                self.select_loop(int(loop))

    def select_loop(self, index: int) -> None:
        """Loop `index` of the selected kernel: marked in its TensorIR text and its code."""
        self.loop = index
        self._mark_loop_text()
        self.kernel_code.show_loop(index)

    def _code_loop_clicked(self, index: int) -> None:
        """A click in the Code tab landed in loop `index`: select it in the tree and the text."""
        self.loop = index
        parent = self._item_for(self.selected) if self.selected else None
        if parent is not None and 0 <= index < parent.childCount():
            self.tree.blockSignals(True)
            self.tree.setCurrentItem(parent.child(index))
            self.tree.blockSignals(False)
            self.tree.scrollToItem(parent.child(index))
        self._mark_loop_text()

    def _mark_loop_text(self) -> None:
        nest = self.nest_of(self.selected) if self.selected else []
        if self.loop is None or not self.text or not 0 <= self.loop < len(nest):
            return
        var = str(nest[self.loop].get("var") or "")
        k = sum(1 for lp in nest[:self.loop] if str(lp.get("var") or "") == var)
        hits = [n for n, ln in enumerate(self.text.split("\n"), 1)
                if re.match(rf"\s*for (?:\w+, )*{re.escape(var)}\b", ln)]
        if k < len(hits):
            self.code.highlight_lines([hits[k]])

    def _on_linked(self, sel) -> None:
        self._linked = [] if sel is None else list(sel.tir)
        self._paint_linked()
        if sel is not None and self._linked and (sel.source != "tir" or sel.key != self.selected):
            self._select(self._linked[0], emit=False)

    def _paint_linked(self) -> None:
        c = themes.colors()
        linked = set(self._linked)
        for item in self._top_items():
            on = item.data(0, Qt.ItemDataRole.UserRole) in linked
            for col in range(3):
                item.setBackground(col, QBrush(QColor(c.highlight_line)) if on else QBrush())

    def restyle(self) -> None:
        """The linked rows carry the old theme's highlight."""
        self.code.restyle()
        self.kernel_code.code.restyle()
        self._paint_linked()

    def linked_ids(self) -> list[str]:
        return list(self._linked)

    def _filter(self, text: str) -> None:
        text = text.strip().lower()
        for item in self._top_items():
            hay = " ".join(item.text(c) for c in range(3)).lower()
            hay += " " + " ".join(child.text(1).lower() for j in range(item.childCount())
                                  if (child := item.child(j)) is not None)
            item.setHidden(bool(text) and text not in hay)
