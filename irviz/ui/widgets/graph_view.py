"""GraphView: draws the protocol's ``graph`` dict (laid out by irviz.core.views.layout) with Qt.

Netron-like: rounded boxes (op label + shape), colour by node kind, smooth edges with arrow
heads, dashed titled group frames whose header folds/unfolds, level of detail, zoom/pan,
fit, minimap, search, cross-pane highlights, heat overlay, PNG/SVG export.

Scale: the items (:mod:`graph_items`) check the level of detail before painting, tooltips
are computed on demand by the view (no per-item ``setToolTip``), and the minimap
(:mod:`graph_minimap`) draws from the graph data into a cached image instead of rendering the
scene a second time. Export to PNG/SVG is :mod:`graph_export`.
"""
from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable

from PySide6.QtCore import QEvent, QPointF, QRectF, Qt, Signal, SignalInstance
from PySide6.QtGui import QColor, QImage, QPainter, QPainterPath, QPalette, QPen
from PySide6.QtWidgets import (QApplication, QGraphicsPathItem, QGraphicsScene, QGraphicsView,
                               QMenu, QToolTip, QVBoxLayout, QWidget)

from irviz.ui.widgets.graph_items import (
    ARROW_BAND, LOD_TEXT, OVERVIEW_NODES, OVERVIEW_ZOOM, GraphStyle, GroupItem, NodeItem,
    add_arrow, edge_path, esc_html, overview_slices,
)
from irviz.ui.widgets.graph_export import render_png, render_svg
from irviz.ui.widgets.graph_minimap import Minimap
from irviz.ui.widgets.heat_scale import TIME, HeatOverlay, HeatScale
from irviz.ui.widgets.idle_work import idle_work

__all__ = ["GraphView"]

# graphs with more items than this get their scene items built a slice at a time between events
# (GPT-2's 1,000-node Relax graph took 130-170 ms at once); smaller ones are built at once
SYNC_ITEMS = 700

# --------------------------------------------------------------------------- view

class _View(QGraphicsView):
    def __init__(self, owner: GraphView):
        super().__init__()
        self.owner = owner
        self.setRenderHints(QPainter.RenderHint.Antialiasing | QPainter.RenderHint.TextAntialiasing)
        self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)
        self.setResizeAnchor(QGraphicsView.ViewportAnchor.AnchorViewCenter)
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.SmartViewportUpdate)
        self.setOptimizationFlags(QGraphicsView.OptimizationFlag.DontAdjustForAntialiasing)
        self.setFrameShape(QGraphicsView.Shape.NoFrame)

    def drawBackground(self, painter, rect):
        super().drawBackground(painter, rect)
        ov = self.owner._overview
        if ov is not None and self.owner._overview_on:
            painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform, True)
            painter.drawImage(ov[1], ov[0])

    def wheelEvent(self, event):
        zoom = bool(event.modifiers() & Qt.KeyboardModifier.ControlModifier) != self.owner.wheel_zooms
        if zoom:
            d = event.angleDelta().y() or event.angleDelta().x()
            if d:
                self.owner.zoom_by(math.pow(1.0015, d))
            event.accept()
        else:
            super().wheelEvent(event)

    def viewportEvent(self, event):
        if event.type() == QEvent.Type.ToolTip:
            text = None
            for item in self.items(event.pos()):
                if hasattr(item, "tooltip"):
                    text = item.tooltip() + self.owner.heat.tooltip(getattr(item, "nid", None))
                    break
                k = item.data(0)
                if isinstance(k, int):
                    text = self.owner.edge_tooltip(k)
                    break
            if text:
                QToolTip.showText(event.globalPos(), text, self)
            else:
                QToolTip.hideText()
            return True
        return super().viewportEvent(event)

    def mouseDoubleClickEvent(self, event):
        item = self.itemAt(event.position().toPoint())
        if isinstance(item, NodeItem):
            gid = item.data_.get("group_id")
            if item.kind == "group" and gid:
                self.owner.foldToggled.emit(str(gid))
            else:
                self.owner.nodeActivated.emit(item.nid)
            event.accept()
            return
        super().mouseDoubleClickEvent(event)

    def contextMenuEvent(self, event):
        item = self.itemAt(event.pos())
        choices = self.owner.fold_choices(item)
        if not choices:
            super().contextMenuEvent(event)
            return
        menu = QMenu(self)
        for text, signal, arg in choices:
            act = menu.addAction(text)
            act.triggered.connect(lambda _c=False, s=signal, a=arg: s.emit(*a))
        menu.exec(event.globalPos())

    def resizeEvent(self, event):
        super().resizeEvent(event)
        self.owner._minimap.place()
        self.owner.heat.place(self.viewport())

    def scrollContentsBy(self, dx, dy):
        super().scrollContentsBy(dx, dy)
        self.owner._minimap.update()

    def keyPressEvent(self, event):
        k = event.key()
        if k in (Qt.Key.Key_Plus, Qt.Key.Key_Equal):
            self.owner.zoom_by(1.25)
        elif k == Qt.Key.Key_Minus:
            self.owner.zoom_by(0.8)
        elif k in (Qt.Key.Key_0, Qt.Key.Key_F):
            self.owner.fit_to_view()
        elif k == Qt.Key.Key_Home:
            self.owner.reset_view()
        else:
            super().keyPressEvent(event)


