"""The Pipeline pane's debugging job: Find first bad pass (a bisect run by the engine), its verdict
and marks, and the repro folder of the step the user means."""
from __future__ import annotations

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QFileDialog, QPushButton, QWidget

from irviz.ui.panes.pipeline_link import PaneLink
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


class BisectActions(QObject):
    """Owned by the Pipeline pane: its two buttons, the last bisect's verdict and the repro folder.
    The pane routes the `bisect` and `repro` replies here and asks `verdicts()` for its marks."""

    changed = Signal()   # a verdict came: the step table and the buttons show it

    def __init__(self, link: PaneLink, hub, dialog_parent: QWidget):
        super().__init__(dialog_parent)
        self._link = link
        self._hub = hub
        self._dialog_parent = dialog_parent
        self.repro_of = ""  # "step 3 (WrongAddToSubtract)": what the repro folder being written is of
        self.bisect_result: dict | None = None
        self.bisect_stamp: ResultStamp | None = None   # the pipeline the bisect checked
        self._bisect_rid: int | None = None
        self._bisect_text = ""
        self._marks_shown = False
        self.bisect_button = QPushButton("Find first bad pass")
        self.bisect_button.setToolTip("Build and run the steps that changed the module, binary search "
                                      "for the first whose outputs differ from the reference or that "
                                      "fails to build or run, and jump there")
        self.bisect_button.clicked.connect(self.find_first_bad_pass)
        self.repro_button = QPushButton("Write repro folder…")
        self.repro_button.setToolTip("The cursor step's pass (after Find first bad pass: the bad "
                                     "step's) as a folder anyone can run: before.py, after.py, "
                                     "inputs, expected outputs, repro.py (tvm + numpy only)")
        self.repro_button.clicked.connect(self.write_repro_dialog)

    def update_buttons(self, has_model: bool) -> None:
        steps, planned = self._link.steps(), self._link.planned()
        self.bisect_button.setEnabled(has_model and self._bisect_rid is None
                                      and (len(steps) > 1 or bool(planned)))
        self.repro_button.setEnabled(has_model)

    def reset(self) -> None:
        self.bisect_result = self.bisect_stamp = None

    def find_first_bad_pass(self) -> None:
        """Ask the engine to bisect (it applies the planned passes first); progress per step checked
        shows in the info line, then the pane jumps to the bad step and says why."""
        self.bisect_result = None
        # the engine applies the planned passes first: the whole pipeline is what it checks
        self.bisect_stamp = ResultStamp.of(self._link.state())
        self._hub.mark_diverging({})
        self._bisect_rid = self._link.ask("bisect", "bisect")
        self._link.info.setText("Find first bad pass: applying the planned passes…")
        state = self._link.state()
        self.update_buttons(bool(state and state.get("model")))

    def on_bisect_reply(self, result: dict | None) -> None:
        self._bisect_rid = None
        self.show_bisect(result or {})

    def bisect_failed(self) -> None:
        self._bisect_rid = None
        self.changed.emit()

    def on_progress(self, rid: int, text: str, _fraction: float) -> None:
        if rid == self._bisect_rid and text.startswith("Bisect"):
            self._link.info.setText(text)

    def verdicts(self) -> dict:
        """{step index: check} of the last bisect, for the steps that are still the same passes."""
        stamp = self.bisect_stamp
        if stamp is None:
            return {}
        state = self._link.state()
        names = {s.get("index"): s.get("pass") for s in self._link.steps()}
        return {c["index"]: c for c in (self.bisect_result or {}).get("steps_checked") or []
                if names.get(c["index"]) == c["pass"] and stamp.stale_reason(state, c["index"]) is None}

    def verdict_text(self, cursor: int | None) -> str | None:
        """For a new state: the verdict while the cursor is on the bad step it still holds for; the
        Diff pane's marks go once the bad step is gone."""
        fb = (self.bisect_result or {}).get("first_bad")
        verdicts = self.verdicts()
        if fb and fb.get("index") not in verdicts and self._marks_shown:
            self._marks_shown = False
            self._hub.mark_diverging({})  # the Diff pane's marks were for that bad step
        if fb and cursor == fb.get("index") and fb.get("index") in verdicts:
            return self._bisect_text  # the jump to the bad step keeps saying why
        return None

    def show_bisect(self, result: dict) -> None:
        info = self._link.info
        self.bisect_result = result
        if self.bisect_stamp is None:
            self.bisect_stamp = ResultStamp.of(self._link.state())
        self._hub.bisectFound.emit({"result": result, "stamp": self.bisect_stamp})
        fb = result.get("first_bad")
        checked = len(result.get("steps_checked") or [])
        if fb is None:
            text = (f"Every step matches {result.get('reference')}: checked {checked} step(s) "
                    f"in {result.get('seconds', 0):.1f} s")
        else:
            why = (fb.get("reason") or "").splitlines()[0]
            text = f"First bad pass: step {fb['index']} {fb['pass']} ({fb['stage']}): {why}"
            text += _diverging_text(result.get("diverging"))
            info.setToolTip(fb.get("reason") or "")
            # before the jump: the diff of the bad step opens with them marked
            self._hub.mark_diverging((result.get("diverging") or {}) if "bindings" in
                                    (result.get("diverging") or {}) else {})
            self._marks_shown = True
            # the engine applied the planned passes first: the step may be new to this pane
            target = fb["index"] if fb["stage"] != "pass" else fb["index"] - 1
            self._link.request("jump", index=int(target))
            self._hub.select_step(target)
        info.setWordWrap(True)  # the verdict, its reason and the marks: all worth reading
        info.setText(text)
        self._bisect_text = text
        self.changed.emit()

    def write_repro_dialog(self) -> None:
        out = QFileDialog.getExistingDirectory(self._dialog_parent, "Write the repro folder into")
        if out:
            self.write_repro(out)

    def repro_step(self) -> int | None:
        """The step the user means: the bad step of a bisect that still holds, else the cursor (a
        highlighted row is only where the user last clicked)."""
        fb = (self.bisect_result or {}).get("first_bad")
        if fb and fb.get("stage") != "pass" and fb.get("index") in self.verdicts():
            return int(fb["index"])
        return self._link.cursor()

    def write_repro(self, out_dir: str, step: int | None = None) -> None:
        step = self.repro_step() if step is None else step
        args: dict[str, object] = {"out_dir": out_dir}
        if step is not None:
            args["step"] = int(step)
        self._link.ask("repro", "write_repro", **args)
        name = next((s.get("pass") for s in self._link.steps() if s.get("index") == step), "")
        self.repro_of = (f"step {step if step is not None else 'the cursor'}"
                         + (f" ({name})" if name else ""))
        self._link.info.setText(f"Writing the repro folder of {self.repro_of}…")

    def on_repro_reply(self, result: dict | None) -> None:
        path = (result or {}).get("path", "")
        of = self.repro_of
        self._link.info.setText(f"Wrote the repro folder{' of ' + of if of else ''} to {path} "
                                f"(python {path}/repro.py)")
        self._link.info.setToolTip("\n".join((result or {}).get("files") or []))
