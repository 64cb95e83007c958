"""Run pane: Build & Run the current step in the engine; outputs vs PyTorch, latency, per-kernel
times (which also colour the Relax graph through the event hub).  A second tab builds and times
every step (the engine's ``latency_trace``) and plots latency per step; clicking a point jumps
there.

An IR file can run any of its Relax functions (the Function selector). When the chosen function
has symbolic sizes and the file gives no get_inputs(), the pane asks for their values in a small
dialog before the build and remembers them per file; cancelling sends nothing."""
from __future__ import annotations

import json

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QCheckBox, QComboBox, QGridLayout, QHBoxLayout, QLabel,
                               QPushButton, QSizePolicy, QTabWidget,
                               QVBoxLayout, QWidget)

from irviz.core.views.latency_svg import fmt_ms
from irviz.protocol.commands import BuildRunResult, State
from irviz.ui import themes
from irviz.ui.panes.base import Pane, dim_label
from irviz.ui.panes.estimate_tab import EstimateTab
from irviz.ui.panes.intermediates_tab import IntermediatesTab
from irviz.ui.panes.kernel_counts import add_count_columns
from irviz.ui.panes.kernel_roofline import RooflineTab, add_roofline_columns, set_roofline
from irviz.ui.panes.kernel_table import KernelTable
from irviz.ui.panes.memory_tab import MemoryTab
from irviz.ui.panes.peer_tab import PeerTab
from irviz.ui.panes.run_text import (error_text, fmt_figure, kernel_heat, outputs_that_differ, ratio_text,
                                     short_target, timing_note)
from irviz.ui.result_stamp import ResultSlot, ResultStamp
from irviz.ui.widgets.latency_chart import LatencyChart
from irviz.ui.widgets.sizes_dialog import ask_sizes

STRUCTURE_ONLY = ("Structure only: no weights to run with. Estimate (Ctrl+R) times each kernel "
                  "alone at its shapes instead.")
SIZES_KEY = "run/sizes"   # settings: {spec: {size name: value}}, the sizes given per opened file


