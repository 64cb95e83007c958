"""The scene items of the graph view and how they look: node boxes, group frames, edge paths
with arrow heads, the colours of a theme, and the cheap overview image of a whole graph.

Items are light ``QGraphicsItem`` subclasses whose ``paint`` checks the level of detail first
(a far-zoomed node is one ``fillRect``); tooltips are computed on demand by the view.
"""
from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import (QBrush, QColor, QFont, QFontMetricsF, QImage, QPainter, QPainterPath,
                           QPen, QPolygonF)
from PySide6.QtWidgets import QGraphicsItem

from irviz.ui.widgets import palette as pal

LOD_TEXT = 0.42       # below this zoom, node text is not drawn
LOD_SHAPE = 0.22      # below this, nodes are plain rectangles, edges have no arrows
OVERVIEW_ZOOM = 0.12  # big graphs below this zoom are drawn from one cached image
OVERVIEW_NODES = 1500
ROLE_PRIORITY = pal.ROLE_PRIORITY


class GraphStyle:
    """Pens, brushes and fonts shared by all items (one object, swapped on theme change)."""

    def __init__(self, dark: bool):
        self.dark = dark
        self.kinds: dict[str, tuple[QBrush, QPen, QColor, QBrush]] = {}
        for k in set(pal.LIGHT) | set(pal.ALIASES):
            fill, border, text = pal.kind_colors(k, dark)
            f, b = QColor(fill), QColor(border)
            mid = QColor((f.red() + 2 * b.red()) // 3, (f.green() + 2 * b.green()) // 3,
                         (f.blue() + 2 * b.blue()) // 3)
            # (fill, border pen, text colour, far-zoom fill: stronger so shapes still read)
            self.kinds[k] = (QBrush(f), QPen(b, 1.2), QColor(text), QBrush(mid))
        self.default = self.kinds["op"]
        self.roles = {r: QColor(pal.role_color(r, dark)) for r in pal.ROLES_LIGHT}
        self.role_pens = {r: QPen(c, 3.0) for r, c in self.roles.items()}
        c = pal.chrome(dark)
        self.background = QColor(c["background"])
        self.edge_color = QColor(c["edge"])
        self.edge_pen = QPen(self.edge_color, 1.3)
        self.edge_pen.setCapStyle(Qt.PenCapStyle.RoundCap)
        self.edge_pen_hi = QPen(self.roles["selected"], 2.2)
        self.edge_brush = QBrush(self.edge_color)
        self.edge_brush_hi = QBrush(self.roles["selected"])
        self.group_pen = QPen(QColor(c["group_border"]), 1.0, Qt.PenStyle.DashLine)
        gf = QColor(c["group_fill"])
        self.group_fills = []
        for depth in range(8):
            g = QColor(gf)
            g.setAlpha(10 + 4 * min(depth, 5))
            self.group_fills.append(QBrush(g))
        hf = QColor(gf)
        hf.setAlpha(34)
        self.group_header = QBrush(hf)
        self.group_text = QColor(c["group_text"])
        self.minimap_bg = QColor(c["minimap_bg"])
        self.minimap_view = QColor(c["minimap_view"])
        self.label_font = QFont()
        self.label_font.setPixelSize(12)
        self.label_font.setBold(True)
        self.sub_font = QFont()
        self.sub_font.setPixelSize(10)
        self.group_font = QFont()
        self.group_font.setPixelSize(11)
        self.label_fm = QFontMetricsF(self.label_font)
        self.sub_fm = QFontMetricsF(self.sub_font)
        self.group_fm = QFontMetricsF(self.group_font)

    def kind(self, kind: str):
        k = self.kinds.get(kind)
        if k is None:
            k = self.kinds.get(pal.ALIASES.get(kind, ""), self.default)
        return k


# --------------------------------------------------------------------------- items

_DARK_TEXT = QColor("#1b1b1b")
_LIGHT_TEXT = QColor("#ffffff")


class NodeItem(QGraphicsItem):
    Type = QGraphicsItem.UserType + 1  # type: ignore[attr-defined]  # in PySide6, not in its stubs

    def __init__(self, data: dict, style: GraphStyle, parent: QGraphicsItem | None = None):
        super().__init__(parent)
        self.nid = str(data["id"])
        self.data_ = data
        self.style = style
        w, h = float(data.get("w", 120)), float(data.get("h", 36))
        self.rect = QRectF(0.0, 0.0, w, h)
        self._br = QRectF(-2.0, -2.0, w + 4.0, h + 4.0)
        self.label = str(data.get("label", self.nid))
        self.sublabel = str(data.get("sublabel", "") or "")
        self.kind = str(data.get("kind", "op"))
        # a node marked failed (e.g. where an import failed) is drawn red whatever its kind
        self.style_kind = "failed" if data.get("failed") else self.kind
        self.roles: set[str] = set()
        self.heat: QColor | None = None
        self._elided: tuple[str, str] | None = None
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemIsSelectable)
        self.setPos(float(data.get("x", 0.0)), float(data.get("y", 0.0)))
        self.setZValue(2)

    def type(self):  # Qt API
        return NodeItem.Type

    def boundingRect(self):
        return self._br

    def role(self) -> str | None:
        for r in ROLE_PRIORITY:
            if r in self.roles:
                return r
        return None

    def paint(self, p: QPainter, option, widget=None):
        st = self.style
        brush, pen, text, far = st.kind(self.style_kind)
        lod = option.levelOfDetailFromTransform(p.worldTransform())
        if lod < LOD_TEXT:
            brush = far
        if self.heat is not None:
            brush = self.heat
            text = _DARK_TEXT if self.heat.lightness() > 140 else _LIGHT_TEXT
        role = self.role()
        sel = self.isSelected()
        if lod < LOD_SHAPE:
            p.fillRect(self.rect, st.roles["selected"] if sel else (st.roles[role] if role else brush))
            return
        p.setBrush(brush)
        if sel:
            p.setPen(st.role_pens["selected"])
        elif role:
            p.setPen(st.role_pens[role])
        else:
            p.setPen(pen)
        p.drawRoundedRect(self.rect, 5.0, 5.0)
        if lod < LOD_TEXT:
            return
        if self.kind == "group":      # folded summary: a "+" badge says "double-click to open"
            p.setPen(pen)
            r = self.rect
            p.drawLine(QPointF(r.right() - 12, r.top() + 8), QPointF(r.right() - 6, r.top() + 8))
            p.drawLine(QPointF(r.right() - 9, r.top() + 5), QPointF(r.right() - 9, r.top() + 11))
        if self._elided is None:
            w = self.rect.width() - 10
            self._elided = (st.label_fm.elidedText(self.label, Qt.TextElideMode.ElideMiddle, w),
                            st.sub_fm.elidedText(self.sublabel, Qt.TextElideMode.ElideMiddle, w))
        lab, sub = self._elided
        p.setPen(text)
        r = self.rect
        if sub:
            p.setFont(st.label_font)
            p.drawText(QRectF(r.x() + 4, r.y() + 3, r.width() - 8, r.height() * 0.52),
                       Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignBottom, lab)
            p.setFont(st.sub_font)
            p.drawText(QRectF(r.x() + 4, r.y() + r.height() * 0.55, r.width() - 8, r.height() * 0.42),
                       Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop, sub)
        else:
            p.setFont(st.label_font)
            p.drawText(r, Qt.AlignmentFlag.AlignCenter, lab)

    def tooltip(self) -> str:
        d = self.data_
        lines = [f"<b>{esc_html(self.label)}</b>  <i>{esc_html(self.kind)}</i>", f"id: {esc_html(self.nid)}"]
        if self.sublabel:
            lines.append(esc_html(self.sublabel))
        for key in ("target", "op", "callee", "module_path", "group", "source", "count", "decision", "error"):
            v = d.get(key)
            if v not in (None, "", []) and str(v) != self.label:
                lines.append(f"{key}: {esc_html(str(v))}")
        return "<br>".join(lines)


