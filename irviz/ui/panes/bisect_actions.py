"""The Pipeline pane's debugging job: Find first bad pass (a bisect run by the engine), its verdict
and marks, and the repro folder of the step the user means."""
from __future__ import annotations

from PySide6.QtWidgets import QFileDialog

from irviz.ui.result_stamp import ResultStamp


def _diverging_text(d: dict | None) -> str:
    """What the intermediates at the bad step say, for the status line after a bisect."""
    if not d:
        return ""
    if d.get("error"):
        return f" · intermediates not compared: {d['error']}"
    n = len(d.get("bindings") or {})
    if not n:
        return " · no binding diverges from torch on its own"
    return (f" · {n} binding{'s' if n != 1 else ''} diverge{'' if n != 1 else 's'} from torch, first "
            f"{d.get('first')} (FX {d.get('first_fx')}): marked in the Diff pane")



class BisectActions:
    """Mixed into PipelinePane, whose widgets (info line, steps) and state it uses."""

    repro_of = ""  # "step 3 (WrongAddToSubtract)": what the repro folder being written is of

    def find_first_bad_pass(self) -> None:
        """Ask the engine to bisect (it applies the planned passes first); progress per step checked
        shows in the info line, then the pane jumps to the bad step and says why."""
        self.bisect_result = None
        # the engine applies the planned passes first: the whole pipeline is what it checks
        self.bisect_stamp = ResultStamp.of(self.state)
        self.hub.mark_diverging({})
        self._bisect_rid = self.ask("bisect", "bisect")
        self.info.setText("Find first bad pass: applying the planned passes…")
        self._update_buttons()

    def _on_progress(self, rid: int, text: str, _fraction: float) -> None:
        if rid == self._bisect_rid and text.startswith("Bisect"):
            self.info.setText(text)

    def _verdicts(self) -> dict:
        """{step index: check} of the last bisect, for the steps that are still the same passes."""
        stamp = self.bisect_stamp
        if stamp is None:
            return {}
        names = {s.get("index"): s.get("pass") for s in self.steps}
        return {c["index"]: c for c in (self.bisect_result or {}).get("steps_checked") or []
                if names.get(c["index"]) == c["pass"] and stamp.stale_reason(self.state, c["index"]) is None}

    def show_bisect(self, result: dict) -> None:
        self.bisect_result = result
        if self.bisect_stamp is None:
            self.bisect_stamp = ResultStamp.of(self.state)
        self.hub.bisectFound.emit({"result": result, "stamp": self.bisect_stamp})
        fb = result.get("first_bad")
        checked = len(result.get("steps_checked") or [])
        if fb is None:
            text = (f"Every step matches {result.get('reference')}: checked {checked} step(s) "
                    f"in {result.get('seconds', 0):.1f} s")
        else:
            why = (fb.get("reason") or "").splitlines()[0]
            text = f"First bad pass: step {fb['index']} {fb['pass']} ({fb['stage']}): {why}"
            text += _diverging_text(result.get("diverging"))
            self.info.setToolTip(fb.get("reason") or "")
            # before the jump: the diff of the bad step opens with them marked
            self.hub.mark_diverging((result.get("diverging") or {}) if "bindings" in
                                    (result.get("diverging") or {}) else {})
            self._marks_shown = True
            # the engine applied the planned passes first: the step may be new to this pane
            target = fb["index"] if fb["stage"] != "pass" else fb["index"] - 1
            self.jump(target)
            self.hub.select_step(target)
        self.info.setWordWrap(True)  # the verdict, its reason and the marks: all worth reading
        self.info.setText(text)
        self._bisect_text = text
        if self.state:
            self._fill_steps(self.state)
        self._update_buttons()

    def write_repro_dialog(self) -> None:
        out = QFileDialog.getExistingDirectory(self, "Write the repro folder into")
        if out:
            self.write_repro(out)

    def repro_step(self) -> int | None:
        """The step the user means: the bad step of a bisect that still holds, else the cursor (a
        highlighted row is only where the user last clicked)."""
        fb = (self.bisect_result or {}).get("first_bad")
        if fb and fb.get("stage") != "pass" and fb.get("index") in self._verdicts():
            return int(fb["index"])
        return self.cursor_of(self.state)

    def write_repro(self, out_dir: str, step: int | None = None) -> None:
        step = self.repro_step() if step is None else step
        args = {"out_dir": out_dir}
        if step is not None:
            args["step"] = int(step)
        self.ask("repro", "write_repro", **args)
        name = next((s.get("pass") for s in self.steps if s.get("index") == step), "")
        self.repro_of = (f"step {step if step is not None else 'the cursor'}"
                         + (f" ({name})" if name else ""))
        self.info.setText(f"Writing the repro folder of {self.repro_of}…")