class RunPane(Pane):
    def __init__(self, bridge, hub, parent=None, settings=None):
        super().__init__(bridge, hub, parent, settings=settings)
        self.result: BuildRunResult | None = None
        self.error: dict | None = None
        self.built_step: int | None = None
        self.built_func: str | None = None
        self._result_status = ""   # the status line the run's result came with
        self._heat_sent: dict = {}
        self._sizes_memory: dict = {}
        # (names, values, func=, model=, parent=) -> {name: int} or None; tests replace it
        self.ask_sizes = ask_sizes

        self.run_button = QPushButton("Build && Run")
        self.run_button.setToolTip("Build the current step, run it, compare with PyTorch (Ctrl+R)")
        self.run_button.clicked.connect(self.build_run)
        self.func_box = QComboBox()
        self.func_box.setObjectName("RunFunction")
        self.func_box.setMinimumContentsLength(8)
        self.func_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.func_box.setToolTip("The Relax function to build and run")
        self.sizes_button = QPushButton("Sizes…")
        self.sizes_button.setToolTip("Set the symbolic sizes of made-up inputs (m, n, …), then "
                                     "build and run")
        self.sizes_button.clicked.connect(lambda: self.build_run(edit_sizes=True))
        self.verdict = QLabel("")
        self.verdict.setObjectName("RunVerdict")
        # a long verdict is cut, never widens the window: the status row below says it in full
        self.verdict.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        f = self.verdict.font()
        f.setBold(True)
        f.setPointSizeF(f.pointSizeF() * 1.15)
        self.verdict.setFont(f)
        self.status = dim_label("Open a model, then Build & Run any step.")
        self.status.setWordWrap(True)
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.run_button)
        top.addWidget(dim_label("Function", elastic=False))
        top.addWidget(self.func_box)
        top.addWidget(self.sizes_button)
        top.addWidget(self.verdict, 1)

        self.fields = {}
        self.figures = QWidget()
        grid = QGridLayout(self.figures)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setHorizontalSpacing(14)
        labels = [("max_abs_error", "max |error|"), ("max_rel_error", "max rel. error"),
                  ("tvm_ms", "TVM"), ("torch_ms", "PyTorch"), ("ratio", "TVM / PyTorch"),
                  ("build_seconds", "build"), ("threads", "threads"), ("target", "target")]
        for i, (key, text) in enumerate(labels):
            name = dim_label(text, elastic=False)
            value = QLabel("—")
            value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            value.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
            grid.addWidget(name, i // 4 * 2, i % 4)
            grid.addWidget(value, i // 4 * 2 + 1, i % 4)
            self.fields[key] = value

        # how the figures were taken, and on what CPU: a figure means little without it
        self.timing_note = dim_label("")
        self.timing_note.setWordWrap(True)
        self.timing_note.setObjectName("RunTimingNote")

        self.kernels = KernelTable()
        add_count_columns(self.kernels)
        add_roofline_columns(self.kernels)
        self.roofline = RooflineTab()
        self.roofline.bindingClicked.connect(self.hub.select_relax)
        self.kernels.bindingClicked.connect(self.hub.select_relax)

        # latency per step: build and time every recorded step
        self.latency: dict | None = None
        self.latency_button = QPushButton("Time every step")
        self.latency_button.setToolTip("Build and time every step of the pipeline (steps whose "
                                       "module did not change are measured once)")
        self.latency_button.clicked.connect(self.latency_trace)
        self.latency_status = dim_label("Build and time every recorded step; plotted on a log scale "
                                        "with torch eager as a line.")
        self.latency_status.setWordWrap(True)
        self.chart = LatencyChart()
        self.chart.stepClicked.connect(self._latency_clicked)
        lat_top = QHBoxLayout()
        lat_top.setContentsMargins(0, 0, 0, 0)
        lat_top.addWidget(self.latency_button)
        self.chart_error = QCheckBox("Show error")
        self.chart_error.setToolTip("Plot each step's max abs error against PyTorch instead of its latency")
        self.chart_error.toggled.connect(lambda on: self.chart.set_quantity("error" if on else "latency"))
        lat_top.addWidget(self.chart_error)
        lat_top.addWidget(self.latency_status, 1)
        lat_page = QWidget()
        lat_lay = QVBoxLayout(lat_page)
        lat_lay.setContentsMargins(0, 4, 0, 0)
        lat_lay.setSpacing(4)
        lat_lay.addLayout(lat_top)
        self.latency_note = dim_label("")
        lat_lay.addWidget(self.latency_note)
        lat_lay.addWidget(self.chart, 1)

        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.tabs.addTab(self.kernels, "Kernels")
        self.peer = PeerTab(self.ask, hub, lambda: self.cursor_of(self.state), self._ran_at, self.build_run,
                            state=lambda: self.state)
        self.tabs.addTab(self.peer, "Peer")
        if hasattr(bridge, "progress"):  # a stand-in bridge may send no progress
            bridge.progress.connect(self.peer.on_progress)
        self.tabs.addTab(self.roofline, "Roofline")
        self.latency_page = lat_page
        self.tabs.addTab(lat_page, "Latency per step")
        self.intermediates = IntermediatesTab(self.ask, hub, lambda: self.cursor_of(self.state),
                                              state=lambda: self.state)
        self.tabs.addTab(self.intermediates, "Intermediates")
        self.memory = MemoryTab(self.ask, hub, lambda: self.cursor_of(self.state), state=lambda: self.state)
        self.tabs.addTab(self.memory, "Memory")
        # the Memory tab's parts, by the names the pane had before the tab was a module of its own
        self.memory_view, self.memory_status = self.memory.view, self.memory.status
        self.memory_note, self.memory_button = self.memory.note, self.memory.button
        self.estimate = EstimateTab(self.ask, lambda: self.cursor_of(self.state), state=lambda: self.state)
        self.tabs.addTab(self.estimate, "Estimate")

        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.setSpacing(4)
        lay.addLayout(top)
        lay.addWidget(self.status)   # a row of its own: run errors and hints are long
        self.run_note = dim_label("")
        self.run_note.setObjectName("RunStaleNote")
        lay.addWidget(self.run_note)
        lay.addWidget(self.figures)
        lay.addWidget(self.timing_note)
        lay.addWidget(self.tabs, 1)
        # what each result is for; greyed with a note once it is not for what is open
        self.run_slot = ResultSlot([self.verdict, self.status, self.figures, self.timing_note,
                                    self.kernels, self.roofline], self.run_note)
        self.latency_slot = ResultSlot([self.chart], self.latency_note)
        self.memory_slot = self.memory.slot
        self.bisect: dict | None = None
        hub.bisectFound.connect(self._on_bisect)

    def on_state(self, state: State, prev: State | None) -> None:
        cursor = self.cursor_of(state)
        self.run_button.setEnabled(cursor is not None)
        self._structure_only(bool(state.get("structure_only")), cursor, prev)
        self._fill_funcs(state)
        self.latency_button.setEnabled(cursor is not None)
        self.chart.set_current_step(cursor)
        if self.model_key(state) != self.model_key(prev):
            self._reset()
            return
        self._check_results()
        self._show_where(cursor)

    def _ran_at(self) -> int | None:
        """The step of the run shown, while it holds (the peer puts its kernels beside it)."""
        return self.built_step if self.result is not None and not self.run_slot.stale else None

    def _show_where(self, cursor: int | None) -> None:
        """The run's status line says which step its results are for whenever the cursor is
        elsewhere, on every move (stale or not: the stale note says why they no longer hold)."""
        if self.result is None or self.built_step is None or not self._result_status:
            return
        if cursor == self.built_step:
            self.status.setText(self._result_status)
        else:
            self.status.setText(f"Results are for step {self.built_step}; the cursor is at step {cursor}. "
                                + self._result_status)

    def _sync_heat(self) -> None:
        """Kernel times colour the Relax graph only at the step they were measured at, while they
        still hold: another step's bindings may call other kernels."""
        kernels = (self.result.get("kernels") if self.result else None) or []
        here = self.cursor_of(self.state) == self.built_step and not self.run_slot.stale
        self._set_heat(kernel_heat(kernels) if kernels and here else {})

    def _set_heat(self, heat: dict) -> None:
        if heat != self._heat_sent:
            self._heat_sent = dict(heat)
            self.hub.set_heat(heat)

    def _check_results(self) -> None:
        """Grey every result that is no longer for what is open, or that the last bisect contradicts."""
        bisect = (self.bisect or {}).get("result")
        b_stamp = (self.bisect or {}).get("stamp")
        run = self.run_slot.stamp
        ok = None
        if self.result is not None and self.result.get("reference") is not False \
                and not self.result.get("not_comparable"):
            ok = bool(self.result.get("allclose", self.result.get("ok")))
        self.run_slot.check(self.state, run.contradiction(ok, bisect, b_stamp, self.state) if run else None)
        self.latency_slot.check(self.state)
        self.memory_slot.check(self.state)
        self.estimate.slot.check(self.state)
        self.peer.check(self.state)
        self.intermediates.check(self.state, bisect, b_stamp)
        self._sync_heat()

    def _on_bisect(self, found: dict) -> None:
        self.bisect = dict(found or {})
        self._check_results()

    def _reset(self) -> None:
        """Another model (or the same one opened again): nothing shown was for it."""
        self.result = self.error = self.built_step = None
        self.bisect = None
        for slot in (self.run_slot, self.latency_slot):
            slot.clear()
        self.memory.clear()
        self.estimate.clear()
        self.peer.clear()
        self.verdict.setText("")
        self.status.setText(STRUCTURE_ONLY if (self.state.get("structure_only") if self.state else None) else
                            "Build & Run the current step (Ctrl+R).")
        for v in self.fields.values():
            v.setText("—")
        self.timing_note.setText("")
        self.kernels.clear_rows()
        self.kernels.context.clear()
        set_roofline(self.kernels, None)
        self.roofline.clear()
        self._set_heat({})
        self.latency = None
        self.intermediates.clear()
        self.chart.clear()
        self.latency_status.setText("Build and time every recorded step; plotted on a log scale "
                                    "with torch eager as a line.")

    # -- which function, on which sizes ----------------------------------------------------------
    def _fill_funcs(self, state: State) -> None:
        funcs = list(state.get("run_functions") or (["main"] if state.get("model") else []))
        if [self.func_box.itemText(i) for i in range(self.func_box.count())] != funcs:
            current = self.func_box.currentText()
            self.func_box.clear()
            self.func_box.addItems(funcs)
            if current in funcs:
                self.func_box.setCurrentIndex(funcs.index(current))
        self.func_box.setEnabled(len(funcs) > 1)
        self.sizes_button.setVisible(self._is_ir(state))
        self.sizes_button.setEnabled(bool(funcs))

    def current_func(self) -> str:
        return self.func_box.currentText() or "main"

    def set_func(self, name: str) -> None:
        i = self.func_box.findText(name)
        if i >= 0:
            self.func_box.setCurrentIndex(i)

    @staticmethod
    def _is_ir(state: State | None) -> bool:
        """An IR file or an exported step: its inputs may be made up, so sizes may be needed."""
        return bool(state and state.get("model") and state.get("importer") == "tvmscript")

    def remembered_sizes(self, spec: str | None = None) -> dict[str, int]:
        spec = spec if spec is not None else (self.state.get("spec") if self.state else None) or ""
        return dict(self._all_sizes().get(spec) or {})

    def remember_sizes(self, values: dict, spec: str | None = None) -> None:
        spec = spec if spec is not None else (self.state.get("spec") if self.state else None) or ""
        table = self._all_sizes()
        table[spec] = {**(table.get(spec) or {}), **{k: int(v) for k, v in values.items()}}
        if self.settings is not None:
            self.settings.setValue(SIZES_KEY, json.dumps(table))
        self._sizes_memory = table

    def _all_sizes(self) -> dict:
        if self.settings is None:
            return dict(self._sizes_memory)
        try:
            table = json.loads(self.settings.value(SIZES_KEY, "{}") or "{}")
        except (TypeError, ValueError):
            table = {}
        return table if isinstance(table, dict) else {}

    def build_run(self, edit_sizes: bool = False) -> None:
        cursor = self.cursor_of(self.state)
        if cursor is None:
            self.status.setText("Open a model first.")
            return
        if (self.state.get("structure_only") if self.state else None):
            self.status.setText(STRUCTURE_ONLY)
            self.tabs.setCurrentWidget(self.estimate)
            self.estimate.estimate()
            return
        func = self.current_func()
        if self._is_ir(self.state):
            # whether sizes are needed is known before the build: ask the engine first
            self.status.setText(f"Checking what {func} needs…")
            self.ask("sizes_edit" if edit_sizes else "sizes", "run_sizes", step=cursor, func=func)
            return
        self._start_run(cursor, func)

    def _start_run(self, cursor: int, func: str, dims: dict | None = None) -> None:
        self.run_slot.set(ResultStamp.of(self.state, cursor))
        self.result = None
        self.built_step = cursor
        self.built_func = func
        self.error = None
        self.verdict.setText("")
        what = f"step {cursor}" + (f" ({func})" if func != "main" else "")
        self.status.setText(f"Building and running {what}…")
        args = {"step": cursor, "func": func}
        if dims:
            args["dims"] = dict(dims)
        self.ask("run", "build_run", **args)

    def _on_sizes(self, r: dict, edit: bool) -> None:
        cursor = self.cursor_of(self.state)
        if cursor is None:
            return
        func = r.get("func") or self.current_func()
        names = list(r.get("sizes") or [])
        if edit and (r.get("inputs") != "random" or not names):
            self.status.setText(f"{func} needs no sizes: " + (
                "the file's get_inputs() gives its inputs." if r.get("inputs") == "get_inputs" else
                "its inputs have fixed shapes." if not names else "the model's example inputs fix them."))
            return
        if r.get("inputs") != "random" or not names:
            self._start_run(cursor, func)
            return
        known = {**(r.get("dims") or {}), **self.remembered_sizes()}
        if edit or any(n not in known for n in names):
            values = self.ask_sizes(names, known, func=func, model=(self.state.get("model") if self.state else None) or "",
                                    parent=self)
            if values is None:
                self.status.setText(f"No sizes given for {func}: nothing was built or run.")
                return
            self.remember_sizes(values)
            known.update(values)
        self._start_run(cursor, func, {n: int(known[n]) for n in names})

    def latency_trace(self) -> None:
        """Ask the engine to build and time every recorded step; the chart shows the result."""
        if self.cursor_of(self.state) is None:
            self.latency_status.setText("Open a model first.")
            return
        self.tabs.setCurrentWidget(self.latency_page)
        self.latency_slot.set(ResultStamp.of(self.state, per_recorded_step=True))
        n = len((self.state.get("steps") if self.state else None) or [])
        self.latency_status.setText(f"Building and timing {n} step{'s' if n != 1 else ''}…")
        self.latency_button.setEnabled(False)
        self.ask("latency", "latency_trace", steps="all")

    def _show_latency(self, r: dict) -> None:
        self.latency = r
        trace = list(r.get("trace") or [])
        self.chart.set_trace(trace, r.get("torch_ms"))
        self.chart.set_current_step(self.cursor_of(self.state))
        built = [e for e in trace if e.get("ok") and e.get("tvm_ms")]
        parts = [f"{len(built)} of {len(trace)} steps built"]
        if built:
            best = min(built, key=lambda e: e["tvm_ms"])
            last = built[-1]
            parts.append(f"last built: {fmt_ms(last['tvm_ms'])} ms (step {last['step']})")
            parts.append(f"fastest: {fmt_ms(best['tvm_ms'])} ms at step {best['step']} {best.get('pass', '')}")
        if r.get("torch_ms"):
            parts.append(f"torch eager {fmt_ms(r['torch_ms'])} ms")
        if r.get("threads"):
            parts.append(f"{r['threads']} threads")
        wrong = [str(e["step"]) for e in trace if e.get("allclose") is False]
        if wrong:
            parts.append(f"outputs differ at step {', '.join(wrong)}")
        if r.get("planned"):
            parts.append(f"{r['planned']} planned pass{'es' if r['planned'] != 1 else ''} not applied yet")
        self.latency_status.setText(" · ".join(parts) + ". Click a point to go to that step.")

    def _latency_clicked(self, step: int) -> None:
        self.hub.select_step(step)
        if step != self.cursor_of(self.state):
            self.bridge.request("jump", index=int(step))

    def plan_memory(self) -> None:
        self.memory.plan()

    def _structure_only(self, only: bool, cursor, prev: State | None) -> None:
        """A model without weights cannot run: the Run button estimates instead (the Estimate tab)."""
        self.run_button.setText("Estimate" if only else "Build && Run")
        self.run_button.setToolTip("No weights to run with: estimate the step's latency from its "
                                   "kernels timed alone (Ctrl+R)" if only else
                                   "Build the current step, run it, compare with PyTorch (Ctrl+R)")
        self.figures.setVisible(not only)  # errors and run times a model without weights never has
        if only and cursor is not None and not (prev and prev.get("structure_only")):
            self.tabs.setCurrentWidget(self.estimate)

    def on_reply(self, purpose: str, result) -> None:
        self._show_reply(purpose, result)
        self._check_results()  # the pipeline may have changed while it was computed

    def on_error(self, purpose: str, error: dict) -> None:
        self._show_error(purpose, error)
        self._check_results()

    def _show_reply(self, purpose: str, result) -> None:
        if purpose == "memory":
            self.memory.show_result(result)
            return
        if purpose == "estimate":
            self.estimate.show_result(result or {})
            return
        if purpose in ("sizes", "sizes_edit"):
            self._on_sizes(result or {}, edit=purpose == "sizes_edit")
            return
        if purpose == "latency":
            self.latency_button.setEnabled(self.cursor_of(self.state) is not None)
            self._show_latency(result or {})
            return
        if purpose == "intermediates":
            self.intermediates.show_result(result or {})
            return
        if purpose == "counts":
            r = dict(result or {})
            self.kernels.set_context(counts=dict(r, target_name=short_target(r.get("target_name")) or "host"))
            return
        if purpose == "peer":
            self.peer.show_result(result or {})
        if purpose == "run":
            self._show_run(result)
            self.peer.run_done(True)

    def _show_run(self, r: BuildRunResult) -> None:
        c = themes.colors()
        self.result = r
        ok = bool(r.get("allclose", r.get("ok")))
        no_reference = r.get("reference") is False
        self.verdict.setText("RAN" if no_reference else "PASS" if ok else
                             "NOT COMPARABLE" if r.get("not_comparable") else "MISMATCH")
        # readable beside the buttons, yet bounded: an odd stage name must not widen the window
        longest = self.verdict.fontMetrics().horizontalAdvance("NOT COMPARABLE ")
        self.verdict.setMinimumWidth(min(self.verdict.sizeHint().width(), longest))
        self.verdict.setStyleSheet(f"color: {c.ok if ok or no_reference else c.bad};")
        tvm_ms, torch_ms = r.get("tvm_ms"), r.get("torch_ms")
        mismatch = not ok and not no_reference
        values = {"max_abs_error": error_text(r.get("max_abs_error"), mismatch),
                  "max_rel_error": error_text(r.get("max_rel_error"), mismatch),
                  "tvm_ms": fmt_figure(tvm_ms, 4, " ms"), "torch_ms": fmt_figure(torch_ms, 4, " ms"),
                  "ratio": ratio_text(r), "build_seconds": fmt_figure(r.get("build_seconds"), 3, " s"),
                  "threads": str(r.get("threads", "—")), "target": short_target(r.get("target")) or "—"}
        for k, v in values.items():
            self.fields[k].setText(v)
        self.fields["target"].setToolTip(str(r.get("target") or ""))
        self.fields["ratio"].setToolTip(str(r.get("reason") or ""))
        self.timing_note.setText(timing_note(r))
        against = r.get("reference_name") or "PyTorch"
        func = r.get("func") or self.built_func or "main"
        what = f"Step {self.built_step}" + (f" ({func})" if func != "main" else "")
        self.status.setText(
            f"{what}: ran; there is nothing to compare with (no PyTorch model, no reference())."
            if no_reference else f"{what}: outputs "
            + (f"match {against}." if ok else f"differ from {against}"
               + (f" by nature: {r['not_comparable']}." if r.get("not_comparable") else
                  ": " + (outputs_that_differ(r.get("per_output") or [])
                          or f"max abs error {values['max_abs_error']}, max rel error {values['max_rel_error']}")
                  + ".")))
        for key in ("max_abs_error", "max_rel_error"):
            self.fields[key].setStyleSheet(f"color: {c.bad};" if mismatch else "")
            self.fields[key].setToolTip("NaN or ∞ in the outputs where PyTorch has numbers, or integer "
                                        "outputs that differ" if values[key] == "∞ / NaN" else "")
        kernels = list(r.get("kernels") or [])
        self.kernels.context["run_step"] = self.built_step
        set_roofline(self.kernels, r.get("roofline"))
        self.kernels.set_kernels(kernels, r.get("kernels_reliable"), r.get("kernels_reason"))
        self.roofline.set_roofline(r.get("roofline"), kernels)
        self._result_status = self.status.text()
        self._show_where(self.cursor_of(self.state))
        self._count_kernels(r)

    def _count_kernels(self, r: BuildRunResult) -> None:
        """The counts of the kernels' code for the run's step and target: a request of its own,
        after the run's reply, so Build & Run shows its figures first."""
        if not r.get("kernels") or self.built_step is None:
            return
        target = r.get("target") or None
        self.kernels.set_context(counts={"pending": True, "step": self.built_step,
                                         "target_name": short_target(target) or "host"})
        self.ask("counts", "kernel_code", step=self.built_step, target=target)

    def _show_error(self, purpose: str, error: dict) -> None:
        c = themes.colors()
        if purpose == "intermediates":
            self.intermediates.show_error(error)
            return
        if purpose == "counts":
            self.kernels.set_context(counts={"error": error.get("message") or "failed"})
            return
        if purpose == "memory":
            self.memory.show_error(error)
            return
        if purpose == "estimate":
            self.estimate.show_error(error)
            return
        if purpose == "peer":
            self.peer.show_error(error)
            return
        if purpose == "run":
            self.peer.run_done(False)
        if purpose == "latency":
            self.latency_button.setEnabled(self.cursor_of(self.state) is not None)
            msg = error.get("message", "failed")
            self.latency_status.setText("Cancelled." if error.get("stage") == "cancelled" else
                                         f"Latency trace failed: {msg}")
            self.latency_status.setToolTip(error.get("detail") or "")
            return
        if error.get("not_run"):
            self._show_not_run(error)
            return
        self.error = error
        self.result = None
        stage = error.get("stage", "build")
        self.verdict.setText("CANCELLED" if stage == "cancelled" else f"{stage.upper()} FAILED")
        self.verdict.setToolTip(self.verdict.text())
        self.verdict.setStyleSheet(f"color: {c.bad};")
        msg = error.get("message", "failed")
        if error.get("hint"):
            msg += f"\nhint: {error['hint']}"
        self.status.setText(msg)
        self.status.setToolTip(error.get("detail") or "")

    def _show_not_run(self, error: dict) -> None:
        """Built for a target whose device is not here: the build worked and nothing failed, so it
        is said in the warning colour, not the failure's; the Memory, Latency, Intermediates and
        Estimate tabs keep what they show."""
        self.error, self.result = None, None
        self.verdict.setText("BUILT, NOT RUN")
        self.verdict.setToolTip(error.get("message", ""))
        self.verdict.setStyleSheet(f"color: {themes.colors().warn};")
        for key, field in self.fields.items():
            field.setText(str(error["not_run"]) if key == "target" else "—")
            field.setStyleSheet("")
        # an earlier run's kernels and times would pass for this target's: the run's own views go
        self.timing_note.setText("")
        self.kernels.clear_rows()
        set_roofline(self.kernels, None)
        self.roofline.clear()
        self._set_heat({})
        self.status.setText(error.get("message", "") + (f"\nhint: {error['hint']}" if error.get("hint") else ""))
        self.status.setToolTip("")
