"""The Pipeline pane's "Copy pipeline as text" / "Paste pipeline" and the Open dialog's "Weights as
inputs", with the real engine (the text is parsed there: this process has no pass registry)."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtGui import QGuiApplication

T = 180_000


@pytest.fixture
def win(qtbot, real_window):
    return real_window


def _settled(qtbot, w, test):
    qtbot.waitUntil(lambda: test() or w.last_error is not None, timeout=T)
    assert w.last_error is None, w.last_error


def test_open_with_weights_as_inputs_then_copy_and_paste(qtbot, win, tmp_path):
    win.open_spec("sample:mlp", pipeline="BindParams,LegalizeOps", keep_params=True)
    _settled(qtbot, win, lambda: bool(win.state.get("model")) and win.all_filled())
    state = win.state
    assert state["keep_params"] is True and state["params_file"].endswith(".npz")
    assert "p_linear0_weight" in win.relax.code.toPlainText()
    pane = win.pipeline
    assert state["params_file"] in pane.info.text()  # the user sees where the weights went
    assert win.bridge.recipe["keep_params"] is True  # a restarted engine imports the same way

    # copy: the whole pipeline, BindParams naming the file the import wrote
    text = pane.copy_pipeline_text()
    assert text == f"BindParams(params={state['params_file']}),LegalizeOps"
    assert QGuiApplication.clipboard().text() == text

    # a bad text: the error names the column, the pipeline stays as it was
    before = [p["name"] for p in win.state["planned"]]
    win.last_error = None
    QGuiApplication.clipboard().setText("BindParams,LibraryDispatch(min_macs=lots),FuseTIR")
    pane.paste_pipeline_text()
    qtbot.waitUntil(lambda: "Paste pipeline:" in pane.info.text(), timeout=T)
    assert "column 37" in pane.info.text() and "must be an integer" in pane.info.text()
    assert [p["name"] for p in win.state["planned"]] == before
    win.last_error = None
    if os.environ.get("IRVIZ_SHOTS"):
        pane.grab().save(os.path.join(os.environ["IRVIZ_SHOTS"], "pipeline_pane_paste_error.png"))

    # a good text replaces the whole pipeline; the parameter arrives typed
    QGuiApplication.clipboard().setText("BindParams,LibraryDispatch(min_macs=0),zero")
    pane.paste_pipeline_text()
    qtbot.waitUntil(lambda: [p["name"] for p in win.state["planned"]][:2] == ["BindParams", "LibraryDispatch"],
                    timeout=T)
    assert win.state["planned"][1]["params"] == {"min_macs": 0}
    assert pane.planned_list.count() == 7
    win.act_run_to_end.trigger()
    _settled(qtbot, win, lambda: not win.state["planned"] and win.all_filled())
    assert [s["pass"] for s in win.state["steps"][1:3]] == ["BindParams", "LibraryDispatch"]
    assert all(s["changed"] for s in win.state["steps"][1:3])

    pane.grab().save(str(tmp_path / "pipeline_pane.png"))
    shots = os.environ.get("IRVIZ_SHOTS")
    if shots:
        pane.grab().save(os.path.join(shots, "pipeline_pane_text.png"))


def test_open_dialog_offers_weights_as_inputs(qtbot, win):
    from irviz.ui.open_dialog import KEEP_PARAMS_TEXT, OpenDialog

    d = OpenDialog(win, path="model.py", keep_params=True)
    qtbot.addWidget(d)
    assert d.keep_params.text() == KEEP_PARAMS_TEXT and d.keep_params.isChecked()
    assert d.keep_params.isVisibleTo(d)
    assert d.choice()["keep_params"] is True and d.problem() is None
    # the course importer keeps the weights as inputs too, from symbolic_trace or torch.export
    d.importer.setCurrentIndex(d.importer.findData("course"))
    assert d.problem() is None
    d.capture.setCurrentIndex(d.capture.findData("symbolic_trace"))
    assert d.choice()["keep_params"] is True and d.problem() is None
    d.keep_params.setChecked(False)
    assert d.choice()["keep_params"] is False and d.problem() is None
    shots = os.environ.get("IRVIZ_SHOTS")
    if shots:
        d.resize(900, 520)
        d.show()
        qtbot.wait(200)
        d.grab().save(os.path.join(shots, "open_dialog.png"))
