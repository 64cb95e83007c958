"""Relax pane: pick a Relax function; its dataflow graph and its TVMScript, split or one at a
time. Nodes the current step added or changed are highlighted; the run pane's per-kernel times
colour the graph."""
from __future__ import annotations

import html
import re

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QButtonGroup, QComboBox, QHBoxLayout, QLabel, QLineEdit, QSplitter,
                               QVBoxLayout)

from irviz.protocol.commands import ALL_FUNCTIONS, State, StepEntry
from irviz.ui import themes
from irviz.ui.panes.base import Pane, SearchBox, dim_label
from irviz.ui.result_stamp import ResultStamp, step_identity
from irviz.ui.widgets.code_view import CodeView
from irviz.ui.widgets.graph_view import GraphView
from irviz.ui.widgets.heat_scale import ERROR, TIME, HeatScale
from irviz.ui.widgets.tool_button import tool_button

_BINDING = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?::[^=]*)?=(?!=)")
ALL_LABEL = "All functions"   # the function box's entry for every Relax function in one graph


def graph_changes(graph: dict, prev_graph: dict | None, step: StepEntry | None) -> tuple[list[str], list[str]]:
    """Node ids that are new since ``prev_graph`` (added) and nodes whose label/callee changed or that call
    a function the step added or changed."""
    nodes = [n for n in graph.get("nodes", []) if n.get("kind") not in ("param", "output")]
    touched = set()
    if step:
        touched = set(step.get("added") or []) | set(step.get("changed_funcs") or [])
    if prev_graph is None:
        return [], [n["id"] for n in nodes if n.get("callee") in touched]
    before = {n["id"]: n for n in prev_graph.get("nodes", [])}
    added, changed = [], []
    for n in nodes:
        old = before.get(n["id"])
        if old is None:
            added.append(n["id"])
        elif (old.get("label"), old.get("callee"), old.get("sublabel")) != (
                n.get("label"), n.get("callee"), n.get("sublabel")) or n.get("callee") in touched:
            changed.append(n["id"])
    return added, changed


