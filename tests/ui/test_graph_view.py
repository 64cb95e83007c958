"""GraphView offscreen: items, search, selection, highlight, heat, fold signal, export."""
from __future__ import annotations

import random
import struct
import sys

import networkx as nx
import pytest

from irviz.core.views.layout import layout_graph

QtCore = pytest.importorskip("PySide6.QtCore")
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QPainterPath
from PySide6.QtWidgets import QGraphicsRectItem

from irviz.ui.widgets import heat_scale
from irviz.ui.widgets.graph_items import GroupItem, NodeItem
from irviz.ui.widgets.graph_view import GraphView


def dag50() -> nx.DiGraph:
    rng = random.Random(3)
    G = nx.DiGraph()
    ops = ["conv2d", "relu", "add", "matmul", "softmax"]
    for i in range(50):
        G.add_node(f"n{i}", label=ops[i % 5] if i else "x", kind="input" if i == 0 else "op",
                   shape=(1, 8 * (1 + i % 3), 16, 16), dtype="float32",
                   module_path=f"stage{i // 10}.block{(i // 5) % 2}")
        if i:
            G.add_edge(f"n{i-1}", f"n{i}", shape=(1, 8, 16, 16))
            if i > 3 and i % 4 == 0:
                G.add_edge(f"n{rng.randrange(i - 4, i - 1)}", f"n{i}")
    return G


@pytest.fixture
def view(qtbot):
    v = GraphView(dark=False)
    qtbot.addWidget(v)
    v.resize(900, 1000)
    v.show()
    qtbot.waitExposed(v)
    v.set_graph(layout_graph(dag50(), group_attr="module_path"))
    return v


def test_time_and_error_colourings_differ_and_carry_a_legend(view):
    time, error = heat_scale.TIME, heat_scale.ERROR
    # the hottest kernel and the worst error must never look alike
    assert time.color(1.0).name() != error.color(1.0).name()
    assert abs(time.color(1.0).hue() - error.color(1.0).hue()) > 90
    assert not view.heat.legend.isVisible()
    view.set_heat({"n4": 0.25, "n6": 1.0})
    assert view.heat.legend.isVisible()
    assert view.heat.legend.text() == "Kernel time (Build & Run): 0 ms … 1 ms"
    assert "kernel time 0.25 ms (25% of the slowest)" in view.heat.tooltip("n4")
    assert view.heat.tooltip("n5") == ""
    view.set_heat({"n4": 0.625}, 1.0, error)  # 10**(-8 + 0.625 * 8) = 1e-3 on the log scale
    assert view.nodes["n4"].heat.name() == error.color(0.625).name()
    assert view.heat.legend.text() == "Error vs PyTorch (log): ≤ 1e-8 … ≥ 1"
    assert "max |error| vs PyTorch ≈ 1.0e-03" in view.heat.tooltip("n4")
    legend = view.heat.legend.geometry()
    assert view.rect().contains(legend)
    view.set_heat(None)
    assert not view.heat.legend.isVisible() and view.heat.tooltip("n4") == ""


def test_set_graph_creates_items(view):
    assert len(view.nodes) == 50
    assert len([i for i in view.scene.items() if isinstance(i, NodeItem)]) == 50
    assert len(view.edges) == dag50().number_of_edges()
    assert view.groups, "group frames expected"
    # default zoom is readable, not a speck
    assert view.zoom() >= 0.6
    view.clear()
    assert not view.nodes and not view.scene.items()


def test_find_matches_label_shape_and_id(view):
    hits = view.find("conv")
    assert hits and all(view.nodes[h].label == "conv2d" for h in hits)
    assert set(hits) == {f"n{i}" for i in range(1, 50) if i % 5 == 0}
    assert view.highlighted("found") == set(hits)
    assert view.selected() == hits[0]
    assert view.find("n17") == ["n17"]
    assert "n1" in view.find("1×16×16×16")          # by shape
    assert view.find("") == [] and view.highlighted("found") == set()


def test_click_selects_and_emits(view, qtbot):
    item = view.nodes["n5"]
    view.center_on("n5")
    pos = view.view.mapFromScene(item.sceneBoundingRect().center())
    with qtbot.waitSignal(view.nodeSelected, timeout=2000) as blocker:
        qtbot.mouseClick(view.view.viewport(), Qt.LeftButton, pos=pos)
    assert blocker.args == ["n5"]
    assert item.isSelected()
    # incident edges are highlighted
    assert view._hi_edges and all("n5" in view.edge_meta[k][:2] for k in view._hi_edges)
    assert "n5" in view.edge_tooltip(view._hi_edges[0])
    with qtbot.waitSignal(view.nodeSelected, timeout=2000) as blocker:
        view.select("n7")
    assert blocker.args == ["n7"]


