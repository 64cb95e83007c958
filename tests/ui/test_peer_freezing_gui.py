"""Inductor's freezing in the app: the Peer tab asks for the mode its box says and tells which mode
the shown comparison was compiled in (and when the box asks for the other); File ▸ Export asks for
torch.compile beside TVM, with or without freezing, as `irviz export --peer inductor` does, and
remembers the choice. Fake engine and canned results: no compile."""
from __future__ import annotations

from fake_bridge import open_mlp

from irviz.protocol.commands import make_state
from irviz.ui.events import EventHub
from irviz.ui.export_dialog import ExportDialog, exported_text
from irviz.ui.panes.peer_tab import PeerTab


def peer_result(freezing: bool) -> dict:
    kernel = "torch.ops.mkldnn._linear_pointwise.default" if freezing else "extern_kernels.addmm"
    return {"compiler": "inductor", "freezing": freezing, "error": None, "step": 3, "tvm_ran": True,
            "threads": 1, "compile_seconds": 9.0, "total_ms": 0.02, "compiled_ms": 0.021, "reliable": True,
            "reason": None, "attribution": "split evenly",
            "kernels": [{"name": kernel, "kind": "library", "fx_nodes": ["linear", "relu"], "ms": 0.02,
                         "calls": 1, "code": f"buf0 = {kernel}(arg0_1)"}],
            "groups": [{"group": "linear", "fx_nodes": ["linear", "relu"], "tvm_kernels": ["fused_matmul_add_relu"],
                        "inductor_kernels": [kernel], "tvm_ms": 0.01, "inductor_ms": 0.02, "diff_ms": -0.01,
                        "faster": "tvm"}],
            "summary": {"tvm_loses": [], "tvm_wins": [], "tvm_loses_ms": 0.0, "tvm_wins_ms": 0.01}}


def test_peer_tab_asks_for_the_mode_its_box_says_and_labels_the_mode_shown(qtbot):
    sent = []
    tab = PeerTab(lambda purpose, cmd, **a: sent.append((cmd, a)) or len(sent), EventHub(), lambda: 3,
                  lambda: 3, lambda: None)
    qtbot.addWidget(tab)
    assert not tab.freezing.isChecked() and "freezing=True" in tab.freezing.toolTip()
    tab.freezing.setChecked(True)
    tab.compare()
    assert sent == [("peer", {"step": 3, "freezing": True})]
    tab.show_result(peer_result(True))
    assert tab.status.text().startswith("Step 3 (freezing): Inductor's 1 kernels")
    assert tab.mode.text() == "shown: freezing" and tab.table.rowCount() == 1
    tab.freezing.setChecked(False)  # the box no longer matches what is shown: it says so
    assert tab.mode.text() == "shown: freezing; Compare for no freezing"
    tab.compare()
    assert sent[-1] == ("peer", {"step": 3, "freezing": False})
    tab.show_result(peer_result(False))
    assert tab.mode.text() == "shown: no freezing" and "(no freezing)" in tab.status.text()


def test_export_asks_for_the_peer_with_freezing_and_remembers_it(qtbot, win, tmp_path, monkeypatch):
    open_mlp(qtbot, win)
    answers = iter([True, False])

    def accept(dlg):  # the user's first export: a folder, the peer with freezing; then as remembered
        assert dlg.peer.isEnabled()
        if next(answers):
            assert not dlg.peer.isChecked() and not dlg.freezing.isEnabled()
            dlg.folder.setText(str(tmp_path))
            dlg.peer.setChecked(True)
            dlg.freezing.setChecked(True)
        return 1

    monkeypatch.setattr(ExportDialog, "exec", accept)
    for _ in range(2):
        win.export_dialog(current_only=False)
        assert win.bridge.sent[-1] == ("export", {"out_dir": str(tmp_path), "steps": "all", "peer": "inductor",
                                                  "peer_freezing": True})
    win.export_to(str(tmp_path), current_only=True)  # no peer asked: the command as before
    assert win.bridge.sent[-1] == ("export", {"out_dir": str(tmp_path), "steps": [win.state["cursor"]]})


def test_export_offers_no_peer_for_a_model_without_weights(qtbot):
    dlg = ExportDialog(None, False, "/tmp/x", make_state(spec="m.py", structure_only=True), peer=True, freezing=True)
    qtbot.addWidget(dlg)
    assert not dlg.peer.isEnabled() and not dlg.peer.isChecked() and "structure only" in dlg.why.text()
    assert dlg.choice() == {"out_dir": "/tmp/x", "peer": None, "peer_freezing": False}


def test_exported_message_says_the_peer_and_its_mode_or_why_not():
    base = {"path": "/out", "files": ["a", "b", "peer/peer.json"]}
    assert exported_text(base) == "Exported 3 files to /out"
    ok = dict(base, peer={"compiler": "inductor", "freezing": True, "error": None, "step": 5, "kernels": 7})
    assert exported_text(ok) == ("Exported 3 files to /out; torch.compile (inductor, freezing) beside step 5: "
                                 "7 kernels in peer/")
    bad = dict(base, peer={"compiler": "inductor", "freezing": False, "error": "no weights", "step": 5})
    assert exported_text(bad).endswith("torch.compile (inductor) not compiled: no weights")