class RelaxPane(Pane):
    def __init__(self, bridge, hub, parent=None, settings=None):
        super().__init__(bridge, hub, parent, settings=settings)
        self.graph_dict: dict | None = None
        self.prev_graph: dict | None = None
        self.text: str | None = None
        self.added: list[str] = []
        self.changed: list[str] = []
        self._linked: list[str] = []
        self._heat: dict = {}
        self._heat_scale: HeatScale = TIME
        self._heat_vmax: float | None = None  # fixed for the error overlay's log scale
        self._shown: tuple | None = None  # (step, func) displayed
        self._graph_func: str | None = None
        self.show_bookkeeping = False

        self.func_box = QComboBox()
        self.func_box.setMinimumContentsLength(8)
        self.func_box.setToolTip("Relax function")
        self.func_box.activated.connect(lambda _i: self._reload(force=True))
        self.search = SearchBox("Search binding, op, shape…")
        self.search.setMinimumWidth(120)
        self.search.returnPressed.connect(self._search)
        self.mode_buttons = {}
        group = QButtonGroup(self)
        for name in ("Graph", "Split", "Code"):
            b = tool_button(name, checkable=True)
            b.toggled.connect(lambda on, n=name: self.set_view(n.lower()) if on else None)
            group.addButton(b)
            self.mode_buttons[name.lower()] = b
        self.info = dim_label("No model open")
        # a dataflow pattern (conv2d -> add -> relu), counted by the engine at every step
        self.query_box = QLineEdit()
        self.query_box.setPlaceholderText("Pattern: conv2d -> batch_norm -> relu, matmul(dtype=float32) -> * -> softmax")
        self.query_box.setClearButtonEnabled(True)
        self.query_box.setToolTip("What the bindings call, joined by '->' (feeds): Relax ops (conv2d), "
                                  "functions (linear0, fused_* globs), extern functions (env.relu); "
                                  "'*' is any call")
        self.query_box.setMinimumWidth(80)  # the pane shares the top row with three others
        self.query_box.returnPressed.connect(self.run_query)
        self.query_prev = tool_button("◀")
        self.query_next = tool_button("▶")
        self.query_prev.setToolTip("Previous match")
        self.query_next.setToolTip("Next match")
        self.query_prev.clicked.connect(lambda: self.goto_match(-1))
        self.query_next.clicked.connect(lambda: self.goto_match(+1))
        # the matches at this step, by their bindings: choosing one centres and selects it
        self.query_list = QComboBox()
        self.query_list.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.query_list.setMinimumContentsLength(6)
        self.query_list.setPlaceholderText("matches here")
        self.query_list.setToolTip("The matches at this step, each by its bindings (first op first)")
        self.query_list.activated.connect(self.choose_match)
        self._listed: tuple | None = None
        self.query_info = dim_label("")
        self.query_result: dict | None = None
        self.query_stamp = None   # a ResultStamp: the matches are per recorded step of one pipeline
        self.query_pos = -1

        self.graph = GraphView()
        self.graph.nodeSelected.connect(self._node_clicked)
        self.code = CodeView()
        self.code.lineClicked.connect(self._line_clicked)
        self.split = QSplitter(Qt.Orientation.Vertical)
        self.split.addWidget(self.graph)
        self.split.addWidget(self.code)
        self.split.setStretchFactor(0, 3)
        self.split.setStretchFactor(1, 2)
        self.split.setSizes([600, 400])

        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(QLabel("Function"))
        top.addWidget(self.func_box)
        top.addWidget(self.search, 1)
        for b in self.mode_buttons.values():
            top.addWidget(b)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.setSpacing(3)
        lay.addLayout(top)
        qrow = QHBoxLayout()
        qrow.setContentsMargins(0, 0, 0, 0)
        qrow.addWidget(QLabel("Query"))
        qrow.addWidget(self.query_box, 3)
        qrow.addWidget(self.query_prev)
        qrow.addWidget(self.query_next)
        qrow.addWidget(self.query_list, 1)
        qrow.addWidget(self.query_info, 2)
        lay.addLayout(qrow)
        lay.addWidget(self.info)
        lay.addWidget(self.split, 1)
        self.mode_buttons["split"].setChecked(True)

        hub.linked.connect(self._on_linked)
        hub.cleared.connect(lambda: self._on_linked(None))
        hub.heatChanged.connect(self._on_heat)
        hub.errorHeatChanged.connect(lambda d: self._on_heat(d.get("relax") or {}, vmax=1.0, scale=ERROR))

    def restore_settings(self, settings) -> None:
        mode = str(settings.value("relax/view", "split"))
        self.set_view(mode if mode in self.mode_buttons else "split")

    def save_settings(self, settings) -> None:
        settings.setValue("relax/view", self.view_mode())

    def restyle(self) -> None:
        self.code.restyle()
        self.graph.set_dark(themes.colors().name == "dark")

    def view_mode(self) -> str:
        return next((m for m, b in self.mode_buttons.items() if b.isChecked()), "split")

    def set_view(self, mode: str) -> None:
        self.mode_buttons[mode].setChecked(True)
        self.graph.setVisible(mode in ("graph", "split"))
        self.code.setVisible(mode in ("code", "split"))

    # -- data ------------------------------------------------------------------------------------
    def current_func(self) -> str:
        text = self.func_box.currentText() or "main"
        return ALL_FUNCTIONS if text == ALL_LABEL else text

    def on_state(self, state: State, prev: State | None) -> None:
        cursor = self.cursor_of(state)
        if cursor is None:
            self.clear()
            return
        if state.get("importer") == "tvmscript" and not state.get("relax_functions") \
                and state.get("tir_functions"):
            self._show_prims_only(state, cursor)
            return
        funcs = list(state.get("relax_functions") or ["main"])
        several = len(state.get("run_functions") or []) > 1
        if several:
            funcs = [ALL_LABEL, *funcs]
        current = self.func_box.currentText()
        if [self.func_box.itemText(i) for i in range(self.func_box.count())] != funcs:
            self.func_box.clear()
            self.func_box.addItems(funcs)
            if current not in funcs or self.model_key(state) != self.model_key(prev):
                # an IR file's functions are the point of opening it: show them all at first
                current = ALL_LABEL if several and state.get("importer") == "tvmscript" else "main"
            self.func_box.setCurrentIndex(funcs.index(current) if current in funcs else 0)
        if self.model_key(state) != self.model_key(prev):
            self._on_heat({})  # colours and legend were the old model's
        self._reload()
        if self.query_box.text().strip() and (state.get("steps") != (prev.get("steps") if prev else None)
                                              or self.model_key(state) != self.model_key(prev)):
            self.run_query()
        else:
            self._show_query()

    def _show_prims_only(self, state: State, cursor: int) -> None:
        """A module of PrimFuncs only has no Relax graph: say where its functions are."""
        key = ("prims", cursor, self.model_key(state))
        if key == self._shown:
            return
        self._shown = key
        self.func_box.clear()
        self.graph.clear()
        self.graph_dict, self.prev_graph = {"nodes": [], "edges": []}, None
        names = ", ".join(state.get("tir_functions") or [])
        self.text = (f"# No Relax function: this module holds only PrimFuncs ({names}).\n"
                     "# See them in the TensorIR pane; Build & Run runs one alone.\n")
        self.code.set_text(self.text)
        self.info.setText(f"Step {cursor} · no Relax function: PrimFuncs only ({names})")

    def _reload(self, force: bool = False) -> None:
        cursor = self.cursor_of(self.state)
        if cursor is None:
            return
        key = (cursor, self.current_func(), self.model_key(self.state), step_identity(self.state, cursor))
        if key == self._shown and not force:
            return
        self._shown = key
        func = self.current_func()
        self.graph_dict = None
        self.prev_graph = None
        self.text = None
        step = self._step_info(cursor)
        self.info.setText(f"Step {cursor} · {step.get('pass', '') if step else ''} · loading {func}…")
        self.ask("graph", "relax_graph", step=cursor, func=func, bookkeeping=self.show_bookkeeping)
        self.ask("text", "function_text", step=cursor, name=func)
        if cursor > 0:
            self.ask("prev_graph", "relax_graph", step=cursor - 1, func=func,
                     bookkeeping=self.show_bookkeeping)

    def set_show_bookkeeping(self, on: bool) -> None:
        """Ask again for the graph with (or without) aliases and scalar constants."""
        if on == self.show_bookkeeping:
            return
        self.show_bookkeeping = on
        if self.cursor_of(self.state) is not None:
            self._graph_func = None     # a new layout: open it like a new graph
            self._reload(force=True)

    def _step_info(self, index: int) -> StepEntry | None:
        for s in (self.state.get("steps") if self.state else None) or []:
            if s.get("index") == index:
                return s
        return None

    def clear(self) -> None:
        self._shown = None
        self._graph_func = None
        self.graph_dict = self.prev_graph = self.text = None
        self.graph.clear()
        self.code.set_text("")
        self.func_box.clear()
        self.say_no_model()

    def on_reply(self, purpose: str, result) -> None:
        if purpose == "query":
            self.query_result = result
            self.query_pos = -1
            self._show_query()
            return
        if purpose == "graph":
            self.graph_dict = result or {"nodes": [], "edges": []}
            same_func = self._graph_func == self.current_func()
            self._graph_func = self.current_func()
            self.graph.set_graph(self.graph_dict, keep_view=same_func)
            if self._heat:
                self.graph.set_heat(self._heat, self._heat_vmax, self._heat_scale)
        elif purpose == "prev_graph":
            self.prev_graph = result or {"nodes": []}
        elif purpose == "text":
            self.text = (result or {}).get("text", "")
            self.code.set_text(self.text)
        self._update_highlights()

    def on_error(self, purpose: str, error: dict) -> None:
        if purpose == "query":
            self.query_result = None
            message = error.get("message", "the query failed")
            self.query_info.setText(message.splitlines()[0])
            self.query_info.setStyleSheet("color: #c0392b")
            # the caret under the pattern, in a fixed font, and what to do, where the mouse rests
            hint = error.get("hint")
            self.query_info.setToolTip("<pre>" + html.escape("\n".join(message.splitlines()[1:])) + "</pre>"
                                       + (f"<p>{html.escape(hint)}</p>" if hint else ""))
            if self.graph_dict is not None:
                self.graph.highlight([], "found")
            self._list_matches([])
            return
        if purpose == "prev_graph":  # e.g. the function did not exist one step earlier
            self.prev_graph = {"nodes": []}
            self._update_highlights()
            return
        self.info.setText(f"{purpose}: {error.get('message', 'failed')}")
        if purpose == "graph":
            self.graph_dict = {"nodes": [], "edges": []}
            self.graph.clear()
        if purpose == "text":
            self.text = ""

    def is_filled(self) -> bool:
        return self.graph_dict is not None and self.text is not None

    def _update_highlights(self) -> None:
        if self.graph_dict is None:
            return
        cursor = self.cursor_of(self.state) or 0
        waiting_prev = cursor > 0 and self.prev_graph is None
        if waiting_prev:
            return
        step = self._step_info(cursor)
        # step 0 is what was opened: nothing in it is new or changed (an IR file's step 0 "adds"
        # every function, which would otherwise mark each call of its prim_funcs)
        self.added, self.changed = graph_changes(self.graph_dict, self.prev_graph, step) if cursor > 0 else ([], [])
        self.graph.highlight(self.added, "added")
        self.graph.highlight(self.changed, "changed")
        self.graph.highlight(self._linked, "linked")
        nodes = [n for n in self.graph_dict.get("nodes", []) if n.get("kind") not in ("param", "output")]
        parts = [f"Step {cursor} · {step.get('pass', '') if step else ''}", f"{len(nodes)} bindings"]
        funcs = {n.get("function") for n in self.graph_dict.get("nodes", []) if n.get("function")}
        if len(funcs) > 1:
            parts.append(f"{len(funcs)} functions")
        missing = sorted({str(n["extern"]) for n in nodes if n.get("registered") is False})
        if missing:
            parts.append(f"not registered: {', '.join(missing)} (red)")
        hidden = self.graph_dict.get("hidden_bookkeeping") or []
        if hidden:
            parts.append(f"{len(hidden)} aliases/scalar constants hidden")
        if self.added:
            parts.append(f"{len(self.added)} new")
        if self.changed:
            parts.append(f"{len(self.changed)} changed")
        self.info.setText(" · ".join(parts))
        self._show_query()

    # -- query -----------------------------------------------------------------------------------
    def run_query(self) -> None:
        text = self.query_box.text().strip()
        self.query_info.setStyleSheet("")
        self.query_info.setToolTip("")
        if not text:
            self.query_result = None
            self._show_query()
            return
        if self.cursor_of(self.state) is None:
            self.query_info.setText("Open a model to query its Relax graph")
            return
        self.query_info.setText("Matching…")
        self.query_stamp = ResultStamp.of(self.state, per_recorded_step=True)
        self.ask("query", "query", pattern=text)

    def matches_here(self) -> list[list[str]]:
        """The matches of the query at the shown step, each its bindings first op first."""
        if not self.query_result:
            return []
        cursor = self.cursor_of(self.state)
        if self.query_stamp is None or self.query_stamp.stale_reason(self.state, cursor) is not None:
            return []  # matched at this index of another pipeline: another step
        row = next((r for r in self.query_result.get("steps", []) if r["index"] == cursor), None)
        return list(row["bindings"]) if row else []

    def _match_ids(self, chain: list[str]) -> list[str]:
        return match_node_ids(chain, (self.graph_dict or {}).get("nodes", []), self.current_func())

    def _show_query(self) -> None:
        if self.query_result is None:
            if not self.query_box.text().strip():
                self.query_info.setText("")
                if self.graph_dict is not None:
                    self.graph.highlight([], "found")
            self._list_matches([])
            return
        here = self.matches_here()
        steps = self.query_result.get("steps", [])
        total = sum(r["matches"] for r in steps)
        # where the count changes: the steps at which the pattern appears or disappears
        runs, last = [], None
        for r in steps:
            if r["matches"] != last:
                runs.append(f"{r['index']}:{r['matches']}")
                last = r["matches"]
        at = f"{self.query_pos + 1}/{len(here)}" if 0 <= self.query_pos < len(here) else f"{len(here)}"
        stale = self.query_stamp.stale_reason(self.state) if self.query_stamp is not None else None
        self.query_info.setText((f"Stale: {stale} · " if stale else "")
                                + f"{at} here · {total} over {len(steps)} steps · per step {' '.join(runs)}")
        self.query_info.setToolTip("\n".join(f"step {r['index']} {r['pass']}: {r['matches']}" for r in steps))
        if self.graph_dict is not None:
            self.graph.highlight([i for chain in here for i in self._match_ids(chain)], "found")
        self._list_matches(here)

    def _list_matches(self, here: list[list[str]]) -> None:
        key = ([list(c) for c in here], id(self.graph_dict))  # the ops in the tooltips come with the graph
        if key != self._listed:
            self._listed = key
            ops = {n["id"]: n.get("label", "") for n in (self.graph_dict or {}).get("nodes", [])}
            self.query_list.clear()
            for k, chain in enumerate(here):
                self.query_list.addItem(f"{k + 1}: " + " → ".join(chain))
                self.query_list.setItemData(k, " → ".join(f"{b} ({ops.get(b, '?')})" for b in chain),
                                            Qt.ItemDataRole.ToolTipRole)
        self.query_list.setEnabled(bool(here))
        self.query_list.setPlaceholderText(f"{len(here)} matches here" if here or self.query_result
                                           else "matches here")
        self.query_list.setCurrentIndex(self.query_pos if 0 <= self.query_pos < len(here) else -1)

    def goto_match(self, delta: int) -> None:
        here = self.matches_here()
        if here:
            start = self.query_pos if self.query_pos >= 0 else (-1 if delta > 0 else 0)
            self.choose_match((start + delta) % len(here))

    def choose_match(self, index: int) -> None:
        """Show match `index` of this step: centre the graph on it, select its last binding (as a
        click would) and mark its bindings in the code."""
        here = self.matches_here()
        if not 0 <= index < len(here):
            return
        self.query_pos = index
        ids = self._match_ids(here[index])
        self._show_query()
        if ids and self.graph_dict is not None:
            self.graph.select(ids[-1], center=True)
            self.code.highlight_words(ids, scroll=True)

    # -- selection -------------------------------------------------------------------------------
    def _node_clicked(self, node_id: str) -> None:
        if node_id and not node_id.startswith("group:"):
            self.hub.select_relax(node_id)

    def _line_clicked(self, line: int) -> None:
        lines = self.code.toPlainText().split("\n")
        if 0 < line <= len(lines):
            m = _BINDING.match(lines[line - 1])
            if m and self.graph_dict and any(n["id"] == m.group(1) for n in self.graph_dict.get("nodes", [])):
                self.hub.select_relax(m.group(1))

    def _on_linked(self, sel) -> None:
        self._linked = [] if sel is None else list(sel.relax)
        if self.graph_dict is not None:
            self.graph.highlight(self._linked, "linked")
            if sel is not None and sel.source != "relax" and self._linked:
                self.graph.center_on(self._linked[0])
            elif sel is not None and sel.source == "relax" and self.graph.selected() != sel.key:
                self.graph.blockSignals(True)
                self.graph.select(sel.key, center=True)
                self.graph.blockSignals(False)
        self.code.highlight_words(self._linked, scroll=bool(self._linked))

    def center_on_linked(self) -> None:
        if self._linked:
            self.graph.center_on(self._linked[0])

    def linked_ids(self) -> list[str]:
        return list(self._linked)

    def _on_heat(self, heat: dict, vmax: float | None = None, scale: HeatScale = TIME) -> None:
        self._heat, self._heat_vmax, self._heat_scale = dict(heat), vmax, scale
        # cleared at once, even while the next graph loads: a legend must not outlive its colours
        if self.graph_dict is not None or not heat:
            self.graph.set_heat(self._heat, vmax, scale)

    def _search(self) -> list[str]:
        text = self.search.text().strip()
        ids = self.graph.find(text) if text else []
        if not ids and text:
            self.code.find_text(text)
        return ids