def test_highlight_roles_and_heat(view):
    view.highlight(["n1", "n2", "bogus"], "linked")
    assert view.highlighted("linked") == {"n1", "n2"}
    assert view.nodes["n1"].role() == "linked"
    view.highlight(["n2", "n3"], "added")
    view.highlight(["n2"], "linked")
    assert "linked" not in view.nodes["n1"].roles
    assert view.nodes["n2"].role() == "linked" and view.nodes["n3"].role() == "added"
    view.highlight([], "linked")
    assert view.nodes["n2"].role() == "added"
    view.set_heat({"n4": 1.0, "n6": 4.0})
    assert view.nodes["n6"].heat.name() == heat_scale.TIME.color(1.0).name()
    assert view.nodes["n4"].heat is not None and view.nodes["n5"].heat is None
    view.set_heat(None)
    assert all(n.heat is None for n in view.nodes.values())
    view.clear_highlights()
    assert all(not n.roles for n in view.nodes.values())


def test_group_header_click_emits_fold(view, qtbot):
    grp = next(g for g in view.groups.values() if g.depth == 1)
    view.view.centerOn(grp.header.center())
    # click the header's left part (the title), away from nodes
    p = view.view.mapFromScene(QPointF(grp.header.left() + 12, grp.header.center().y()))
    assert isinstance(view.view.itemAt(p), GroupItem)
    with qtbot.waitSignal(view.foldToggled, timeout=2000) as blocker:
        qtbot.mouseClick(view.view.viewport(), Qt.LeftButton, pos=p)
    assert blocker.args == [grp.gid]


def test_folded_summary_double_click_unfolds(qtbot):
    G = dag50()
    v = GraphView(dark=True)
    qtbot.addWidget(v)
    v.resize(800, 800)
    v.show()
    v.set_graph(layout_graph(G, group_attr="module_path", folded=["stage1"]))
    summary = v.nodes["group:stage1"]
    assert summary.kind == "group" and len(v.nodes) == 41
    v.center_on(summary.nid)
    pos = v.view.mapFromScene(summary.sceneBoundingRect().center())
    with qtbot.waitSignal(v.foldToggled, timeout=2000) as blocker:
        qtbot.mouseDClick(v.view.viewport(), Qt.LeftButton, pos=pos)
    assert blocker.args == ["stage1"]


def test_export_png_and_svg(view, tmp_path):
    png = tmp_path / "g.png"
    assert view.export_png(str(png))
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000
    w, h = struct.unpack(">II", data[16:24])
    assert w > 100 and h > 100
    svg = tmp_path / "g.svg"
    assert view.export_svg(str(svg))
    text = svg.read_text()
    assert "<svg" in text and "conv2d" in text


def test_zoom_fit_and_level_of_detail(view, qtbot):
    view.fit_to_view()
    r = view.visible_scene_rect()
    assert r.contains(view.scene.sceneRect().adjusted(5, 5, -5, -5)) or view.zoom() == 1.5
    z = view.zoom()
    view.zoom_by(2.0)
    assert view.zoom() == pytest.approx(z * 2.0)
    view.grab()   # paints at both detail levels without errors
    view.set_zoom(0.1)
    view.grab()


def test_big_graph_uses_overview(qtbot):
    G = nx.DiGraph()
    for i in range(2000):
        G.add_node(i, label="op", kind="op")
        if i:
            G.add_edge(i - 1, i)
            if i % 3 == 0:
                G.add_edge(i - 3, i)
    v = GraphView()
    qtbot.addWidget(v)
    v.resize(600, 600)
    v.show()
    v.set_graph(layout_graph(G))
    qtbot.waitUntil(lambda: not v.building(), timeout=10000)
    assert len(v.nodes) == 2000 and v.zoom() >= 0.6   # default view: top at readable size
    v.fit_to_view()
    assert v._overview_on and not v.nodes["0"].isVisible()
    v.grab()
    v.reset_view()
    assert not v._overview_on and v.nodes["0"].isVisible()


def test_big_graph_overview_is_drawn_between_events_and_matches_one_go(qtbot):
    from irviz.ui.widgets.graph_items import overview_image

    G = nx.DiGraph()
    for i in range(1800):
        G.add_node(i, label="op", kind="op")
        if i:
            G.add_edge(i - 1, i)
    v = GraphView()
    qtbot.addWidget(v)
    v.resize(400, 400)
    graph = layout_graph(G)
    v.set_graph(graph)
    assert v._overview is None and v.building()   # set_graph did not draw it in one go
    qtbot.waitUntil(lambda: not v.building(), timeout=10000)
    img, rect = v._overview
    whole, whole_rect = overview_image(graph, v._style)
    assert rect == whole_rect and img == whole
    v.set_graph(graph)
    v.clear()   # a graph replaced before its overview finished leaves nothing behind
    assert not v.building() and v._overview is None


