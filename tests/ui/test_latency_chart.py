"""LatencyChart: draws a trace, log-scale y, hover text, click -> step; Run pane asks the engine."""
import pytest
from PySide6.QtCore import QPointF, Qt

from irviz.ui import themes
from irviz.ui.widgets.latency_chart import LatencyChart

TRACE = [
    {"step": 0, "pass": "import", "ok": True, "tvm_ms": 100.0, "torch_ms": 3.0, "allclose": True,
     "max_abs_error": 0.0, "build_seconds": 0.5, "error": None},
    {"step": 1, "pass": "LegalizeOps", "ok": False, "tvm_ms": None, "torch_ms": None, "allclose": None,
     "max_abs_error": None, "build_seconds": None, "error": "default_build pass X failed: boom"},
    {"step": 2, "pass": "FuseTIR", "ok": True, "tvm_ms": 1.0, "torch_ms": 2.5, "allclose": False,
     "max_abs_error": 0.5, "build_seconds": 0.4, "error": None},
]


def _nonblank(img) -> bool:
    first = img.pixel(0, 0)
    return any(img.pixel(x, y) != first for x in range(0, img.width(), 7) for y in range(0, img.height(), 7))


def test_chart_draws_and_log_scale_puts_100ms_above_1ms(qtbot):
    w = LatencyChart()
    qtbot.addWidget(w)
    w.resize(600, 360)
    w.set_trace(TRACE)
    img = w.grab().toImage()
    assert not img.isNull() and img.width() == 600 and _nonblank(img)
    assert w.y_of(100.0) < w.y_of(1.0)  # higher on screen
    # log scale: 1 -> 10 and 10 -> 100 are the same distance
    assert abs((w.y_of(1.0) - w.y_of(10.0)) - (w.y_of(10.0) - w.y_of(100.0))) < 1e-6
    assert w.torch_ms == 2.5  # the smallest per-step torch median
    lo, hi, ticks = w.axis()
    assert lo <= 1.0 and hi >= 100.0 and len(ticks) >= 3


def test_tooltips_and_click(qtbot):
    w = LatencyChart()
    qtbot.addWidget(w)
    w.resize(600, 360)
    w.set_trace(TRACE)
    assert "100 ms" in w.tooltip_text(0) and "torch" in w.tooltip_text(0)
    assert "boom" in w.tooltip_text(1)
    assert "DIFFER" in w.tooltip_text(2)
    clicked = []
    w.stepClicked.connect(clicked.append)
    y = int(w.plot_rect().center().y())
    qtbot.mouseClick(w, Qt.MouseButton.LeftButton, pos=QPointF(w.x_of(2), y).toPoint())
    assert clicked == [2]
    assert w.slot_at(1.0) is None  # left of the plot


def test_dark_theme_and_empty(qtbot):
    themes.apply_theme("dark")
    try:
        w = LatencyChart()
        qtbot.addWidget(w)
        w.resize(400, 260)
        assert not w.grab().toImage().isNull()  # "press ..." text
        w.set_trace(TRACE)
        img = w.grab().toImage()
        assert _nonblank(img)
    finally:
        themes.apply_theme("light")


def test_run_pane_asks_for_a_latency_trace_and_shows_it(qtbot):
    from PySide6.QtCore import QObject, QTimer, Signal

    from irviz.ui.events import EventHub
    from irviz.ui.panes.build_run import RunPane

    class Bridge(QObject):
        replied = Signal(int, str, object)
        failed = Signal(int, str, dict)
        stateChanged = Signal(dict)

        def __init__(self):
            super().__init__()
            self.sent = []

        def request(self, cmd, supersede=None, **args):
            self.sent.append((cmd, args))
            rid = len(self.sent)
            if cmd == "latency_trace":
                QTimer.singleShot(0, lambda: self.replied.emit(
                    rid, cmd, {"trace": TRACE, "torch_ms": 2.5, "threads": 2, "reference": True,
                               "planned": 0}))
            return rid

    bridge, hub = Bridge(), EventHub()
    pane = RunPane(bridge, hub)
    qtbot.addWidget(pane)
    steps = [{"index": i, "pass": e["pass"], "params": {}} for i, e in enumerate(TRACE)]
    bridge.stateChanged.emit({"model": "m", "spec": "sample:m", "importer": "x", "cursor": 2,
                              "steps": steps})
    pane.latency_button.click()
    assert bridge.sent[-1] == ("latency_trace", {"steps": "all"})
    qtbot.waitUntil(lambda: pane.latency is not None, timeout=3000)
    assert pane.chart.trace and pane.chart.current_step == 2
    assert "2 of 3 steps built" in pane.latency_status.text()
    assert "outputs differ at step 2" in pane.latency_status.text()
    selected = []
    hub.stepSelected.connect(selected.append)
    pane.chart.stepClicked.emit(0)
    assert selected == [0] and bridge.sent[-1] == ("jump", {"index": 0})


def test_error_mode_plots_max_error_on_a_log_axis_and_an_exact_match_at_the_bottom(qtbot):
    w = LatencyChart()
    qtbot.addWidget(w)
    w.resize(600, 360)
    trace = [{"step": 0, "pass": "import", "ok": True, "tvm_ms": 3.0, "max_abs_error": 0.0, "allclose": True},
             {"step": 1, "pass": "A", "ok": True, "tvm_ms": 2.0, "max_abs_error": 1e-6, "allclose": True},
             {"step": 2, "pass": "Wrong", "ok": True, "tvm_ms": 1.0, "max_abs_error": 0.5, "allclose": False},
             {"step": 3, "pass": "Broken", "ok": False, "tvm_ms": None, "error": "no kernel"}]
    w.set_trace(trace)
    latency_y = [w.y_of(w.plotted(e)) for e in trace[:3]]
    assert latency_y[0] < latency_y[2]  # 3 ms above 1 ms
    w.set_quantity("error")
    assert w.line_value() is None and w.plotted(trace[3]) is None
    assert w.plotted(trace[0]) == w.error_floor() == 1e-7
    ys = [w.y_of(w.plotted(e)) for e in trace[:3]]
    assert ys[2] < ys[1] < ys[0]  # the wrong step is highest, the exact match lowest
    lo, hi, _ = w.axis()
    assert lo <= 1e-7 and hi >= 0.5
    assert w.tick_text(1e-3) == "1e-03"
    img = w.grab().toImage()
    assert _nonblank(img)
    import os
    if os.environ.get("IRVIZ_SHOTS"):
        w.grab().save(os.path.join(os.environ["IRVIZ_SHOTS"], "chart_error_fake.png"))
    with pytest.raises(ValueError):
        w.set_quantity("speed")
