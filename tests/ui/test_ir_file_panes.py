"""The panes on an IR file, against the shared fake bridge answering as the engine does for
a course module: the Run pane's function selector and sizes dialog (asked before any build,
remembered per file, cancel sends nothing), the FX pane's "no FX graph", the Relax pane's
all-functions graph with an unregistered extern, symbolic sizes in the TensorIR list."""
from __future__ import annotations

import json
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

pytest.importorskip("pytestqt")

from fake_bridge import FakeBridge, _node

from irviz.protocol.commands import make_state, step_entry

SIZES = {"main": ["m", "n", "k"], "main_two_blocks": ["m", "n", "k"], "no_sizes": []}


def all_functions_graph():
    nodes = [_node("x", "x", "param", group="main", function="main"),
             _node("lv0", "call_dps_packed env.linear", "call_dps_packed", group="main", function="main",
                   callee="env.linear", extern="env.linear", registered=False, failed=True,
                   sublabel="not registered: env.linear"),
             _node("output", "output", "output", group="main", function="main"),
             _node("main_two_blocks/x", "x", "param", group="main_two_blocks", function="main_two_blocks"),
             _node("main_two_blocks/lv0", "call_dps_packed linear0", "call_dps_packed",
                   group="main_two_blocks", function="main_two_blocks", callee="linear0",
                   extern="linear0", registered=True),
             _node("main_two_blocks/output", "output", "output", group="main_two_blocks",
                   function="main_two_blocks")]
    edges = [{"src": a, "dst": b, "label": "", "points": []}
             for a, b in (("x", "lv0"), ("lv0", "output"), ("main_two_blocks/x", "main_two_blocks/lv0"),
                          ("main_two_blocks/lv0", "main_two_blocks/output"))]
    return {"nodes": nodes, "edges": edges, "groups": [], "width": 400, "height": 200}


class IRFileBridge(FakeBridge):
    """The engine with a course IR file open: no FX graph, random inputs, sizes m, n, k."""

    def __init__(self, inputs="random"):
        super().__init__()
        self.inputs = inputs
        self.engine_dims: dict = {}

    def state(self):
        if self.model is None:
            return super().state()
        return make_state(model="course:MyModule", spec="/tmp/course.py", importer="tvmscript",
                          cursor=self.cursor, steps=[step_entry(0, "import", {}, 0.1, True)],
                          relax_functions=["main", "main_two_blocks", "no_sizes"],
                          run_functions=["main", "main_two_blocks", "no_sizes"],
                          tir_functions=["linear0"])

    def _compute(self, cmd, a):
        if cmd == "open":
            self.model = "course"
            self.cursor = 0
            return self.state()
        if cmd == "fx_graph":
            return Exception("the pane must not ask an IR file for its FX graph")
        if cmd == "relax_graph":
            return all_functions_graph() if a.get("func") == "*" else super()._compute(cmd, a)
        if cmd == "function_text" and a.get("name") == "*":
            return {"name": "*", "text": "@R.function\ndef main(x): ...\n\n@R.function\ndef main_two_blocks(x): ..."}
        if cmd == "tir_functions":
            return [{"name": "linear0", "sizes": ["m", "n"], "loops": ["j in n"],
                     "signature": '(X: T.Buffer((1, m), "float32"), W: T.Buffer((n, m), "float32"))',
                     "blocks": ["Y"]}]
        if cmd == "run_sizes":
            return {"func": a["func"], "sizes": SIZES[a["func"]], "inputs": self.inputs,
                    "dims": dict(self.engine_dims)}
        if cmd == "build_run":
            missing = [s for s in SIZES[a.get("func", "main")] if s not in (a.get("dims") or {})]
            if missing and self.inputs == "random":
                return Exception(f"{a.get('func')} has symbolic sizes with no value: {', '.join(missing)}")
            self.engine_dims.update(a.get("dims") or {})
            return {"func": a.get("func", "main"), "ok": False, "allclose": None, "reference": False,
                    "reference_name": None, "max_abs_error": None, "max_rel_error": None, "tvm_ms": 0.2,
                    "torch_ms": None, "threads": 1, "build_seconds": 0.1, "kernels": []}
        return super()._compute(cmd, a)


