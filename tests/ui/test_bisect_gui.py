"""Pipeline pane ▸ Find first bad pass with the real engine: progress per step checked, then the
pane jumps to the wrong pass and says why; Write repro folder writes the folder of a step."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from pathlib import Path

import pytest

pytest.importorskip("pytestqt")

from irviz.ui.bridge import EngineBridge
from irviz.ui.events import EventHub
from irviz.ui.panes.diff import DiffPane
from irviz.ui.panes.pipeline import PipelinePane

SLOW = 300_000
PASSES = str(Path(__file__).resolve().parents[1] / "core" / "data" / "bisect_passes.py")
PIPELINE = ("CanonicalizeBindings,ConvertToDataflow,WrongAddToSubtract,LegalizeOps,"
            "AnnotateTIROpPattern,FoldConstant,FuseOps,FuseTIR")


def test_find_first_bad_pass_jumps_there_and_writes_a_repro(qtbot, qapp, tmp_path):
    bridge = EngineBridge(spare=False)
    try:
        hub = EventHub()
        pane = PipelinePane(bridge, hub)
        diff = DiffPane(bridge, hub)
        qtbot.addWidget(diff)
        pane.resize(560, 640)
        qtbot.addWidget(pane)
        done = []
        bridge.replied.connect(lambda i, c, r: done.append(c))
        bridge.request("load_pass_file", path=PASSES)
        bridge.request("open", spec="sample:small_cnn", pipeline=PIPELINE)
        qtbot.waitUntil(lambda: "open" in done and bool(pane.state and pane.state.get("model")), timeout=SLOW)
        assert pane.bisect_button.isEnabled()
        progress = []
        bridge.progress.connect(lambda i, t, f: progress.append(t))
        pane.bisect_button.click()
        assert not pane.bisect_button.isEnabled()  # one bisect at a time
        qtbot.waitUntil(lambda: pane.bisect_result is not None, timeout=SLOW)
        qtbot.waitUntil(lambda: pane.state.get("cursor") == 3, timeout=SLOW)
        fb = pane.bisect_result["first_bad"]
        assert fb["pass"] == "WrongAddToSubtract" and fb["stage"] == "compare"
        assert sum(t.startswith("Bisect: building") for t in progress) == len(
            pane.bisect_result["steps_checked"])
        assert pane.info.text().startswith("First bad pass: step 3 WrongAddToSubtract (compare)")
        assert pane.table.item(3, 0).text() == "✗ 3" and pane.table.item(0, 0).text() == "✓ 0"
        pane.grab().save(str(Path(os.environ.get("IRVIZ_SHOTS", tmp_path)) / "pipeline_bisect.png"))

        # the bad pass's diff opens with the bindings whose values diverge marked, the subtract first
        marks = pane.bisect_result["diverging"]
        assert marks["step"] == 3 and marks["first"] in marks["bindings"]
        assert "binding" in pane.info.text() and "marked in the Diff pane" in pane.info.text()
        qtbot.waitUntil(lambda: diff.result is not None and diff.pair == (2, 3), timeout=SLOW)
        right = diff.view.right.toPlainText().split("\n")
        marked = [right[b] for b in diff.view.marked_blocks]
        first = next(line for line in marked if line.strip().startswith(marks["first"]))
        assert "R.subtract(" in first
        assert "diverge from torch" in diff.info.text()

        pane.jump(0)  # the cursor moves away: the repro is still the bad step's
        qtbot.waitUntil(lambda: pane.state.get("cursor") == 0, timeout=SLOW)
        pane.write_repro(str(tmp_path / "repro"))
        qtbot.waitUntil(lambda: "write_repro" in done, timeout=SLOW)
        assert (tmp_path / "repro" / "after.py").is_file() and (tmp_path / "repro" / "repro.py").is_file()
        assert "WrongAddToSubtract" in (tmp_path / "repro" / "README.txt").read_text()
        assert pane.info.text().startswith("Wrote the repro folder of step 3 (WrongAddToSubtract) to ")
        pane.grab().save(str(Path(os.environ.get("IRVIZ_SHOTS", tmp_path)) / "pipeline_repro.png"))
    finally:
        bridge.shutdown()
