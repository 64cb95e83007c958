"""The graph view's minimap: the whole graph drawn once from the graph data into a cached image
(not by rendering the scene a second time), the visible rect on top, click or drag to move."""
from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QImage, QPainter, QPen
from PySide6.QtWidgets import QWidget

if TYPE_CHECKING:  # the graph view imports this module
    from irviz.ui.widgets.graph_view import GraphView


class Minimap(QWidget):
    """Overview in the corner: the whole graph from a cached image plus the visible rect."""

    MAX_W, MAX_H = 170, 210

    def __init__(self, owner: GraphView):
        # owner: the GraphView; read for its graph, style, view and visible rect
        # a child of the GraphView, not of the viewport: viewport scrolling moves its children
        super().__init__(owner)
        self.owner = owner
        self.image: QImage | None = None
        self.sx = self.sy = 1.0
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.hide()

    def rebuild(self) -> None:
        g = self.owner._graph
        if not g or not g.get("nodes"):
            self.image = None
            self.hide()
            return
        W = max(1.0, float(g.get("width", 1)))
        H = max(1.0, float(g.get("height", 1)))
        self._limits = self._max_size()
        s = min(self._limits[0] / W, self._limits[1] / H)
        mw, mh = max(36.0, W * s), max(36.0, H * s)
        self.sx, self.sy = mw / W, mh / H
        self.resize(int(mw) + 2, int(mh) + 2)
        st = self.owner._style
        img = QImage(QSize(int(mw), int(mh)), QImage.Format.Format_ARGB32_Premultiplied)
        img.fill(st.minimap_bg)
        p = QPainter(img)
        p.scale(self.sx, self.sy)
        for grp in g.get("groups", ()):
            if grp.get("depth", 1) == 1:
                p.fillRect(QRectF(grp["x"], grp["y"], grp["w"], grp["h"]), st.group_fills[3])
        for nd in g["nodes"]:
            brush, pen, _t, _f = st.kind(nd.get("kind", "op"))
            r = QRectF(nd["x"], nd["y"], nd["w"], nd["h"])
            # keep tiny nodes visible: at least 1.5 minimap pixels
            if r.width() * self.sx < 1.5:
                r.setWidth(1.5 / self.sx)
            if r.height() * self.sy < 1.5:
                r.setHeight(1.5 / self.sy)
            p.fillRect(r, pen.color())
        p.end()
        self.image = img
        self.place()
        self.show()

    def _max_size(self) -> tuple[int, int]:
        # a fixed-size overview hid a quarter of narrow panes: keep it to a corner of the viewport
        vp = self.owner.view.viewport()
        return (int(min(self.MAX_W, max(60, vp.width() * 0.18))),
                int(min(self.MAX_H, max(60, vp.height() * 0.28))))

    def place(self) -> None:
        if self.image is not None and getattr(self, "_limits", None) != self._max_size():
            self.rebuild()  # calls place() again with the new size
            return
        vp = self.owner.view.viewport()
        br = vp.mapTo(self.owner, vp.rect().bottomRight())
        self.move(br.x() - self.width() - 8, br.y() - self.height() - 8)
        self.raise_()

    def paintEvent(self, event):
        if self.image is None:
            return
        p = QPainter(self)
        st = self.owner._style
        p.fillRect(self.rect(), st.minimap_bg)
        p.drawImage(1, 1, self.image)
        p.setPen(QPen(st.group_pen.color(), 1))
        p.drawRect(self.rect().adjusted(0, 0, -1, -1))
        vis = self.owner.visible_scene_rect()
        r = QRectF(1 + vis.x() * self.sx, 1 + vis.y() * self.sy,
                   max(3.0, vis.width() * self.sx), max(3.0, vis.height() * self.sy))
        c = QColor(st.minimap_view)
        fill = QColor(c)
        fill.setAlpha(40)
        p.setBrush(fill)
        p.setPen(QPen(c, 1.5))
        p.drawRect(r)
        p.end()

    def _jump(self, pos) -> None:
        self.owner.view.centerOn(QPointF((pos.x() - 1) / self.sx, (pos.y() - 1) / self.sy))

    def mousePressEvent(self, event):
        self._jump(event.position())

    def mouseMoveEvent(self, event):
        if event.buttons() & Qt.MouseButton.LeftButton:
            self._jump(event.position())
