"""The Run pane's Peer tab on the real engine: Compare with torch.compile builds and runs the step
with TVM first, then asks for the peer; the table covers the groups, a row selects its FX nodes and
shows the Inductor kernel's code; the comparison greys when the cursor leaves its step; a model
torch.compile cannot compile says why instead of showing an empty table."""
from __future__ import annotations

import os
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest
from PySide6.QtCore import QCoreApplication

from irviz.ui.panes.peer_tab import nodes_text
from irviz.ui.result_stamp import is_faded

T = 400  # s: the engine imports torch and TVM, and torch.compile compiles the model
SHOTS = os.environ.get("IRVIZ_SHOTS", "/tmp")


def _wait(cond, timeout: float = T) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise TimeoutError("condition not met")
        QCoreApplication.processEvents()
        time.sleep(0.01)


def _settled(win) -> None:
    _wait(lambda: win.all_filled() or win.last_error is not None)
    assert win.last_error is None, win.last_error


@pytest.fixture(scope="module")
def compared(real_window):
    """small_cnn run to its last step, compared once with torch.compile from the Peer tab; the
    engine's replies in the order they came."""
    win = real_window
    replies: list[str] = []
    win.bridge.replied.connect(lambda rid, cmd, result: replies.append(cmd))
    win.open_spec("sample:small_cnn")
    _wait(lambda: bool(win.state.get("model")) or win.last_error is not None)
    _settled(win)
    win.run_to_end()
    _wait(lambda: not win.state.get("planned"))
    _settled(win)
    assert win.run.result is None  # TVM has not run: the tab must have it run first
    peer = win.run.peer
    win.run.tabs.setCurrentWidget(peer)
    peer.button.click()
    assert not peer.button.isEnabled()
    _wait(lambda: peer.result is not None or peer.button.isEnabled())
    assert peer.result is not None, peer.status.text()
    _settled(win)
    return win, replies


def test_compare_runs_the_step_with_tvm_first_then_asks_for_its_peer(compared):
    win, replies = compared
    r = win.run.peer.result
    assert replies.index("build_run") < replies.index("peer")
    cursor = win.state["cursor"]
    assert win.run.built_step == cursor and r["step"] == cursor and r["tvm_ran"] is True
    assert r["error"] is None and r["stamp"]["step"] == cursor
    assert win.run.peer.slot.stamp.step == cursor and not win.run.peer.slot.stale


def test_rows_cover_the_groups_sorted_by_difference_with_the_summary(compared):
    win, _ = compared
    peer = win.run.peer
    r = peer.result
    groups = r["groups"]
    assert groups and peer.table.rowCount() == len(groups)
    shown = [peer.group_at(i) for i in range(peer.table.rowCount())]
    assert sorted(g["group"] for g in shown) == sorted(g["group"] for g in groups)
    diffs = [abs(g["diff_ms"]) if g["diff_ms"] is not None else -1.0 for g in shown]
    assert diffs == sorted(diffs, reverse=True)
    for i, g in enumerate(shown):
        assert peer.table.item(i, 0).toolTip().split("\n") == g["fx_nodes"]
        assert peer.table.item(i, 1).text() == " + ".join(g["tvm_kernels"])
        assert peer.table.item(i, 3).text() == " + ".join(g["inductor_kernels"])
    text = peer.status.text()
    assert "TVM slower on groups worth" in text and f"{len(r['kernels'])} kernels" in text
    loses, wins = r["summary"]["tvm_loses"], r["summary"]["tvm_wins"]
    for most, g in (("loses", loses[0] if loses else None), ("wins", wins[0] if wins else None)):
        if g is None:  # no group where TVM loses (or wins): the summary names none
            assert f"{most} most on" not in text
        else:
            assert f"{most} most on {nodes_text(g['fx_nodes'])}: TVM" in text
    ms_head = peer.table.horizontalHeaderItem(2).text()
    assert peer.mark.isVisibleTo(peer) == (not r["reliable"]) == ms_head.endswith("⚠")
    if not r["reliable"]:
        assert peer.mark.toolTip() == r["reason"]


def test_a_row_selects_its_fx_nodes_and_shows_the_inductor_kernels_code(compared):
    win, _ = compared
    peer = win.run.peer
    kernels = {k["name"]: k for k in peer.result["kernels"]}
    row = next(i for i in range(peer.table.rowCount())
               if any(kernels[n]["kind"] == "generated" for n in peer.group_at(i)["inductor_kernels"])
               and len(peer.group_at(i)["fx_nodes"]) > 1)
    g = peer.group_at(row)
    peer.table.selectRow(row)
    _wait(lambda: win.hub.selection is not None and win.hub.selection.fx == g["fx_nodes"], 10)
    assert win.fx.linked_ids() == g["fx_nodes"]
    assert win.relax.linked_ids() and win.hub.selection.tir
    for name in g["tvm_kernels"]:
        assert name in peer.tvm_label.text()
    slowest = max(g["inductor_kernels"], key=lambda n: kernels[n]["ms"] or 0)
    assert peer.kernel_box.currentData() == slowest
    generated = next(i for i in range(peer.kernel_box.count())
                     if kernels[peer.kernel_box.itemData(i)]["kind"] == "generated")
    peer.kernel_box.setCurrentIndex(generated)
    code = kernels[peer.kernel_box.itemData(generated)]["code"]
    assert peer.code.text() == code and 'extern "C"' in code and peer.code.language == "cpp"
    assert peer.code.isReadOnly()


def test_the_comparison_greys_when_the_cursor_leaves_its_step(compared):
    win, _ = compared
    peer = win.run.peer
    at = win.state["cursor"]
    win.back()
    _wait(lambda: win.state.get("cursor") == at - 1)
    _settled(win)
    assert peer.slot.stale and is_faded(peer.split) and not peer.table.isEnabled()
    assert f"the cursor is at step {at - 1}" in peer.note.text() and peer.note.isVisibleTo(peer)
    win.jump(at)
    _wait(lambda: win.state.get("cursor") == at)
    _settled(win)
    assert not peer.slot.stale and peer.table.isEnabled() and not peer.note.isVisibleTo(peer)


def test_a_model_torch_compile_cannot_compile_says_why(compared):
    win, _ = compared
    peer = win.run.peer
    win.open_spec("sample:course_emit_te")   # an IR file: no PyTorch model behind it
    _wait(lambda: win.state.get("model") and win.state.get("importer") == "tvmscript")
    _settled(win)
    assert peer.result is None and peer.table.rowCount() == 0  # the other model's comparison went
    peer.button.click()
    _wait(lambda: peer.result is not None or peer.button.isEnabled())
    assert peer.result is not None and peer.result["error"]
    assert peer.table.rowCount() == 0
    assert peer.status.text() == (f"torch.compile could not compare step 0: {peer.result['error']}")
    assert "no PyTorch model" in peer.status.text()
