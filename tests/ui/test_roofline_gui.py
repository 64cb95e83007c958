"""The roofline in the app: the chart puts each kernel under its roof, the kernel table shows GFLOP/s,
bytes moved and % of roof, the Roofline tab says where the roofs come from."""
from __future__ import annotations

from fake_bridge import FakeBridge, open_mlp
from PySide6.QtCore import QPoint, QPointF, Qt

ROOFLINE = {
    "peak_gflops": 100.0, "peak_source": "measured: FMA chains on one core x 1 thread",
    "bandwidth_gbs": 10.0, "bandwidth_source": "measured: STREAM triad", "ridge_intensity": 10.0,
    "threads": 1,
    "peak": {"gflops": 100.0, "formula": {"vector_lanes": 16, "fma_units": 2, "fma_units_source": "assumed",
                                          "threads": 1, "clock_mhz": 2600.0, "clock_source": "/proc/cpuinfo",
                                          "gflops": 83.2, "implied_clock_ghz": 3.12}},
    "kernels": [
        {"name": "matmul", "calls": 1, "ms": 0.3, "flops": 1.2e7, "bytes": 2.4e5, "gflops": 40.0, "gbs": 0.8,
         "intensity": 50.0, "roof_gflops": 100.0, "bound": "compute", "pct_of_roof": 40.0, "in_cache": False},
        {"name": "add", "calls": 1, "ms": 0.05, "flops": 1e5, "bytes": 2e5, "gflops": 2.0, "gbs": 4.0,
         "intensity": 0.5, "roof_gflops": 5.0, "bound": "memory", "pct_of_roof": 40.0, "in_cache": True},
        {"name": "relu", "calls": 1, "ms": 0.05, "flops": None, "bytes": None, "gflops": None, "gbs": None,
         "intensity": None, "roof_gflops": None, "bound": None, "pct_of_roof": None, "in_cache": None}],
    "total": {"flops": 1.21e7, "bytes": 440000, "kernel_ms": 0.4, "gflops": 34.6, "pct_of_peak": 34.6,
              "kernels_without_work": 1},
}


def test_the_chart_puts_each_kernel_under_its_roof(qtbot):
    from irviz.ui.widgets.roofline_chart import RooflineChart

    chart = RooflineChart()
    qtbot.addWidget(chart)
    chart.resize(600, 360)
    chart.set_roofline(ROOFLINE)
    assert [k["name"] for k in chart.points()] == ["matmul", "add"]
    assert [k["name"] for k in chart.not_drawn()] == ["relu"]
    x_lo, x_hi, y_lo, y_hi = chart.axes()
    assert x_lo < 0.5 < 10 < 50 < x_hi and y_lo < 2 < 100 < y_hi
    matmul, add = chart.points()
    # log-log: the matmul is half a decade right of the ridge and 0.4 decades under the peak
    assert chart.x_of(50.0) > chart.x_of(10.0) > chart.x_of(0.5)
    assert chart.y_of(40.0) > chart.y_of(100.0)        # under the roof (y grows downwards)
    assert chart.radius(matmul) > chart.radius(add)    # 75% of the time against 12.5%
    at = QPointF(chart.x_of(0.5), chart.y_of(2.0))
    assert chart.point_at(at) == 1
    tip = chart.tooltip_text(1)
    assert "add" in tip and "memory-bound" in tip and "40% of roof" in tip and "cache" in tip
    image = chart.grab().toImage()
    assert image.width() >= 600
    chart.set_roofline(None)
    assert chart.axes() is None and chart.points() == []


def test_run_pane_shows_gflops_and_pct_of_roof_and_the_roofs(qtbot, win):
    reply = {"ok": True, "allclose": True, "max_abs_error": 0.0, "max_rel_error": 0.0, "reference": True,
             "reference_name": "PyTorch", "tvm_ms": 0.5, "torch_ms": 0.6, "threads": 1, "build_seconds": 0.5,
             "kernels": [{"name": k["name"], "calls": 1, "ms": k["ms"], "binding": b}
                         for k, b in zip(ROOFLINE["kernels"], ("lv", "lv1", "lv2"))],
             "roofline": ROOFLINE}
    compute = FakeBridge._compute
    win.bridge._compute = (lambda self, cmd, args: dict(reply) if cmd == "build_run"
                           else compute(self, cmd, args)).__get__(win.bridge)
    open_mlp(qtbot, win)
    win.run.result = None
    win.act_build_run.trigger()
    qtbot.waitUntil(lambda: win.run.result is not None, timeout=5000)
    table = win.run.kernels
    rows = {table.item(r, 0).text(): r for r in range(table.rowCount())}
    cell = lambda name, head: table.item(rows[name], table.column_index(head)).text()
    assert cell("matmul", "GFLOP/s") == "40" and cell("matmul", "% roof") == "40"
    assert cell("matmul", "Moved") == "240 kB"
    assert cell("relu", "GFLOP/s") == "—"
    assert "compute-bound" in table.item(rows["matmul"], table.column_index("% roof")).toolTip()
    tab = win.run.roofline
    assert tab.chart.peak() == 100.0 and len(tab.chart.points()) == 2
    assert "FMA chains" in tab.note.text() and "STREAM triad" in tab.note.text()
    assert "34.6% of peak" in tab.note.text()
    win.run.tabs.setCurrentWidget(tab)
    qtbot.waitUntil(lambda: tab.chart.isVisible() and tab.chart.width() > 100)
    at = QPoint(round(tab.chart.x_of(0.5)), round(tab.chart.y_of(2.0)))
    with qtbot.waitSignal(tab.bindingClicked) as sig:     # a dot names its binding, as a row does
        qtbot.mouseClick(tab.chart, Qt.MouseButton.LeftButton, pos=at)
    assert sig.args == ["lv1"]