ARROW_BAND = 1500.0   # arrow heads are batched into one path item per band of this height


def edge_path(pts) -> QPainterPath:
    """Smooth edge through the layout's points: vertical tangents at every point, stopping at
    the base of the arrow head."""
    path = QPainterPath()
    x0, y0 = pts[0]
    path.moveTo(x0, y0)
    last = len(pts) - 1
    for i in range(1, last + 1):
        x1, y1 = pts[i]
        if i == last:
            y1 = y1 - 6.0 if y1 >= y0 else y1 + 6.0
        dy = (y1 - y0) * 0.5
        path.cubicTo(x0, y0 + dy, x1, y1 - dy, x1, y1)
        x0, y0 = x1, y1
    return path


def add_arrow(path: QPainterPath, tx: float, ty: float, s: float) -> None:
    path.moveTo(tx, ty)
    path.lineTo(tx - 4.5, ty - 8.0 * s)
    path.lineTo(tx + 4.5, ty - 8.0 * s)
    path.closeSubpath()


class GroupItem(QGraphicsItem):
    Type = QGraphicsItem.UserType + 3  # type: ignore[attr-defined]  # in PySide6, not in its stubs
    HEADER = 20.0

    def __init__(self, data: dict, style: GraphStyle, on_fold: Callable[[str], None],
                 parent: QGraphicsItem | None = None):
        super().__init__(parent)
        self.gid = str(data["id"])
        self.fold_id = str(data.get("fold_id") or self.gid)   # one group may have several frames
        self.label = str(data.get("label", self.gid))
        self.depth = int(data.get("depth", 1))
        self.members = data.get("members", [])
        self.style = style
        self.on_fold = on_fold      # called with fold_id when the title is clicked
        self.rect = QRectF(float(data["x"]), float(data["y"]), float(data["w"]), float(data["h"]))
        self.header = QRectF(self.rect.x(), self.rect.y(), self.rect.width(), self.HEADER)
        self._br = self.rect.adjusted(-1.0, -1.0, 1.0, 1.0)
        self._path = QPainterPath()
        self._path.addRect(self.header)
        self.setZValue(0)
        self.setAcceptedMouseButtons(Qt.MouseButton.LeftButton)
        self.setCursor(Qt.CursorShape.PointingHandCursor)

    def type(self):
        return GroupItem.Type

    def boundingRect(self):
        return self._br

    def shape(self):
        return self._path        # only the header is clickable; the body lets drags through

    def paint(self, p: QPainter, option, widget=None):
        st = self.style
        lod = option.levelOfDetailFromTransform(p.worldTransform())
        p.setBrush(st.group_fills[min(self.depth, 7)])
        p.setPen(st.group_pen if lod >= LOD_SHAPE else Qt.PenStyle.NoPen)
        p.drawRoundedRect(self.rect, 6.0, 6.0)
        if lod < LOD_TEXT * 0.8:
            # far zoom: the titles are the map; draw them at a constant on-screen size
            # nested frames start 30 scene px apart: only the outer titles when that is tight
            if (self.rect.height() * lod > 60 and self.rect.width() * lod > 50 and lod > 0.02
                    and (self.depth == 1 or 30 * lod >= 14)):
                f = QFont(st.group_font)
                f.setPixelSize(max(1, round(12 / lod)))
                f.setBold(True)
                p.setFont(f)
                p.setPen(st.group_text)
                r = self.rect.adjusted(6 / lod, 4 / lod, -4 / lod, 0)
                p.drawText(r, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop, self.label)
            return
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(st.group_header)
        p.drawRoundedRect(self.header.adjusted(0.5, 0.5, -0.5, 0), 6.0, 6.0)
        p.setPen(st.group_text)
        p.setFont(st.group_font)
        text = st.group_fm.elidedText(f"▾ {self.label}", Qt.TextElideMode.ElideMiddle, self.rect.width() - 12)
        p.drawText(self.header.adjusted(7, 0, -4, 0), Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft, text)

    def mousePressEvent(self, event):
        if self.header.contains(event.pos()):
            event.accept()
            self.on_fold(self.fold_id)
        else:
            event.ignore()

    def tooltip(self) -> str:
        return f"<b>{esc_html(self.label)}</b><br>{len(self.members)} nodes — click the title to fold"


