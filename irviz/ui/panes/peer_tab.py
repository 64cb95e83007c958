"""The Run pane's "Peer" tab: the cursor step's TVM kernels beside torch.compile's (Inductor on the
CPU, the engine's ``peer``), per group of FX nodes that whole kernels compute on both sides, the
groups that differ most first. A row selects its FX nodes (and so their Relax bindings and TensorIR
functions) and shows the Inductor kernel's code beside the TVM kernel's name.

The peer needs TVM's run of the step for TVM's side: without one for the cursor step, the tab has
the Run pane Build & Run it first (``run``) and asks for the peer once the run is in. "Freezing"
compiles with Inductor's freezing=True; the result says which mode it is, and says so again when the
box no longer matches it."""
from __future__ import annotations

import html
from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QCheckBox, QComboBox, QHBoxLayout, QHeaderView, QLabel, QPushButton, QSizePolicy, QSplitter,
                               QTableWidgetItem, QVBoxLayout, QWidget)

from irviz.protocol.commands import State
from irviz.ui import themes
from irviz.ui.panes.base import dim_label, row_table
from irviz.ui.panes.kernel_table import UNRELIABLE, Num
from irviz.ui.result_stamp import ResultSlot, ResultStamp
from irviz.ui.widgets.code_view import CodeView

INTRO = ("Compare the step's kernels with torch.compile's (Inductor, on the CPU): per group of FX "
         "nodes that whole kernels compute on both sides, which is faster. Compiling takes 20–100 s.")
FREEZING_TIP = ("Compile with Inductor's freezing=True, as torch.compile is usually run for inference: the "
               "weights become constants, batch norms fold into the convolutions before them and the "
               "weights are prepacked for mkldnn (no weight-layout copies before each convolution)")
LIBRARY_NOTE = "# a library call (no code generated): Inductor's wrapper calls it so\n"
NAME_WIDTH = 190  # px: the most a column of names takes
COLUMNS = ["FX nodes", "TVM kernels", "TVM ms", "Inductor kernels", "Inductor ms", "diff ms", "faster"]
TIPS = {"TVM ms": "The group's share of TVM's kernel times (a fused kernel's time split evenly among "
                  "the FX nodes it computes)",
        "Inductor ms": "The group's share of Inductor's kernel times (median of the profiled runs)",
        "diff ms": "TVM − Inductor: positive where TVM is slower; sorted by its size",
        "faster": "Who is faster on the group; none where a side has no kernel for it (views, or "
                  "provenance lost); unsure where a side's time implies more than the CPU's measured peak "
                  "(its kernels are not the ones that computed the group): left out of the verdicts"}


def _ms(v) -> str:
    return "—" if v is None else f"{float(v):.4g}"


def nodes_text(nodes: list[str]) -> str:
    return nodes[0] if len(nodes) == 1 else f"{nodes[0]} … {nodes[-1]} ({len(nodes)})" if nodes else ""


def mode_text(freezing) -> str:
    return "freezing" if freezing else "no freezing"


def summary_text(r: dict) -> str:
    """'Step 5 (freezing): Inductor's 4 kernels add up to 30.4 ms … · TVM slower on groups worth …'"""
    parts = [f"Step {r.get('step')} ({mode_text(r.get('freezing'))}): Inductor's {len(r.get('kernels') or [])} kernels add up to "
             f"{_ms(r.get('total_ms'))} ms; its compiled model alone {_ms(r.get('compiled_ms'))} ms "
             f"({r.get('threads', '?')} threads, compiled in {float(r.get('compile_seconds') or 0):.1f} s)"]
    if not r.get("tvm_ran"):
        parts.append("TVM did not run at this step: Inductor's side only")
    s = r.get("summary") or {}
    parts.append(f"TVM slower on groups worth {_ms(s.get('tvm_loses_ms'))} ms, faster on "
                 f"{_ms(s.get('tvm_wins_ms'))} ms")
    loses, wins = s.get("tvm_loses") or [], s.get("tvm_wins") or []
    if loses:
        parts.append(f"loses most on {_group_text(loses[0])}")
    if wins:
        parts.append(f"wins most on {_group_text(wins[0])}")
    return " · ".join(parts)


