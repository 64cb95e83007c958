"""The compare view against a fake engine: aligned rows, one-sided colours, which steps a row
diffs, and the diff-of-diffs mode refusing a one-sided row."""
from PySide6.QtCore import QObject, QTimer, Signal

from irviz.ui.events import EventHub
from irviz.ui.panes.compare import ONLY_A, ComparePane

RESULT = {
    "pipelines": [
        {"pipeline": "zero", "steps": ["import", "LegalizeOps", "AnnotateTIROpPattern", "FoldConstant",
                                       "FuseOps", "FuseTIR"], "tvm_ms": 0.2, "max_abs_error": 2e-7,
         "kernels": 2, "build_seconds": 0.3, "error": None},
        {"pipeline": "LegalizeOps,AnnotateTIROpPattern,FuseOps,FuseTIR",
         "steps": ["import", "LegalizeOps", "AnnotateTIROpPattern", "FuseOps", "FuseTIR"], "tvm_ms": 0.3,
         "max_abs_error": 2e-7, "kernels": 4, "build_seconds": 0.5, "error": None},
    ],
    "aligned": [[0, 0], [1, 1], [2, 2], [3, None], [4, 3], [5, 4]],
}


class FakeBridge(QObject):
    replied = Signal(int, str, object)
    failed = Signal(int, str, dict)
    stateChanged = Signal(dict)

    def __init__(self):
        super().__init__()
        self.sent = []

    def request(self, cmd, supersede=None, **args):
        self.sent.append((cmd, args))
        rid = len(self.sent)
        if cmd == "compare":
            QTimer.singleShot(0, lambda: self.replied.emit(rid, cmd, RESULT))
        else:
            reply = {"a": args["a"], "b": args["b"], "pass_a": "x", "pass_b": "y", "unified": "",
                     "functions": [], "graph": {"functions": {"only_a": [], "only_b": ["transpose"],
                                                             "changed": ["main"], "same": 2},
                                                "nodes": {}}}
            QTimer.singleShot(0, lambda: self.replied.emit(rid, cmd, reply))
        return rid


def test_compare_view_rows_and_pairs(qtbot):
    bridge = FakeBridge()
    pane = ComparePane(bridge, EventHub())
    qtbot.addWidget(pane)
    bridge.stateChanged.emit({"model": "mlp", "pipeline_text": "zero"})
    assert pane.a_label.text() == "A: zero"
    assert pane.compare("  ") is None and "Type pipeline B" in pane.info.text()
    pane.compare("LegalizeOps,AnnotateTIROpPattern,FuseOps,FuseTIR")
    qtbot.waitUntil(lambda: pane.diff_result is not None)
    assert pane.rows.rowCount() == 2 and pane.rows.item(1, 5).text() == "4"
    assert pane.steps.rowCount() == 6
    assert pane.steps.item(3, 1).text() == "FoldConstant" and pane.steps.item(3, 3).text() == ""
    assert pane.steps.item(3, 0).background().color() == ONLY_A
    # the last row is selected first: the two final steps
    assert bridge.sent[-1] == ("compare_diff", {"a": 5, "b": 4, "mode": "pair"})
    assert "only in B 1" in pane.diff_info.text()
    # a one-sided row compares with what B had at that point
    pane.steps.selectRow(3)
    assert bridge.sent[-1] == ("compare_diff", {"a": 3, "b": 2, "mode": "pair"})
    n = len(bridge.sent)
    pane.mode.setCurrentIndex(1)
    assert len(bridge.sent) == n and "pass both pipelines ran" in pane.diff_info.text()
    pane.steps.selectRow(4)
    assert bridge.sent[-1] == ("compare_diff", {"a": 4, "b": 3, "mode": "pass"})