def overview_image(graph: dict, style: GraphStyle, max_side: int = 4096) -> tuple[QImage, QRectF]:
    """The whole graph drawn cheaply from the data (no items): boxes and straight edges."""
    work = overview_slices(graph, style, max_side)
    for out in work:
        if out is not None:
            return out
    raise AssertionError("overview_slices ended without an image")


def overview_slices(graph: dict, style: GraphStyle, max_side: int = 4096, per_slice: int = 400):
    """:func:`overview_image` a few hundred shapes at a time, for the idle loop: yields None after
    each slice and the (image, rect) pair last. An 8B LLM's Relax graph (3,300 nodes) drew for
    ~400 ms in one go, freezing the window."""
    W = max(1.0, float(graph.get("width", 1)))
    H = max(1.0, float(graph.get("height", 1)))
    s = min(1.0, max_side / max(W, H))
    img = QImage(QSize(max(1, int(W * s)), max(1, int(H * s))), QImage.Format.Format_ARGB32_Premultiplied)
    img.fill(Qt.GlobalColor.transparent)
    min_w, min_h = 1.2 / s, 1.2 / s
    pen = QPen(style.edge_color, 0)          # cosmetic 1-px lines

    def draw_group(p, grp):
        p.fillRect(QRectF(grp["x"], grp["y"], grp["w"], grp["h"]), style.group_fills[min(int(grp.get("depth", 1)), 7)])

    def draw_edge(p, e):
        pts = e.get("points")
        if pts and len(pts) >= 2:
            p.setPen(pen)
            p.drawPolyline(QPolygonF([QPointF(x, y) for x, y in pts]))

    def draw_node(p, nd):
        _brush, pen_, _t, _f = style.kind(nd.get("kind", "op"))
        p.fillRect(QRectF(nd["x"], nd["y"], max(min_w, nd["w"]), max(min_h, nd["h"])), pen_.color())

    for draw, items in ((draw_group, graph.get("groups", ())), (draw_edge, graph.get("edges", ())),
                        (draw_node, graph.get("nodes", ()))):
        items = list(items)
        for start in range(0, len(items), per_slice):
            p = QPainter(img)
            p.scale(s, s)
            for it in items[start:start + per_slice]:
                draw(p, it)
            p.end()
            yield None
    yield img, QRectF(0, 0, W, H)


def esc_html(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
