"""A graph scene written to a file: PNG (scaled, capped in pixels) or SVG (vector)."""
from __future__ import annotations

import math

from PySide6.QtCore import QRectF, QSize
from PySide6.QtGui import QColor, QImage, QPainter
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QGraphicsScene


def render_png(scene: QGraphicsScene, background: QColor, path: str, *, max_side: int = 12000,
               scale: float = 2.0) -> bool:
    """The whole scene at `scale`, shrunk to fit ``max_side`` pixels and 120 Mpixel."""
    r = scene.sceneRect()
    if r.isEmpty():
        return False
    s = min(scale, max_side / max(r.width(), r.height()))
    s = min(s, math.sqrt(120e6 / max(1.0, r.width() * r.height())))
    img = QImage(QSize(max(1, int(r.width() * s)), max(1, int(r.height() * s))),
                 QImage.Format.Format_ARGB32_Premultiplied)
    img.fill(background)
    p = QPainter(img)
    p.setRenderHints(QPainter.RenderHint.Antialiasing | QPainter.RenderHint.TextAntialiasing)
    scene.render(p, QRectF(img.rect()), r)
    p.end()
    return img.save(str(path), "PNG")  # type: ignore[call-overload]  # PySide6 takes the format as str, its stubs say bytes


def render_svg(scene: QGraphicsScene, background: QColor, path: str) -> bool:
    r = scene.sceneRect()
    if r.isEmpty():
        return False
    gen = QSvgGenerator()
    gen.setFileName(str(path))
    gen.setSize(QSize(int(r.width()), int(r.height())))
    gen.setViewBox(QRectF(0, 0, r.width(), r.height()))
    gen.setTitle("irviz graph")
    p = QPainter(gen)
    p.fillRect(QRectF(0, 0, r.width(), r.height()), background)
    scene.render(p, QRectF(0, 0, r.width(), r.height()), r)
    p.end()
    return True