@pytest.fixture
def settings(tmp_path):
    from PySide6.QtCore import QSettings

    return QSettings(str(tmp_path / "irviz.ini"), QSettings.Format.IniFormat)


def _window(qtbot, settings, bridge):
    from irviz.ui.main_window import MainWindow

    w = MainWindow(bridge=bridge, settings=settings)
    qtbot.addWidget(w)
    w.resize(1600, 1000)
    w.show()
    w.open_spec("/tmp/course.py")
    qtbot.waitUntil(lambda: w.all_filled(), timeout=5000)
    return w


class Asker:
    """Stands in for the dialog: records what it was asked, answers with `answer`."""

    def __init__(self, answer):
        self.answer = answer
        self.asked: list[tuple[list, dict, str]] = []

    def __call__(self, names, values, func="main", model="", parent=None):
        self.asked.append((list(names), dict(values), func))
        return None if self.answer is None else {n: self.answer[n] for n in names}


def _runs(bridge):
    return [args for cmd, args in bridge.sent if cmd == "build_run"]


def test_run_pane_lists_the_functions_and_runs_the_chosen_one(qtbot, settings):
    bridge = IRFileBridge(inputs="get_inputs")
    w = _window(qtbot, settings, bridge)
    box = w.run.func_box
    assert [box.itemText(i) for i in range(box.count())] == ["main", "main_two_blocks", "no_sizes"]
    assert box.currentText() == "main" and box.isEnabled()
    w.run.set_func("main_two_blocks")
    w.run.ask_sizes = Asker({"m": 1, "n": 2, "k": 3})
    w.run.build_run()
    qtbot.waitUntil(lambda: w.run.result is not None, timeout=5000)
    # get_inputs() fixes the sizes: no dialog, and the run is of the chosen function
    assert w.run.ask_sizes.asked == [] and _runs(bridge) == [{"step": 0, "func": "main_two_blocks"}]
    assert "(main_two_blocks)" in w.run.status.text() and w.run.verdict.text() == "RAN"
    # with get_inputs() there is nothing to set: Sizes… says so and runs nothing
    w.run.sizes_button.click()
    qtbot.waitUntil(lambda: "needs no sizes" in w.run.status.text(), timeout=5000)
    assert "get_inputs()" in w.run.status.text() and len(_runs(bridge)) == 1


def test_missing_sizes_are_asked_once_and_remembered_per_file(qtbot, settings):
    bridge = IRFileBridge()
    w = _window(qtbot, settings, bridge)
    asker = w.run.ask_sizes = Asker({"m": 20, "n": 7, "k": 3})
    w.run.build_run()
    qtbot.waitUntil(lambda: w.run.result is not None, timeout=5000)
    assert asker.asked == [(["m", "n", "k"], {}, "main")]
    assert _runs(bridge) == [{"step": 0, "func": "main", "dims": {"m": 20, "n": 7, "k": 3}}]
    # kept in the settings under the file's spec, and used again without asking
    assert json.loads(settings.value("run/sizes"))["/tmp/course.py"] == {"m": 20, "n": 7, "k": 3}
    w.run.result = None
    w.run.build_run()
    qtbot.waitUntil(lambda: w.run.result is not None, timeout=5000)
    assert len(asker.asked) == 1 and _runs(bridge)[-1]["dims"] == {"m": 20, "n": 7, "k": 3}
    # "Sizes…" asks again, with the remembered values filled in
    asker.answer = {"m": 5, "n": 6, "k": 7}
    w.run.result = None
    w.run.sizes_button.click()
    qtbot.waitUntil(lambda: w.run.result is not None, timeout=5000)
    assert asker.asked[-1] == (["m", "n", "k"], {"m": 20, "n": 7, "k": 3}, "main")
    assert _runs(bridge)[-1]["dims"] == {"m": 5, "n": 6, "k": 7}