def test_pyside_keeps_none_refcount():
    """PySide6 6.12.0 on Python 3.11 drops a reference to None on every void Qt call and
    eventually aborts (shared NOTES); 6.11.3 does not.  Python >= 3.12 makes None immortal."""
    path = QPainterPath()
    item = QGraphicsRectItem(0, 0, 10, 10)
    before = sys.getrefcount(None)
    for i in range(5000):
        path.lineTo(float(i), float(i % 7))
        item.setPos(float(i), 1.0)
    after = sys.getrefcount(None)
    assert abs(after - before) < 100, f"None refcount {before} -> {after}"


def test_ctrl_wheel_zooms_plain_wheel_scrolls(view):
    from PySide6.QtCore import QPoint
    from PySide6.QtGui import QWheelEvent
    from PySide6.QtWidgets import QApplication

    vp = view.view.viewport()
    center = QPointF(vp.width() / 2, vp.height() / 2)

    def wheel(mods):
        ev = QWheelEvent(center, QPointF(vp.mapToGlobal(center.toPoint())), QPoint(0, 0),
                         QPoint(0, 120), Qt.NoButton, mods, Qt.NoScrollPhase, False)
        QApplication.sendEvent(vp, ev)

    z = view.zoom()
    wheel(Qt.ControlModifier)
    assert view.zoom() > z * 1.1
    z = view.zoom()
    bar = view.view.verticalScrollBar()
    bar.setValue(bar.maximum() // 2)
    before = bar.value()
    wheel(Qt.NoModifier)
    assert view.zoom() == pytest.approx(z)
    assert bar.value() < before


def test_select_without_emit(view, qtbot):
    with qtbot.assertNotEmitted(view.nodeSelected):
        view.select("n3", emit=False)
    assert view.selected() == "n3"


def test_tooltips_and_theme_switch(view):
    k = view._incident["n2"][0]
    assert "1×8×16×16" in view.edge_tooltip(k)           # tensor shape of the edge
    tip = view.nodes["n5"].tooltip()
    assert "conv2d" in tip and "n5" in tip and "stage0.block1" in tip
    view.set_heat({"n5": 2.0})
    view.set_dark(True)
    assert view._style.dark
    view.grab()
    view.set_dark(False)
    view.grab()


def test_big_graph_items_come_in_slices_and_queries_work_meanwhile(qtbot):
    """A big graph's items are made between events; find, highlight, heat and centring answer
    from the data at once, and the items made later carry what was asked for."""
    G = nx.DiGraph()
    for i in range(1500):
        G.add_node(f"n{i}", label=f"op{i}", kind="op")
        if i:
            G.add_edge(f"n{i - 1}", f"n{i}")
    v = GraphView()
    qtbot.addWidget(v)
    v.resize(600, 600)
    v.show()
    v.set_graph(layout_graph(G))
    assert v.building() and len(v.nodes) < 1500
    assert v.find("op1499") == ["n1499"]          # selects it: the rest is built at once
    v.highlight(["n1400", "n3"], "linked")
    v.set_heat({"n1450": 2.0, "n2": 1.0})
    v.center_on("n1300")
    assert v.visible_scene_rect().contains(QPointF(v.nodes["n1300"].x(), v.nodes["n1300"].y()))
    qtbot.waitUntil(lambda: not v.building(), timeout=10000)
    assert len(v.nodes) == 1500 and len(v.edges) == 1499
    assert "linked" in v.nodes["n1400"].roles and v.nodes["n1450"].heat is not None
    assert v.selected() == "n1499"


def test_big_graph_queries_before_its_items_exist(qtbot):
    G = nx.DiGraph()
    for i in range(1500):
        G.add_node(f"n{i}", label=f"op{i}", kind="op")
        if i:
            G.add_edge(f"n{i - 1}", f"n{i}")
    v = GraphView()
    qtbot.addWidget(v)
    v.resize(600, 600)
    v.show()
    v.set_graph(layout_graph(G))
    last = max(v._node_data, key=lambda k: v._node_data[k]["y"])
    assert last not in v.nodes                    # the bottom is out of view: made last
    v.highlight([last], "changed")
    v.set_heat({last: 1.0})
    qtbot.waitUntil(lambda: not v.building(), timeout=10000)
    assert "changed" in v.nodes[last].roles and v.nodes[last].heat is not None
    assert v.highlighted("changed") == {last}