def _bare(node_id: str) -> str:
    # an inlined binding of a fused call is "<call>/<var>", a repeated name "<var>#<k>"
    return node_id.rsplit("/", 1)[-1].split("#", 1)[0]


def match_node_ids(chain: list[str], nodes: list[dict], shown: str) -> list[str]:
    """The nodes of the shown graph that a query match's bindings are.

    A binding comes as its id in main, as function:id in another function. The function's own
    graph has it as id, the graph of all functions as function/id (main's unprefixed). A fused
    function inlined where it is called shows its bindings as <call>/<var> in a group named for
    it (once per call), and the call's result node stands for the call binding (``binding_id``).
    A binding of a function not shown has no node, though its name may be another binding's."""
    ids = {n["id"] for n in nodes}
    out: list[str] = []
    for b in chain:
        func, _, var = b.rpartition(":")
        func = func or "main"
        own: str | None
        if shown == ALL_FUNCTIONS:
            own = var if func == "main" else f"{func}/{var}"
        else:
            own = var if func == shown else None
        if own is not None and own in ids:
            out.append(own)
            continue
        out += [n["id"] for n in nodes
                if (n.get("binding_id") == var and n.get("function", shown) == func)
                or (func != "main" and str(n.get("group") or "").split(".")[-1] == func
                    and _bare(n["id"]) == _bare(var))]
    return out
