"""The Pipeline pane's code totals: per step, how many vector instructions and FMAs the step's
kernels compile to on a target, so a pass that breaks vectorisation shows as a jump in a column.
Counted on request (Count code), one step per engine request in turn, so stepping waits for one
step's compile at most; a step that changed nothing shares the totals of the step before it."""
from __future__ import annotations

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QComboBox, QPushButton

from irviz.protocol.commands import StepEntry
from irviz.ui.panes.kernel_code_tab import HOST, fill_target_box
from irviz.core.views.counts_text import is_arm, widths_text
from irviz.ui.panes.pipeline_link import PaneLink
from irviz.ui.result_stamp import ResultStamp

# (header, tooltip) of the step table's code columns
CODE_COLUMNS = [("Vec", "Vector instructions of the step's kernels on the Count code target "
                        "(tooltip: their widths)"),
                ("FMA", "Fused multiply-adds of the step's kernels on the Count code target")]
DROP = 0.5  # a column falling below this share of the previous step's value is marked


class CodeTotals(QObject):
    """Owned by the Pipeline pane, which routes the `code_totals` replies here and shows the
    cells it gives (code_cells) in its step table."""

    changed = Signal()        # the totals changed: the step table shows them anew
    counted = Signal(int)     # every step is counted: the row to bring the code columns into view at

    def __init__(self, link: PaneLink, parent: QObject | None = None):
        super().__init__(parent)
        self._link = link
        self._shown_target = HOST  # the Pipeline's target, which the box follows unless chosen apart
        self.code_totals: dict[int, dict] = {}  # step index -> {"totals", "kind", "target"} or {"error"}
        self.code_stamp: ResultStamp | None = None
        self._code_queue: list[int] = []
        self._code_asked = -1  # the step counted last (-1: none yet)
        self._code_for = "host"
        self.code_target = QComboBox()
        self.code_target.setEditable(True)
        self.code_target.addItem(HOST)  # the engine's list_targets fills the rest (TargetBox)
        self.code_target.setToolTip("The target Count code compiles for (a name, or a TVM target as JSON)")
        self.code_button = QPushButton("Count code")
        self.code_button.setToolTip("Compile every step's kernels for the target and count their vector "
                                    "instructions and FMAs (the Vec and FMA columns)")
        self.code_button.clicked.connect(self.count_code)

    def controls(self) -> list:
        return [self.code_button, self.code_target]

    def list_targets(self, targets: list[dict]) -> None:
        fill_target_box(self.code_target, targets)

    def follow_target(self, name: str) -> None:
        """The Pipeline's target changed: count for it too, unless another was chosen here."""
        if self.code_target.currentText().strip() in ("", self._shown_target):
            self.code_target.setEditText(name)
        self._shown_target = name

    def reset(self) -> None:
        self.code_totals = {}
        self.code_stamp = None
        self._code_queue = []
        self.code_button.setEnabled(True)

    def count_code(self) -> None:
        """Count the code of every recorded step that has kernels, one request at a time."""
        steps = self._link.steps()
        if not steps:
            return
        self.code_totals = {}
        self.code_stamp = ResultStamp.of(self._link.state())
        self._code_for = self.code_target.currentText().strip() or "host"
        self._code_queue = [s["index"] for s in steps
                            if (size := s.get("size")) and size.get("prim_funcs") and (s.get("changed") or s["index"] == 0)]
        self._next_count()

    def _next_count(self) -> None:
        self.changed.emit()
        if not self._code_queue:
            self.code_button.setEnabled(True)
            return
        self.code_button.setEnabled(False)
        index = self._code_queue.pop(0)
        self._code_asked = index
        self._link.info.setText(f"Counting the code of step {index} for {self._code_for}… "
                          f"({len(self._code_queue)} more)")
        self._link.ask("code_totals", "kernel_code", step=index, target=self._code_for)

    def on_code_reply(self, result: dict) -> None:
        r = result or {}
        self.code_totals[int(r.get("step", self._code_asked))] = {
            "totals": r.get("totals") or {}, "kind": r.get("kind"), "target": r.get("target"),
            "target_name": r.get("target_name"),
            "errors": [k for k, v in (r.get("kernels") or {}).items() if v.get("error")]}
        self._next_count()
        if not self._code_queue:
            steps = self._link.steps()
            n = sum(1 for st in steps if (self.code_entry(st) or {}).get("totals") is not None)
            self._link.info.setText(f"Counted the code of {n} step{'s' if n != 1 else ''} for {self._code_for}: "
                              f"the Vec and FMA columns")
            row = next((r for r, s in enumerate(steps) if self.code_entry(s)), None)
            if row is not None:
                self.counted.emit(row)

    def on_code_error(self, error: dict) -> None:
        self.code_totals[self._code_asked] = {"error": error.get("message") or "failed"}
        self._next_count()

    def code_entry(self, step: StepEntry) -> dict | None:
        """The step's totals; a step that changed nothing has those of the step before it."""
        index = step.get("index", -1)
        if self.code_stamp is None or self.code_stamp.stale_reason(self._link.state(), index) is not None:
            return None
        e = self.code_totals.get(index)
        steps = self._link.steps()
        if e is None and not step.get("changed") and isinstance(index, int) and 0 < index < len(steps):
            return self.code_entry(steps[index - 1])
        return e

    def code_cells(self, step: StepEntry, before: dict | None) -> list[tuple[str, str, bool]]:
        """(text, tooltip, dropped) of the Vec and FMA cells of a step; `before`: the entry of the
        step before it, for the jump."""
        e = self.code_entry(step)
        if e is None:
            return [("", "", False), ("", "", False)]
        if e.get("error"):
            return [("✗", f"not compiled: {e['error']}", False)] * 2
        if e.get("kind") not in (None, "llvm"):
            return [("—", f"{e.get('kind')} source: no CPU instructions to count", False)] * 2
        t = e.get("totals") or {}
        bt = (before or {}).get("totals") or {}
        out = []
        for key, what in (("vector", "vector instructions"), ("fma", "FMAs")):
            v = int(t.get(key) or 0)
            was = bt.get(key)
            dropped = was is not None and int(was) > 0 and v < DROP * int(was)
            tip = f"{v} {what} on {e.get('target_name')}"
            if key == "vector" and t.get("vector_bits"):
                tip += f": {widths_text(t['vector_bits'], is_arm(e.get('target')))}"
            if was is not None and int(was) != v:
                tip += f" (the step before: {was})"
            if e.get("errors"):
                tip += f"\nnot compiled: {', '.join(e['errors'])}"
            out.append((str(v), tip, dropped))
        return out