def _group_text(g: dict) -> str:
    """'permute … addmm (2): TVM 0.0071 ms vs Inductor 0.11 ms'"""
    return (f"{nodes_text(list(g.get('fx_nodes') or []))}: TVM {_ms(g.get('tvm_ms'))} ms vs Inductor "
            f"{_ms(g.get('inductor_ms'))} ms")


def short(text: str, most: int = 170) -> str:
    return text if len(text) <= most else text[:most - 1].rstrip() + "…"


class PeerTab(QWidget):
    """`ask(purpose, cmd, **args)` sends to the engine and returns the request id (the pane's ask);
    `ran_at()` the step TVM's shown run is for (None: none, or stale); `run()` has the Run pane
    Build & Run the cursor step. Replies come back through `show_result` / `show_error`, the run's
    end through `run_done`."""

    def __init__(self, ask, hub, cursor, ran_at: Callable[[], int | None], run: Callable[[], None],
                 parent=None, state: Callable[[], State | None] = lambda: None):
        super().__init__(parent)
        self._ask, self.hub, self._cursor, self._state = ask, hub, cursor, state
        self._ran_at, self._run = ran_at, run
        self.result: dict | None = None
        self.rows: list[dict] = []
        self._rid: int | None = None
        self._after_run: int | None = None   # the step whose run the peer waits for
        self.button = QPushButton("Compare with torch.compile")
        self.button.setObjectName("PeerButton")
        self.button.setToolTip(INTRO)
        self.button.clicked.connect(self.compare)
        self.freezing = QCheckBox("Freezing")
        self.freezing.setObjectName("PeerFreezing")
        self.freezing.setToolTip(FREEZING_TIP)
        self.freezing.toggled.connect(self._mode_changed)
        self.mode = dim_label("", elastic=False)
        self.mode.setObjectName("PeerMode")
        self.status = dim_label(INTRO)
        self.status.setWordWrap(True)
        self.status.setObjectName("PeerStatus")
        self.mark = QLabel("")
        # one line, the reason in full in its tooltip: a short Run pane keeps its rows for the table
        self.mark.setObjectName("PeerUnreliable")
        self.mark.setSizePolicy(self.status.sizePolicy())
        self.mark.setVisible(False)
        self.note = dim_label("")
        self.table = row_table(COLUMNS)
        self.table.setObjectName("PeerTable")
        self.table.setSortingEnabled(True)
        hh = self.table.horizontalHeader()
        hh.setStretchLastSection(True)
        for c, name in enumerate(COLUMNS):
            hh.setSectionResizeMode(c, QHeaderView.ResizeMode.Interactive if "kernels" in name or c == 0
                                    else QHeaderView.ResizeMode.ResizeToContents)
        self._headers(True, None)
        self.table.itemSelectionChanged.connect(self._row_selected)

        self.tvm_label = QLabel("")
        self.tvm_label.setObjectName("PeerTvmKernel")
        self.tvm_label.setTextFormat(Qt.TextFormat.RichText)
        self.tvm_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.tvm_label.linkActivated.connect(self.hub.select_tir)
        self.kernel_box = QComboBox()
        self.kernel_box.setObjectName("PeerKernel")
        self.kernel_box.setToolTip("The group's Inductor kernel whose code is shown")
        self.kernel_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.kernel_box.setMinimumContentsLength(24)
        self.kernel_box.currentIndexChanged.connect(self._show_code)
        self.code = CodeView()
        self.code.setObjectName("PeerCode")
        code_bar = QHBoxLayout()
        code_bar.setContentsMargins(0, 0, 0, 0)
        code_bar.addWidget(self.tvm_label, 1)
        code_bar.addWidget(dim_label("Inductor", elastic=False))
        code_bar.addWidget(self.kernel_box, 1)
        code_page = QWidget()
        code_lay = QVBoxLayout(code_page)
        code_lay.setContentsMargins(0, 0, 0, 0)
        code_lay.setSpacing(2)
        code_lay.addLayout(code_bar)
        code_lay.addWidget(self.code, 1)
        self.split = QSplitter(Qt.Orientation.Vertical)
        self.split.addWidget(self.table)
        self.split.addWidget(code_page)
        self.split.setStretchFactor(0, 1)
        self.split.setStretchFactor(1, 1)
        # the table's and the code's own minimums would add up past a short Run pane's height
        self.split.setMinimumHeight(90)

        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.button)
        top.addWidget(self.freezing)
        top.addWidget(self.mode)
        top.addStretch(1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 4, 0, 0)
        lay.setSpacing(4)
        lay.addLayout(top)
        lay.addWidget(self.status)
        lay.addWidget(self.mark)
        lay.addWidget(self.note)
        lay.addWidget(self.split, 1)
        self.slot = ResultSlot([self.status, self.mark, self.split], self.note)

    # -- asking -------------------------------------------------------------------------------
    def compare(self) -> None:
        cursor = self._cursor()
        if cursor is None:
            self.status.setText("Open a model first.")
            return
        state = self._state()
        self.slot.set(ResultStamp.of(state, cursor))
        self.result = None
        self._fill([])
        self.mark.setVisible(False)
        self.button.setEnabled(False)
        if self._ran_at() != cursor and not (state and state.get("structure_only")):
            self._after_run = cursor
            self.status.setText(f"Building and running step {cursor} with TVM first (TVM's side), then "
                                "compiling with torch.compile…")
            self._run()
            return
        self._ask_peer(cursor)

    def _ask_peer(self, cursor: int) -> None:
        self._after_run = None
        self.status.setText(f"Compiling step {cursor}'s model with torch.compile (inductor) and timing its "
                            "kernels; this takes 20–100 s…")
        freezing = self.freezing.isChecked()
        self.mode.setText(f"compiling with {mode_text(freezing)}")
        self._rid = self._ask("peer", "peer", step=cursor, freezing=freezing)

    def run_done(self, ok: bool) -> None:
        """The Run pane's Build & Run is in (`ok`) or failed: ask for the peer if it waited for it."""
        step, cursor = self._after_run, self._cursor()
        if step is None:
            return
        if step != cursor:
            self._after_run = None
            self.button.setEnabled(True)
            self.status.setText(f"Not compared: the cursor moved from step {step} to {cursor} during the run.")
            return
        if not ok:
            self._after_run = None
            self.button.setEnabled(True)
            self.status.setText(f"Not compared: Build & Run of step {step} gave no TVM times (the Run pane says why).")
            return
        self._ask_peer(step)

    def on_progress(self, rid: int, text: str, fraction) -> None:
        if rid == self._rid and self.result is None and self._after_run is None:
            self.status.setText(f"{text}…" if not text.endswith("…") else text)

    # -- showing ------------------------------------------------------------------------------
    def check(self, state: State | None) -> str | None:
        """Grey the comparison once it is not for what is open, or the cursor is at another step
        (its kernels are the step's: a row would link to another step's functions)."""
        stamp, cursor = self.slot.stamp, self._cursor()
        away = None
        if stamp is not None and stamp.step is not None and cursor != stamp.step:
            away = f"it is for {stamp.what()}; the cursor is at step {cursor}"
        return self.slot.check(state, away)

    def clear(self) -> None:
        self.slot.clear()
        self.result = None
        self._rid = self._after_run = None
        self._fill([])
        self.mark.setVisible(False)
        self.button.setEnabled(True)
        self.mode.setText("")
        self.status.setStyleSheet("")
        self.status.setText(INTRO)

    def _mode_changed(self, _on: bool = False) -> None:
        """Say which mode the result shown was compiled in, and when the box asks for the other."""
        if self.result is None or self.result.get("freezing") is None:
            return
        shown, asked = bool(self.result["freezing"]), self.freezing.isChecked()
        self.mode.setText(f"shown: {mode_text(shown)}" if shown == asked else
                          f"shown: {mode_text(shown)}; Compare for {mode_text(asked)}")
        self.mode.setToolTip(f"The comparison shown was compiled with {mode_text(shown)}"
                             + ("" if shown == asked else f"; Compare with torch.compile compiles with "
                                                          f"{mode_text(asked)}"))

    def show_result(self, r: dict) -> None:
        self.result = r
        self.button.setEnabled(True)
        self._mode_changed()
        if r.get("error"):
            self._fill([])
            self.mark.setVisible(False)
            self.status.setStyleSheet(f"color: {themes.colors().bad};")
            step = r.get("step") if r.get("step") is not None else (r.get("stamp") or {}).get("step")
            self.status.setText(f"torch.compile could not compare step {step}: {r['error']}")
            return
        self.status.setStyleSheet("")
        self.status.setText(summary_text(r))
        s = r.get("summary") or {}
        self.status.setToolTip("\n".join([str(r.get("attribution") or "")] + [
            f"TVM {'loses' if g in (s.get('tvm_loses') or []) else 'wins'}: {g.get('text', '')}"
            for g in (s.get("tvm_loses") or [])[:3] + (s.get("tvm_wins") or [])[:3]]))
        reliable = r.get("reliable") is not False
        self._headers(reliable, r.get("reason"))
        unsure = [g for g in (r.get("groups") or []) if g.get("unsure")]
        self.mark.setVisible(not reliable or bool(unsure))
        self.mark.setStyleSheet(f"color: {themes.colors().bad};")
        why = str(r.get("reason") or "no reason given")
        text = f"{UNRELIABLE} Times unreliable: {short(why, 110)}" if not reliable else ""
        if unsure:
            text += (" · " if text else f"{UNRELIABLE} ") + (
                f"{len(unsure)} group{'s' * (len(unsure) > 1)} unsure (faster than the CPU's peak), left out of the verdicts")
            why = "\n".join(([why] if not reliable else []) + [f"{nodes_text(list(g.get('fx_nodes') or []))}: "
                                                               f"{g['unsure']}" for g in unsure])
        self.mark.setText(text)
        self.mark.setToolTip(why)
        self._fill(list(r.get("groups") or []))

    def show_error(self, error: dict) -> None:
        self._after_run = None
        self.button.setEnabled(True)
        self.mode.setText("")
        msg = error.get("message", "failed")
        if error.get("hint"):
            msg += f"\nhint: {error['hint']}"
        self.status.setStyleSheet(f"color: {themes.colors().bad};")
        self.status.setText("Cancelled." if error.get("stage") == "cancelled" else f"Comparing with "
                            f"torch.compile failed: {msg}")
        self.status.setToolTip(error.get("detail") or "")

    def _headers(self, reliable: bool, reason) -> None:
        why = "" if reliable else f"Times unreliable: {reason or 'no reason given'}"
        for c, name in enumerate(COLUMNS):
            head = QTableWidgetItem(f"{name} {UNRELIABLE}" if why and "ms" in name else name)
            head.setToolTip(why if why and "ms" in name else TIPS.get(name, ""))
            self.table.setHorizontalHeaderItem(c, head)

    def _fill(self, groups: list[dict]) -> None:
        c = themes.colors()
        self.rows = groups
        self.table.setSortingEnabled(False)
        self.table.clearSelection()
        self.table.setRowCount(len(groups))
        for i, g in enumerate(groups):
            nodes = list(g.get("fx_nodes") or [])
            first = QTableWidgetItem(nodes_text(nodes))
            first.setToolTip("\n".join(nodes))
            first.setData(Qt.ItemDataRole.UserRole, i)
            tvm_k, ind_k = g.get("tvm_kernels") or [], g.get("inductor_kernels") or []
            diff = g.get("diff_ms")
            faster = {"tvm": "TVM", "inductor": "Inductor", "same": "same"}.get(g.get("faster") or "", "—")
            unsure = g.get("unsure")
            if unsure:
                faster = f"{UNRELIABLE} unsure"
            cells = [first, _listed(tvm_k), _time(g.get("tvm_ms")), _listed(ind_k), _time(g.get("inductor_ms")),
                     # a time that cannot be true is not ranked among the differences: last
                     Num(-1.0 if diff is None or unsure else abs(float(diff)),
                         "—" if diff is None else f"{float(diff):+.4g}{' ?' if unsure else ''}"),
                     QTableWidgetItem(faster)]
            if unsure:
                for cell in (cells[0], cells[-1]):
                    cell.setToolTip(f"Unsure: {unsure}" + (f"\n{first.toolTip()}" if cell is cells[0] else ""))
                cells[-1].setForeground(QColor(c.bad))
            elif g.get("faster") in ("tvm", "inductor"):
                cells[-1].setForeground(QColor(c.ok if g["faster"] == "tvm" else c.bad))
            for j, item in enumerate(cells):
                self.table.setItem(i, j, item)
        self.table.setSortingEnabled(True)
        self.table.sortItems(COLUMNS.index("diff ms"), Qt.SortOrder.DescendingOrder)
        self.tvm_label.setText("")
        self.kernel_box.clear()
        self.code.set_text("")
        if groups:
            self.table.resizeColumnsToContents()
            # long fused names must leave the figures in view (the tooltips hold them whole)
            for col in (0, 1, 3):
                self.table.setColumnWidth(col, min(self.table.columnWidth(col), NAME_WIDTH))

    def group_at(self, row: int) -> dict | None:
        item = self.table.item(row, 0)
        i = item.data(Qt.ItemDataRole.UserRole) if item is not None else None
        return self.rows[i] if isinstance(i, int) and 0 <= i < len(self.rows) else None

    def _row_selected(self) -> None:
        items = self.table.selectedItems()
        g = self.group_at(items[0].row()) if items else None
        if g is None:
            return
        tvm = g.get("tvm_kernels") or []
        links = ", ".join(f'<a href="{html.escape(k)}">{html.escape(k)}</a>' for k in tvm)
        self.tvm_label.setText(f"TVM: {links} ({_ms(g.get('tvm_ms'))} ms)" if tvm else
                               "TVM: no kernel computes these nodes")
        self.tvm_label.setToolTip("Click a name to show its TensorIR")
        kernels = {k.get("name"): k for k in (self.result or {}).get("kernels") or []}
        names = [n for n in g.get("inductor_kernels") or [] if n in kernels]
        # the slowest first: where the time goes is the code worth reading
        names.sort(key=lambda n: -float(kernels[n].get("ms") or 0))
        self.kernel_box.blockSignals(True)
        self.kernel_box.clear()
        for n in names:
            k = kernels[n]
            self.kernel_box.addItem(f"{n} ({_ms(k.get('ms'))} ms, {k.get('kind', '')})", n)
        self.kernel_box.blockSignals(False)
        self._show_code()
        self.hub.select_fx_nodes(list(g.get("fx_nodes") or []))

    def _show_code(self, _index: int = 0) -> None:
        name = self.kernel_box.currentData()
        k = next((k for k in (self.result or {}).get("kernels") or [] if k.get("name") == name), None)
        if k is None:
            self.code.set_text("# Inductor has no kernel for these nodes", language="python")
            return
        note = f"provenance: {k['provenance_note']}\n" if k.get("provenance_note") else ""
        if k.get("kind") == "generated":
            self.code.set_text((f"// {note}" if note else "") + str(k.get("code") or ""), language="cpp")
            return
        # a library call's "code" is the line of Inductor's Python wrapper that calls it
        self.code.set_text((f"# {note}" if note else "") + LIBRARY_NOTE + str(k.get("code") or ""), language="python")


def _listed(names: list[str]) -> QTableWidgetItem:
    item = QTableWidgetItem(" + ".join(names) if names else "—")
    item.setToolTip("\n".join(names))
    return item


def _time(ms) -> QTableWidgetItem:
    return Num(-1.0 if ms is None else float(ms), _ms(ms))
