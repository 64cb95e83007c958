"""FX pane: the captured torch.fx graph, as a graph (grouped by nn.Module path, foldable) or as a
table like ``Graph.print_tabular()`` (name, op, target, args, shape, module)."""
from __future__ import annotations

import re

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QTabWidget, QVBoxLayout

from irviz.protocol.commands import ImportErrorFields, State
from irviz.ui import themes
from irviz.ui.panes.base import Pane, SearchBox, dim_label, shape_text
from irviz.ui.widgets.graph_view import GraphView
from irviz.ui.widgets.heat_scale import ERROR
from irviz.ui.widgets.node_table import NodeTable

COLUMNS = ("name", "op", "target", "args", "shape", "module")
_SYMBOL = re.compile(r"\b[su]\d+\b")   # torch.export's symbolic dims: s0, s77, u3


def rename_dims(obj, names: dict):
    """Strings (in lists/dicts) with torch's dim symbols replaced by the model file's Dim names."""
    if not names:
        return obj
    if isinstance(obj, str):
        return _SYMBOL.sub(lambda m: names.get(m.group(0), m.group(0)), obj)
    if isinstance(obj, list):
        return [rename_dims(v, names) for v in obj]
    if isinstance(obj, tuple):
        return tuple(rename_dims(v, names) for v in obj)
    return obj


def relabel_graph(graph: dict) -> dict:
    """Shapes in labels, sublabels, shapes and edge labels shown with ``graph["dim_names"]``."""
    names = graph.get("dim_names") or {}
    if not names:
        return graph
    for n in graph.get("nodes", ()):
        for key in ("sublabel", "shapes", "shape", "arg_repr"):
            if key in n:
                n[key] = rename_dims(n[key], names)
    for e in graph.get("edges", ()):
        for key in ("label", "shape"):
            if key in e:
                e[key] = rename_dims(e[key], names)
    return graph


def fx_row(node: dict) -> list[str]:
    module = node.get("module_path") or ""
    if node.get("module_type"):
        module = f"{module} ({node['module_type']})" if module else node["module_type"]
    args = node.get("arg_repr")
    if args is None:
        args = ", ".join(node.get("args") or [])
    return [str(node.get("name") or node.get("id")), str(node.get("op") or node.get("kind") or ""),
            str(node.get("target") or ""), str(args), shape_text(node.get("shapes") or node.get("shape")),
            module]


