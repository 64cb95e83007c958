"""The roofline in the app: the chart puts each kernel under its roof, the kernel table shows GFLOP/s,
bytes moved and % of roof, the Roofline tab says where the roofs come from."""
from __future__ import annotations

import math

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


def _levels_block():
    levels = [{"level": "L1", "gbs": 400.0, "capacity_bytes": 64 * 1024, "source": "sweep", "adjusted": None},
              {"level": "L2", "gbs": 200.0, "capacity_bytes": 2 << 20, "source": "sweep", "adjusted": None},
              {"level": "L3", "gbs": 100.0, "capacity_bytes": 32 << 20, "source": "sweep",
               "adjusted": "measured 90 GB/s, under DRAM's 100: raised to it"},
              {"level": "DRAM", "gbs": 10.0, "capacity_bytes": None, "source": "STREAM triad", "adjusted": None}]
    kernels = [dict(ROOFLINE["kernels"][0], level="L2", level_gbs=200.0, working_set_bytes=240000),
               dict(ROOFLINE["kernels"][1], level="L1", level_gbs=400.0, working_set_bytes=200000 // 4),
               {"name": "take", "calls": 1, "ms": 0.01, "flops": 1e5, "bytes": 9.4e7, "gflops": 10.0,
                "gbs": 9400.0, "intensity": 1e-3, "roof_gflops": 0.01, "bound": "memory", "pct_of_roof": 94000.0,
                "level": "DRAM", "level_gbs": 10.0, "working_set_bytes": 94000000, "above_roof": True,
                "above_roof_reason": "timed faster than the DRAM roof measured here (10 GB/s); the time or the "
                                     "byte count is off", "reliable": False, "timing_reason": "waited for a core"},
               ROOFLINE["kernels"][2]]
    total = dict(ROOFLINE["total"], intensity=0.1, roof_ms=0.2, pct_of_roof=50.0, above_roof=False)
    return dict(ROOFLINE, levels=levels, kernels=kernels, total=total)


def test_the_chart_draws_a_roof_per_level_and_marks_a_kernel_above_its_roof(qtbot):
    from irviz.ui.panes.kernel_roofline import roofs_text
    from irviz.ui.widgets.roofline_chart import RooflineChart, level_color

    chart = RooflineChart()
    qtbot.addWidget(chart)
    chart.resize(700, 420)
    block = _levels_block()
    chart.set_roofline(block)
    assert chart.roofs() == [("L1", 400.0), ("L2", 200.0), ("L3", 100.0), ("DRAM", 10.0)]
    x_lo, x_hi, _, _ = chart.axes()
    assert x_lo < 100 / 400 and 100 / 10 < x_hi   # every level's ridge shows
    names = [k["name"] for k in chart.points()]
    assert names == ["matmul", "add", "take"] and chart.total_point() == (0.1, 34.6)
    # each dot in its level's colour: the L1 kernel's fill is L1's green over the background
    image = chart.grab().toImage()
    add = chart.points()[1]
    px = image.pixelColor(round(chart.x_of(add["intensity"])), round(chart.y_of(add["gflops"])))
    l1, dram = level_color("L1", False), level_color("DRAM", False)
    assert abs(px.hsvHue() - l1.hsvHue()) < 15 < abs(px.hsvHue() - dram.hsvHue())   # over white, the hue stays
    dist = lambda a, b: abs(a.red() - b.red()) + abs(a.green() - b.green()) + abs(a.blue() - b.blue())
    # the L1 slope is drawn in L1's colour: a pixel near the line at the ridge's left has it
    x = 10 ** ((math.log10(x_lo) + math.log10(100 / 400)) / 2)
    cx, cy = round(chart.x_of(x)), round(chart.y_of(400 * x))
    near = [image.pixelColor(cx + dx, cy + dy) for dx in range(-2, 3) for dy in range(-2, 3)]
    assert min(dist(c, l1) for c in near) < 60
    tip = chart.tooltip_text(2)
    assert "above its roof" in tip and "DRAM roof measured here" in tip and "waited for a core" in tip
    assert "held against the L1 roof" in chart.tooltip_text(1)
    text = roofs_text(dict(block, kernels_reliable=False, kernels_reason="they add up to more than the run"))
    assert "L1 400 GB/s" in text and "DRAM 10 GB/s" in text and "raised to it" in text
    assert "1 kernel timed above its roof (take)" in text and "50% of their roofs" in text
    assert "times are not reliable: they add up to more than the run" in text
    # the kernel table: the level column, and a % of roof over 100 marked with its reason
    from irviz.ui.panes.kernel_roofline import add_roofline_columns, set_roofline
    from irviz.ui.panes.kernel_table import KernelTable

    table = KernelTable()
    qtbot.addWidget(table)
    add_roofline_columns(table)
    table.set_kernels([{"name": k["name"], "calls": 1, "ms": k["ms"]} for k in block["kernels"]])
    set_roofline(table, block)
    rows = {table.item(r, 0).text(): r for r in range(table.rowCount())}
    cell = lambda name, head: table.item(rows[name], table.column_index(head))
    assert cell("matmul", "Level").text() == "L2" and cell("add", "Level").text() == "L1"
    assert cell("matmul", "% roof").text() == "40"
    assert cell("take", "% roof").text() == "9.4e+04 !" and "byte count is off" in cell("take", "% roof").toolTip()