class GraphView(QWidget):
    """Draws a laid-out graph dict.  Signals: ``nodeSelected(id)`` (single click),
    ``nodeActivated(id)`` (double click), ``foldToggled(group_id)`` (group header click or
    double click on a folded summary node)."""

    nodeSelected = Signal(str)
    nodeActivated = Signal(str)
    foldToggled = Signal(str)
    unfoldAll = Signal()

    def __init__(self, parent: QWidget | None = None, *, dark: bool | None = None):
        super().__init__(parent)
        self.wheel_zooms = False       # plain wheel scrolls, ctrl+wheel zooms (Netron style)
        if dark is None:
            dark = QApplication.instance() is not None and \
                QApplication.palette().color(QPalette.ColorRole.Window).lightness() < 128
        self._style = GraphStyle(bool(dark))
        self.scene = QGraphicsScene(self)
        self.scene.setItemIndexMethod(QGraphicsScene.ItemIndexMethod.BspTreeIndex)
        self.view = _View(self)
        self.view.setScene(self.scene)
        self.view.setBackgroundBrush(self._style.background)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.view)
        self._minimap = Minimap(self)
        self.heat = HeatOverlay(self)
        self._graph: dict | None = None
        self.nodes: dict[str, NodeItem] = {}
        # edges are plain QGraphicsPathItems (painted in C++); per-edge data lives here,
        # item.data(0) is the index.  Arrow heads are batched per horizontal band.
        self.edges: list[QGraphicsPathItem] = []
        self.edge_meta: list[tuple[str, str, str, float, float, float]] = []
        self._arrows: list[QGraphicsPathItem] = []
        self._hi_arrows: QGraphicsPathItem | None = None
        self.groups: dict[str, GroupItem] = {}
        self._roles: dict[str, set[str]] = {}
        self._hi_edges: list[int] = []
        self._incident: dict[str, list[int]] = {}
        self._overview: tuple[QImage, QRectF] | None = None
        self._overview_on = False
        self._quiet = False
        self._node_data: dict[str, dict] = {}          # every node of the graph, built or not
        self.foldable = False   # groups are module paths that fold (FX): right-click offers them
        self._heat: dict[str, QColor] = {}
        self.scene.selectionChanged.connect(self._on_selection)

    # ---------------------------------------------------------------- content
    def clear(self) -> None:
        idle_work().cancel(self)
        idle_work().cancel((self, "overview"))
        self._node_data = {}
        self._heat = {}
        self.heat.set(None, None, TIME, {})  # no legend without the nodes it coloured
        self.scene.blockSignals(True)
        self.scene.clear()
        self.scene.blockSignals(False)
        self.nodes.clear()
        self.edges.clear()
        self.edge_meta.clear()
        self._arrows.clear()
        self._hi_arrows = None
        self.groups.clear()
        self._roles.clear()
        self._hi_edges = []
        self._incident = {}
        self._overview = None
        self._overview_on = False
        self._graph = None
        self._minimap.rebuild()

    def set_graph(self, graph: dict, *, keep_view: bool = False) -> None:
        """Show a laid-out ``graph`` dict (see docs/engine_protocol.md).  The view, minimap and
        every query (find, highlight, centre) work from the data at once; the scene items of a
        big graph follow a slice at a time, those in view first."""
        old_center = self.view.mapToScene(self.view.viewport().rect().center())
        old_scale = self.view.transform().m11()
        self.clear()
        self._graph = graph
        self._node_data = {str(nd["id"]): nd for nd in graph.get("nodes", ())}
        w = float(graph.get("width", 0)) or max((nd["x"] + nd["w"] for nd in self._node_data.values()),
                                                 default=1.0)
        h = float(graph.get("height", 0)) or max((nd["y"] + nd["h"] for nd in self._node_data.values()),
                                                  default=1.0)
        self.scene.setSceneRect(QRectF(0, 0, max(w, 1.0), max(h, 1.0)))
        many = len(self._node_data) > 3000
        self.view.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        self.view.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.MinimalViewportUpdate if many
                                        else QGraphicsView.ViewportUpdateMode.SmartViewportUpdate)
        self._minimap.rebuild()
        if len(self._node_data) > OVERVIEW_NODES:
            self._start_overview()
        if keep_view:
            self.view.resetTransform()
            self.view.scale(old_scale, old_scale)
            self.view.centerOn(old_center)
            self._zoom_changed()
        else:
            self.reset_view()
        work = self._build_items(graph)
        if len(self._node_data) + len(graph.get("edges", ())) <= SYNC_ITEMS:
            for _ in work:
                pass
        else:
            idle_work().submit(self, work)

    def _start_overview(self) -> None:
        """Draw the zoomed-out image between events; until it is done, the items stand in for it."""
        graph, key = self._graph, (self, "overview")
        if graph is None:
            return

        def work():
            for out in overview_slices(graph, self._style):
                if out is not None and self._graph is graph:
                    self._overview = out
                    self._zoom_changed()
                yield

        idle_work().submit(key, work())

    def building(self) -> bool:
        """Whether scene items are still being made (a big graph, a slice at a time)."""
        return idle_work().pending(self) or idle_work().pending((self, "overview"))

    def finish_building(self) -> None:
        idle_work().finish(self)
        idle_work().finish((self, "overview"))

    def _build_items(self, graph: dict):
        """A generator that adds the scene items: frames, the nodes in view, the other nodes,
        the edges and their arrow heads; it yields after every few dozen items."""
        scene = self.scene
        add = scene.addItem
        # (the BSP index batches new items by itself; switching the index method to NoIndex
        # while building and back afterwards makes every later paint visit all items.  No
        # common parent item either: the index only culls top-level items.)
        for k, g in enumerate(sorted(graph.get("groups", ()), key=lambda g: g.get("depth", 1))):
            item = GroupItem(g, self._style, self.foldToggled.emit)
            add(item)
            item.setZValue(-1.0 + g.get("depth", 1) * 0.01)
            item.setVisible(not self._overview_on)
            self.groups[item.gid] = item
            if k % 50 == 49:
                yield
        seen = self.visible_scene_rect()
        nodes = list(graph.get("nodes", ()))
        nodes.sort(key=lambda nd: not seen.intersects(QRectF(nd["x"], nd["y"], nd["w"], nd["h"])))
        roles = self._roles
        for k, nd in enumerate(nodes):
            node = NodeItem(nd, self._style)
            for role, ids in roles.items():
                if node.nid in ids:
                    node.roles.add(role)
            node.heat = self._heat.get(node.nid)
            node.setVisible(not self._overview_on)
            add(node)
            self.nodes[node.nid] = node
            if k % 40 == 39:
                yield
        incident = self._incident
        add_path = scene.addPath
        bands: dict[int, QPainterPath] = {}
        edges, meta = self.edges, self.edge_meta
        for e in graph.get("edges", ()):
            pts = e.get("points")
            if not pts or len(pts) < 2:
                continue
            edge = add_path(edge_path(pts), self._style.edge_pen)
            k = len(edges)
            edge.setData(0, k)
            edge.setZValue(1)
            edge.setVisible(not self._overview_on)
            edges.append(edge)
            src, dst = str(e["src"]), str(e["dst"])
            tx, ty = pts[-1]
            sgn = -1.0 if ty < pts[-2][1] else 1.0
            meta.append((src, dst, str(e.get("label", "") or ""), tx, ty, sgn))
            incident.setdefault(src, []).append(k)
            incident.setdefault(dst, []).append(k)
            band = bands.get(int(ty // ARROW_BAND))
            if band is None:
                band = bands[int(ty // ARROW_BAND)] = QPainterPath()
            add_arrow(band, tx, ty, sgn)
            if k % 40 == 39:
                yield
        for band in bands.values():
            arrows = add_path(band, QPen(Qt.PenStyle.NoPen), self._style.edge_brush)
            arrows.setZValue(1.5)
            arrows.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
            arrows.setVisible(not self._overview_on)
            self._arrows.append(arrows)
        if self.scene.selectedItems():
            self._on_selection()      # the selected node's edges exist now

    def fold_choices(self, item) -> list[tuple[str, SignalInstance, tuple]]:
        """Right-click menu of a node or frame: fold the group it is in or any group around it
        (whether or not the layout could draw that group's frame), unfold a folded box, unfold
        all.  ``(text, signal, args)`` entries."""
        if not self.foldable:
            return []
        out: list[tuple[str, SignalInstance, tuple]] = []
        path = ""
        if isinstance(item, NodeItem):
            if item.kind == "group" and item.data_.get("group_id"):
                gid = str(item.data_["group_id"])
                out.append((f"Unfold {gid}", self.foldToggled, (gid,)))
                path = str(item.data_.get("module_path") or "")
            else:
                path = str(item.data_.get("group") or item.data_.get("module_path") or "")
        elif isinstance(item, GroupItem):
            path = item.fold_id
        parts = path.split(".") if path else []
        for k in range(len(parts), 0, -1):
            p = ".".join(parts[:k])
            out.append((f"Fold {p}", self.foldToggled, (p,)))
        if any(nd.get("kind") == "group" for nd in self._node_data.values()):
            out.append(("Unfold all", self.unfoldAll, ()))
        return out

    def graph(self) -> dict | None:
        return self._graph

    # ---------------------------------------------------------------- view control
    def zoom(self) -> float:
        return self.view.transform().m11()

    def zoom_by(self, factor: float) -> None:
        z = self.zoom()
        factor = max(0.002 / z, min(6.0 / z, factor))
        self.view.scale(factor, factor)
        self._zoom_changed()

    def set_zoom(self, z: float) -> None:
        self.view.resetTransform()
        self.view.scale(z, z)
        self._zoom_changed()

    def _zoom_changed(self) -> None:
        on = self._overview is not None and self.zoom() < OVERVIEW_ZOOM
        if on != self._overview_on:
            self._overview_on = on
            self._set_items_visible(not on)
            self.view.resetCachedContent()
            self.view.viewport().update()
        self._minimap.update()

    def fit_to_view(self) -> None:
        r = self.scene.sceneRect()
        if r.isEmpty():
            return
        self.view.resetTransform()
        self.view.fitInView(r, Qt.AspectRatioMode.KeepAspectRatio)
        if self.zoom() > 1.5:
            self.set_zoom(1.5)
            self.view.centerOn(r.center())
        self._zoom_changed()

    # node kinds that are the model's inputs (not weights, buffers or constants)
    INPUT_KINDS = ("input", "param", "placeholder")
    READABLE_ZOOM = 0.8

    def reset_view(self) -> None:
        """Default view: the whole graph when it fits at a zoom where labels are drawn; else the
        model's inputs at a readable zoom (the top row of a big graph is constants and checks)."""
        r = self.scene.sceneRect()
        if r.isEmpty() or not self._node_data:
            return
        vp = self.view.viewport().rect()
        fit = min(vp.width() / r.width(), vp.height() / r.height()) * 0.97
        if fit >= LOD_TEXT + 0.08:
            self.set_zoom(min(fit, 1.25))
            self.view.centerOn(r.center())
        else:
            self.set_zoom(self.READABLE_ZOOM)
            nodes = list(self._node_data.values())
            inputs = [n for n in nodes if n.get("kind") in self.INPUT_KINDS]
            anchor = min(inputs or nodes, key=lambda n: (n["y"], n["x"]))
            half_w = vp.width() / 2 / self.zoom()
            half_h = vp.height() / 2 / self.zoom()
            cx = anchor["x"] + anchor["w"] / 2
            cx = max(r.left() + half_w, min(cx, r.right() - half_w))
            top = max(r.top(), anchor["y"] - 60)
            self.view.centerOn(QPointF(cx, top + half_h))
        self._minimap.update()

    def visible_scene_rect(self) -> QRectF:
        return self.view.mapToScene(self.view.viewport().rect()).boundingRect()

    def center_on(self, nid: str) -> None:
        nd = self._node_data.get(str(nid))
        if nd is None:
            return
        if self.zoom() < LOD_TEXT + 0.2:
            self.set_zoom(0.9)
        self.view.centerOn(QPointF(nd["x"] + nd["w"] / 2, nd["y"] + nd["h"] / 2))
        self._minimap.update()

    # ---------------------------------------------------------------- selection, search, marks
    def _on_selection(self) -> None:
        sel = [i for i in self.scene.selectedItems() if isinstance(i, NodeItem)]
        st = self._style
        for k in self._hi_edges:
            self.edges[k].setPen(st.edge_pen)
            self.edges[k].setZValue(1)
        self._hi_edges = []
        if self._hi_arrows is not None:
            self.scene.removeItem(self._hi_arrows)
            self._hi_arrows = None
        if sel:
            nid = sel[0].nid
            ks = self._incident.get(nid, [])
            if ks:
                arrows = QPainterPath()
                for k in ks:
                    self.edges[k].setPen(st.edge_pen_hi)
                    self.edges[k].setZValue(1.2)
                    _src, _dst, _lab, tx, ty, sgn = self.edge_meta[k]
                    add_arrow(arrows, tx, ty, sgn)
                self._hi_edges = list(ks)
                self._hi_arrows = self.scene.addPath(arrows, QPen(Qt.PenStyle.NoPen), st.edge_brush_hi)
                self._hi_arrows.setZValue(1.7)
                self._hi_arrows.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
            if not self._quiet:
                self.nodeSelected.emit(nid)

    def edge_tooltip(self, k: int) -> str:
        src, dst, label, *_ = self.edge_meta[k]
        text = f"{esc_html(src)} → {esc_html(dst)}"
        if label:
            text += f"<br><b>{esc_html(label)}</b>"
        node = self.nodes.get(src)
        if node is not None and node.sublabel and node.sublabel != label:
            text += f"<br>{esc_html(node.sublabel)}"
        return text

    def select(self, nid: str | None, *, center: bool = True, emit: bool = True) -> None:
        """Select a node (None clears).  ``emit=False`` for selections that come from another
        pane, so that linked panes do not echo each other."""
        self._quiet = not emit
        try:
            self.scene.clearSelection()
            if nid is not None and str(nid) in self._node_data and str(nid) not in self.nodes:
                self.finish_building()
            item = self.nodes.get(str(nid)) if nid is not None else None
            if item is not None:
                item.setSelected(True)
                if center:
                    self.center_on(item.nid)
        finally:
            self._quiet = False

    def selected(self) -> str | None:
        sel = [i for i in self.scene.selectedItems() if isinstance(i, NodeItem)]
        return sel[0].nid if sel else None

    def find(self, text: str) -> list[str]:  # type: ignore[override]  # not QWidget.find (a window by id)
        """Ids of nodes whose label, op/target, shape or id contains ``text`` (case-insensitive);
        marks them "found", selects and centres the first."""
        text = (text or "").strip().lower()
        if not text:
            self.highlight([], "found")
            return []
        hits = []
        for nid, d in self._node_data.items():
            hay = " ".join(str(v) for v in (nid, d.get("label", nid), d.get("sublabel", "") or "",
                                             d.get("op", ""), d.get("target", ""),
                                             d.get("callee", "") or ""))
            if text in hay.lower():
                hits.append(nid)
        self.highlight(hits, "found")
        if hits:
            self.select(hits[0])
        return hits

    def highlight(self, ids: Iterable[str], role: str = "linked") -> None:
        """Mark nodes with a role ("linked", "found", "added", "removed", "changed"); replaces
        the previous set of that role.  ``highlight([], role)`` clears it."""
        new = {str(i) for i in ids}
        old = self._roles.get(role, set())
        for nid in old - new:
            it = self.nodes.get(nid)
            if it is not None:
                it.roles.discard(role)
                it.update()
        for nid in new - old:
            it = self.nodes.get(nid)
            if it is not None:
                it.roles.add(role)
                it.update()
        self._roles[role] = {i for i in new if i in self._node_data}

    def highlighted(self, role: str) -> set[str]:
        return set(self._roles.get(role, set()))

    def clear_highlights(self) -> None:
        for role in list(self._roles):
            self.highlight([], role)

    def set_heat(self, values: dict[str, float] | None, vmax: float | None = None,
                 scale: HeatScale = TIME) -> None:
        """Colour nodes by value on `scale` (kernel ms, or error): hottest = `vmax` (default: the
        largest value); None or {} clears. The legend shows while a colouring is on."""
        for it in self.nodes.values():
            if it.heat is not None:
                it.heat = None
                it.update()
        self._heat = self.heat.set(values, vmax, scale, self._node_data)
        self.heat.place(self.view.viewport())
        for nid, color in self._heat.items():
            hot = self.nodes.get(nid)
            if hot is not None:
                hot.heat = color
                hot.update()

    def set_dark(self, dark: bool) -> None:
        self._style = GraphStyle(dark)
        for coll in (self.nodes.values(), self.groups.values()):
            for it in coll:
                it.style = self._style
                if isinstance(it, NodeItem):
                    it._elided = None
        hi = set(self._hi_edges)
        for k, e in enumerate(self.edges):
            e.setPen(self._style.edge_pen_hi if k in hi else self._style.edge_pen)
        for a in self._arrows:
            a.setBrush(self._style.edge_brush)
        if self._hi_arrows is not None:
            self._hi_arrows.setBrush(self._style.edge_brush_hi)
        if self._graph is not None and len(self._node_data) > OVERVIEW_NODES:
            self._start_overview()
        self.view.setBackgroundBrush(self._style.background)
        self.scene.update()
        self._minimap.rebuild()

    # ---------------------------------------------------------------- export
    def export_png(self, path: str, *, max_side: int = 12000, scale: float = 2.0) -> bool:
        """Render the whole graph to a PNG (2x, capped at ``max_side`` pixels)."""
        self.finish_building()
        with self._items_visible():
            return render_png(self.scene, self._style.background, path, max_side=max_side, scale=scale)

    def export_svg(self, path: str) -> bool:
        self.finish_building()
        with self._items_visible():
            return render_svg(self.scene, self._style.background, path)

    def _set_items_visible(self, on: bool) -> None:
        for coll in (self.groups.values(), self.edges, self._arrows, self.nodes.values()):
            for it in coll:
                it.setVisible(on)

    @contextlib.contextmanager
    def _items_visible(self):
        hidden = self._overview_on
        if hidden:
            self._set_items_visible(True)
        try:
            yield
        finally:
            if hidden:
                self._set_items_visible(False)