class FxPane(Pane):
    def __init__(self, bridge, hub, parent=None, settings=None):
        super().__init__(bridge, hub, parent, settings=settings)
        self.graph_dict: dict | None = None
        self._loaded_key = None
        self._linked: list[str] = []
        self._group_of: dict[str, str] = {}  # member -> folded group node id
        self.show_bookkeeping = False

        self.search = SearchBox()
        self.search.returnPressed.connect(self._search)
        self.search.textChanged.connect(self._filter_table)
        self.info = dim_label("No model open")
        self.error_label = QLabel()   # a failed import: what failed, and what to do about it
        self.error_label.setObjectName("FxImportError")
        self.error_label.setWordWrap(True)
        self.error_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error_label.hide()
        self.failed_node: str | None = None

        self.graph = GraphView()
        self.graph.nodeSelected.connect(self._node_clicked)
        self.graph.foldToggled.connect(self.toggle_fold)
        self.graph.unfoldAll.connect(self.unfold_all)
        self.graph.foldable = True
        self.table_nodes: list[dict] | None = None
        self.table = NodeTable([c.capitalize() for c in COLUMNS])
        self.table.itemSelectionChanged.connect(self._row_clicked)

        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.tabs.addTab(self.graph, "Graph")
        self.tabs.addTab(self.table, "Table")

        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.search, 1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.setSpacing(3)
        lay.addLayout(top)
        lay.addWidget(self.info)
        lay.addWidget(self.error_label)
        lay.addWidget(self.tabs, 1)

        hub.linked.connect(self._on_linked)
        hub.cleared.connect(lambda: self._on_linked(None))
        self._error_heat: dict = {}
        hub.errorHeatChanged.connect(self._on_error_heat)

    # -- data ------------------------------------------------------------------------------------
    def fx_key(self, state: State | None):
        """What the graph shows: the session's model, or a captured model whose import failed."""
        err = state.get("import_error") if state else None
        if state and err and state.get("spec"):
            return ("import_error", state.get("spec"), state.get("importer"), err.get("node"),
                    err.get("message"))
        return self.model_key(state)

    def show_import_error(self, err: ImportErrorFields | None) -> None:
        if not err:
            self.error_label.hide()
            self.error_label.setText("")
            return
        c = themes.colors()
        text = (f"<b>Import into Relax failed</b> (node in red below): {_esc(err.get('message') or '')}"
                "<br><i>Fix: File ▸ Load converters… (CONVERTERS = {'aten.op.overload': fn}, e.g. "
                "irviz/samples/example_converter.py), then File ▸ Re-import.</i>")
        self.error_label.setText(text)
        self.error_label.setToolTip(err.get("hint") or "")
        self.error_label.setStyleSheet(f"color: {c.bad}; border: 1px solid {c.bad}; "
                                       "border-radius: 4px; padding: 4px;")
        self.error_label.show()

    def on_state(self, state: State, prev: State | None) -> None:
        self.show_import_error(state.get("import_error"))
        if state.get("model") and state.get("importer") == "tvmscript":
            self._show_no_fx(state)
            return
        key = self.fx_key(state)
        if key is None:
            if self._loaded_key is not None:
                self.clear()
            return
        if key != self._loaded_key:
            self._loaded_key = key
            self.graph_dict = None
            self.table_nodes = None
            err = state.get("import_error")
            name = state.get("model") or (err.get("model") if err else None)
            self.info.setText(f"Loading FX graph of {name}…")
            self.ask("graph", "fx_graph", bookkeeping=self.show_bookkeeping)

    def _show_no_fx(self, state: State) -> None:
        """An IR file (or an exported step) was opened as Relax IR: nothing was captured from
        PyTorch, so there is no FX graph to ask the engine for."""
        c = themes.colors()
        self.error_label.setText(f"<b>No FX graph</b>: {_esc(state.get('model') or '')} is an IR file, "
                                 "opened as Relax IR (an IRModule), not captured from a PyTorch model. "
                                 "Its functions are in the Relax and TensorIR panes.")
        self.error_label.setToolTip("")
        self.error_label.setStyleSheet(f"color: {c.dim_text}; border: 1px solid {c.dim_text}; "
                                       "border-radius: 4px; padding: 4px;")
        self.error_label.show()
        key = ("ir", self.model_key(state))
        if key == self._loaded_key:
            return
        self._loaded_key = key
        self.graph_dict = {"nodes": [], "edges": []}
        self.table_nodes = []
        self.failed_node = None
        self.graph.clear()
        self.table.setRowCount(0)
        self.info.setText("No FX graph for an IR file")

    def clear(self) -> None:
        self._loaded_key = None
        self.graph_dict = None
        self.failed_node = None
        self.graph.clear()
        self.table.setRowCount(0)
        self.info.setText("No model open")
        self.show_import_error(None)

    def on_reply(self, purpose: str, result) -> None:
        if purpose == "table":
            result = relabel_graph(result or {})
            self.table_nodes = [n for n in result.get("nodes", []) if n.get("kind") != "group"]
            self._fill_table(self.table_nodes)
            self._apply_linked()
            return
        if purpose not in ("graph", "refold"):
            return
        keep = purpose == "refold"
        self.graph_dict = relabel_graph(result or {"nodes": [], "edges": []})
        self.graph.set_graph(self.graph_dict, keep_view=keep)
        self.failed_node = self.graph_dict.get("failed_node")
        self.graph.highlight([self.failed_node] if self.failed_node else [], "failed")
        all_nodes = self.graph_dict.get("nodes", [])
        folded = [n for n in all_nodes if n.get("kind") == "group"]
        self._group_of = {m: n["id"] for n in folded for m in n.get("members") or []}
        self._apply_error_heat()
        nodes = [n for n in all_nodes if n.get("kind") != "group"]
        hidden = self.graph_dict.get("hidden_bookkeeping") or []
        if not folded and not hidden:
            self.table_nodes = nodes
            self._fill_table(nodes)
        elif self.table_nodes is None:   # the table lists every node
            self.ask("table", "fx_graph", fold_depth=None, bookkeeping=True)
        total = self.graph_dict.get("total_nodes") or len(nodes)
        groups = len(self.graph_dict.get("groups") or [])
        text = f"{total} nodes · {groups} module groups"
        if folded:
            text += f" · {len(folded)} folded (double-click a folded box, or a group title, to toggle)"
        if hidden:
            text += f" · {len(hidden)} bookkeeping nodes hidden (View ▸ Show bookkeeping nodes)"
        if self.failed_node:
            text += f" · import failed at {self.failed_node} (red)"
        self.info.setText(text)
        self._apply_linked()
        if self.failed_node and not keep:
            self.graph.select(self.failed_node, center=True, emit=False)

    def folded_paths(self) -> list[str]:
        return sorted(n["id"][len("group:"):] for n in (self.graph_dict or {}).get("nodes", [])
                      if n.get("kind") == "group")

    def toggle_fold(self, group_id: str) -> None:
        """Fold a module group (a frame's title was clicked) or unfold a folded box."""
        path = group_id[len("group:"):] if group_id.startswith("group:") else group_id
        folded = set(self.folded_paths())
        if path in folded:
            folded.discard(path)
        else:
            folded = {f for f in folded if not f.startswith(path + ".")} | {path}
        self.ask("refold", "fx_graph", fold_depth=None, folded=sorted(folded),
                 bookkeeping=self.show_bookkeeping)

    def unfold_all(self) -> None:
        self.ask("refold", "fx_graph", fold_depth=None, folded=[], bookkeeping=self.show_bookkeeping)

    def restore_settings(self, settings) -> None:
        self.tabs.setCurrentIndex(1 if settings.value("fx/tab", "graph") == "table" else 0)

    def save_settings(self, settings) -> None:
        settings.setValue("fx/tab", "table" if self.tabs.currentIndex() == 1 else "graph")

    def restyle(self) -> None:
        self.graph.set_dark(themes.colors().name == "dark")

    def set_show_bookkeeping(self, on: bool) -> None:
        """Lay the graph out again with (or without) asserts and copies of lifted constants,
        keeping what is folded."""
        if on == self.show_bookkeeping:
            return
        self.show_bookkeeping = on
        if self.graph_dict is None or self._loaded_key is None:
            return
        folded = self.folded_paths()
        args = {"fold_depth": None, "folded": folded} if folded else {}
        self.ask("graph", "fx_graph", bookkeeping=on, **args)

    def on_error(self, purpose: str, error: dict) -> None:
        # e.g. an opened TVMScript step has no FX graph: the pane is done, with nothing to draw
        if purpose in ("graph", "refold") and self.graph_dict is None:
            self.graph_dict = {"nodes": [], "edges": []}
            self.graph.clear()
        self.info.setText(f"FX graph unavailable: {error.get('message', '')}")

    def is_filled(self) -> bool:
        return self.graph_dict is not None

    def _fill_table(self, nodes: list[dict]) -> None:
        c = themes.colors()
        self.table.set_colors(c.dim_text, c.bad)
        rows = [fx_row(n) for n in nodes]
        self.table.set_rows(rows, [str(n.get("id")) for n in nodes],
                            [(n.get("error") if n.get("failed") else n.get("source")) or None
                             for n in nodes],
                            [bool(n.get("failed")) for n in nodes],
                            widest=(180, 100, 200, 220, 140, 260))
        self._filter_table(self.search.text())

    # -- selection -------------------------------------------------------------------------------
    def _node_clicked(self, node_id: str) -> None:
        if self.hub.selection is not None and self.hub.selection.source == "fx" \
                and self._group_of.get(self.hub.selection.key) == node_id:
            return  # the folded box that stands for the selected node
        if node_id and not node_id.startswith("group:"):
            self.hub.select_fx(node_id)

    def _row_clicked(self) -> None:
        node_id = self.table.selected_id()
        if node_id:
            if self.hub.selection is None or self.hub.selection.key != node_id:
                self.hub.select_fx(node_id)

    def _on_linked(self, sel) -> None:
        self._linked = [] if sel is None else list(sel.fx)
        self._apply_linked(center=sel is not None and sel.source != "fx")
        if sel is not None and sel.source == "fx" and self.graph_dict is not None:
            shown = self._group_of.get(sel.key, sel.key)
            if self.graph.selected() != shown:  # selected elsewhere (table, API): show it here too
                self.graph.blockSignals(True)
                self.graph.select(shown, center=True)
                self.graph.blockSignals(False)

    def _on_error_heat(self, d: dict) -> None:
        """Intermediates' error per FX node (a folded module shows its worst node)."""
        self._error_heat = dict(d.get("fx") or {})
        self._apply_error_heat()

    def _apply_error_heat(self) -> None:
        if self.graph_dict is None:
            return
        heat: dict = {}
        for node, t in self._error_heat.items():
            shown = self._group_of.get(node, node)
            heat[shown] = max(heat.get(shown, 0.0), float(t))
        self.graph.set_heat(heat, 1.0, ERROR)

    def center_on_linked(self) -> None:
        shown = [self._group_of.get(i, i) for i in self._linked]
        if shown:
            self.graph.center_on(shown[0])

    def _apply_linked(self, center: bool = False) -> None:
        if self.graph_dict is None:
            return
        shown = list(dict.fromkeys(self._group_of.get(i, i) for i in self._linked))
        self.graph.highlight(shown, "linked")
        if center and shown:
            self.graph.center_on(shown[0])
        self.table.blockSignals(True)
        self.table.clearSelection()
        first = next((r for r in map(self.table.row_of, self._linked) if r is not None), None)
        if first is not None:
            self.table.selectRow(first)
            self.table.scroll_to_row(first)
        self.table.blockSignals(False)

    def linked_ids(self) -> list[str]:
        return list(self._linked)

    # -- search ----------------------------------------------------------------------------------
    def _search(self) -> list[str]:
        text = self.search.text().strip()
        ids = self.graph.find(text) if text else []
        return ids

    def _filter_table(self, text: str) -> None:
        text = text.strip().lower()
        for r, row in enumerate(self.table.table_model.rows):
            hide = bool(text) and not any(text in cell.lower() for cell in row)
            if hide != self.table.isRowHidden(r):
                self.table.setRowHidden(r, hide)


def _esc(text: str) -> str:
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