def test_a_function_without_sizes_runs_without_asking(qtbot, settings):
    bridge = IRFileBridge()
    w = _window(qtbot, settings, bridge)
    asker = w.run.ask_sizes = Asker(None)
    w.run.set_func("no_sizes")
    w.run.build_run()
    qtbot.waitUntil(lambda: w.run.result is not None, timeout=5000)
    assert asker.asked == [] and _runs(bridge) == [{"step": 0, "func": "no_sizes"}]


def test_cancelling_the_sizes_dialog_sends_nothing_and_keeps_the_session(qtbot, settings):
    bridge = IRFileBridge()
    w = _window(qtbot, settings, bridge)
    w.run.ask_sizes = Asker(None)
    before = dict(w.state)
    w.run.build_run()
    qtbot.waitUntil(lambda: bool(w.run.ask_sizes.asked), timeout=5000)
    qtbot.wait(50)
    assert _runs(bridge) == [] and w.state == before and w.state["model"] == "course:MyModule"
    assert "nothing was built" in w.run.status.text() and w.run.verdict.text() == ""
    assert settings.value("run/sizes") is None


def test_the_sizes_dialog_has_one_field_per_size(qtbot):
    from irviz.ui.widgets.sizes_dialog import SizesDialog

    dlg = SizesDialog(["m", "n", "k"], {"n": 128}, func="main", model="course:MyModule")
    qtbot.addWidget(dlg)
    assert list(dlg.fields) == ["m", "n", "k"]
    assert dlg.values() == {"m": 1, "n": 128, "k": 1}
    dlg.fields["k"].setValue(10)
    assert dlg.values()["k"] == 10


def test_run_errors_on_bad_inputs_stay_in_the_run_pane(qtbot, settings):
    bridge = IRFileBridge(inputs="get_inputs")
    w = _window(qtbot, settings, bridge)
    bridge.fail_next = {"cmd": "build_run", "error": {
        "stage": "run", "message": "get_inputs(): b0 has shape (6,); main expects (n)",
        "hint": "give b0 the shape (n)"}}
    w.run.build_run()
    qtbot.waitUntil(lambda: w.run.error is not None, timeout=5000)
    assert "b0 has shape (6,)" in w.run.status.text() and "give b0 the shape" in w.run.status.text()
    assert w.run.verdict.text() == "RUN FAILED" and w.state["model"] == "course:MyModule"


def test_fx_pane_says_an_ir_file_has_no_fx_graph(qtbot, settings):
    bridge = IRFileBridge()
    w = _window(qtbot, settings, bridge)
    assert "No FX graph" in w.fx.info.text() and "IR file" in w.fx.info.text()
    assert w.fx.error_label.isVisible() and "not captured from a PyTorch model" in w.fx.error_label.text()
    assert not any(cmd == "fx_graph" for cmd, _ in bridge.sent) and w.fx.is_filled()


def test_relax_pane_shows_every_function_and_the_unregistered_extern(qtbot, settings):
    bridge = IRFileBridge()
    w = _window(qtbot, settings, bridge)
    assert w.relax.func_box.currentText() == "All functions" and w.relax.current_func() == "*"
    assert ("relax_graph", {"step": 0, "func": "*", "bookkeeping": False}) in bridge.sent
    ids = {n["id"] for n in w.relax.graph_dict["nodes"]}
    assert {"lv0", "main_two_blocks/lv0"} <= ids
    info = w.relax.info.text()
    assert "2 functions" in info and "not registered: env.linear" in info
    assert "def main_two_blocks" in w.relax.text


def test_tir_list_shows_symbolic_sizes(qtbot, settings):
    bridge = IRFileBridge()
    w = _window(qtbot, settings, bridge)
    item = w.tir.tree.topLevelItem(0)
    assert item.text(0) == "linear0  (m, n)" and "(n, m)" in item.text(2)
