"""The compare view against the shared fake engine: aligned rows, one-sided colours, which steps a row
diffs, the diff-of-diffs mode refusing a one-sided row, and the graph diff drawn."""
import os

from fake_bridge import FakeBridge

from irviz.ui.events import EventHub
from irviz.ui.panes.compare_window import ONLY_A, ComparePane


def test_compare_view_rows_and_pairs(qtbot):
    bridge = FakeBridge()
    pane = ComparePane(bridge, EventHub())
    qtbot.addWidget(pane)
    bridge.stateChanged.emit({"model": "mlp", "pipeline_text": "zero"})
    assert pane.a_label.text() == "A: zero"
    assert pane.compare("  ") is None and "Type pipeline B" in pane.info.text()
    pane.compare("LegalizeOps,AnnotateTIROpPattern,FuseOps,FuseTIR")
    qtbot.waitUntil(lambda: pane.diff_result is not None)
    assert pane.rows.rowCount() == 2 and pane.rows.item(1, 3).text() == "4"  # kernels
    # the figures come before the pipeline text, which is last and elided, whole in its tooltip
    header = [pane.rows.horizontalHeaderItem(c).text() for c in range(pane.rows.columnCount())]
    assert header[1:3] == ["TVM ms", "max abs error"] and header[-1] == "pipeline"
    assert pane.rows.item(1, 6).toolTip() == "LegalizeOps,AnnotateTIROpPattern,FuseOps,FuseTIR"
    assert pane.rows.columnWidth(6) <= 320
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


def _graph(ids):
    nodes = [dict(id=n, label=n.split("_")[0], sublabel="1×10", kind="op", x=10, y=10 + 60 * k, w=120, h=32,
                  callee=n.split("_")[0] if "_" in n else None) for k, n in enumerate(ids)]
    edges = [{"src": a, "dst": b, "label": "", "points": [[70, 42 + 60 * k], [70, 70 + 60 * k]]}
             for k, (a, b) in enumerate(zip(ids, ids[1:]))]
    return {"nodes": nodes, "edges": edges, "groups": [], "width": 200, "height": 60 * len(ids) + 20}


class GraphBridge(FakeBridge):
    def _compute(self, cmd, a):
        if cmd != "compare_graphs":
            return super()._compute(cmd, a)
        return {"a": a["a"], "b": a["b"], "pass_a": "FuseTIR", "pass_b": "FuseTIR", "func": "main",
                "graph_a": _graph(["x", "lv_fused", "c"]), "graph_b": _graph(["x", "lv_t", "lv1_fused", "gv"]),
                "only_a": ["c"], "only_b": ["lv_t", "gv"], "changed": [["lv_fused", "lv1_fused"]], "same": 1}


def test_graph_tab_draws_both_mains_with_one_sided_and_changed_nodes(qtbot):
    bridge = GraphBridge()
    pane = ComparePane(bridge, EventHub())
    qtbot.addWidget(pane)
    pane.resize(1300, 760)
    bridge.stateChanged.emit({"model": "mlp", "pipeline_text": "zero"})
    pane.compare("LegalizeOps,AnnotateTIROpPattern,FuseOps,FuseTIR")
    qtbot.waitUntil(lambda: pane.diff_result is not None)
    # the layout is asked for only once the Graph tab is shown
    assert not any(cmd == "compare_graphs" for cmd, _ in bridge.sent)
    pane.tabs.setCurrentWidget(pane.graphs)
    assert bridge.sent[-1] == ("compare_graphs", {"a": 5, "b": 4})
    qtbot.waitUntil(lambda: pane.graphs.result is not None)
    ga, gb = pane.graphs.sides()
    assert ga.highlighted("removed") == {"c"} and gb.highlighted("added") == {"lv_t", "gv"}
    assert ga.highlighted("changed") == {"lv_fused"} and gb.highlighted("changed") == {"lv1_fused"}
    assert pane.graphs.a.title.text().startswith("A · step 5 (FuseTIR) · 1 only here, 1 changed")
    assert [pane.graphs.b.listing.item(i).text() for i in range(3)] == [
        "only in B: lv_t · lv · 1×10", "only in B: gv · gv · 1×10", "changed: lv1_fused · lv1 · 1×10"]
    # a changed node selects its partner; a listed node is selected in its graph
    ga.select("lv_fused")
    assert gb.selected() == "lv1_fused"
    pane.graphs.b.listing.setCurrentRow(1)
    assert gb.selected() == "gv"
    folder = os.environ.get("IRVIZ_SHOTS")
    if folder:
        pane.grab().save(os.path.join(folder, "compare_graph.png"))
    # the same pair is not laid out twice; another row is, and the pass mode has no graph
    n = len(bridge.sent)
    pane.tabs.setCurrentWidget(pane.view)
    pane.tabs.setCurrentWidget(pane.graphs)
    assert len(bridge.sent) == n
    pane.steps.selectRow(3)
    assert bridge.sent[-1] == ("compare_graphs", {"a": 3, "b": 2})
    pane.mode.setCurrentIndex(1)
    assert pane.graphs.result is None and "two steps" in pane.graphs.legend.text()


def test_a_long_pipeline_text_does_not_widen_the_compare_window(qtbot):
    bridge = FakeBridge()
    pane = ComparePane(bridge, EventHub())
    qtbot.addWidget(pane)
    before = pane.minimumSizeHint().width()
    long_text = ",".join(["CPUTileReductions(lanes=16)"] * 80)
    bridge.stateChanged.emit({"model": "mlp", "pipeline_text": long_text})
    assert pane.a_label.toolTip() == long_text
    assert pane.minimumSizeHint().width() <= max(before, 900)
