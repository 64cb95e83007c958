"""The Run pane's Estimate tab and the Memory tab's figures by a symbolic size, from engine replies."""
from __future__ import annotations

from irviz.ui.panes.estimate_tab import EstimateTab, estimate_summary, fmt_total
from irviz.ui.panes.memory_tab import by_length_text

REPLY = {"step": 9, "from_step": 7, "from_pass": "RemovePurityChecking", "estimated_ms": 12.5,
         "measured": 1, "cached": 2, "seconds": 0.4, "dims": {"seq": 128},
         "dims_source": {"seq": "example inputs"}, "notes": [], "cpu": {"model": "AMD EPYC"},
         "not_estimated": [{"name": "odd", "kind": "tir", "calls": 2, "why": "does not build alone"}],
         "kernels": [{"name": "small", "calls": 4, "ms": 0.5, "total_ms": 2.0, "share": 0.16, "shapes": "8"},
                     {"name": "big", "calls": 1, "ms": 10.5, "total_ms": 10.5, "share": 0.84,
                      "shapes": "128x4096, 4096x4096"}]}


def test_the_estimate_tab_lists_kernels_by_total_and_says_what_it_left_out(qtbot):
    asked = []
    tab = EstimateTab(lambda purpose, cmd, **args: asked.append((purpose, cmd, args)), lambda: 9,
                      state=lambda: {"model": "m", "spec": "m.py", "steps": [], "planned": []})
    qtbot.addWidget(tab)
    tab.estimate()
    assert asked == [("estimate", "estimate", {"step": 9})] and not tab.button.isEnabled()
    tab.show_result(REPLY)
    assert tab.button.isEnabled() and "12.5 ms" in tab.total.text()
    assert [tab.table.item(r, 0).text() for r in range(2)] == ["big", "small"]
    assert tab.table.item(0, 4).text() == "84.0"
    text = tab.status.text()
    assert "kernels of step 7 (RemovePurityChecking)" in text and "seq = 128 (example inputs)" in text
    assert "not estimated: odd ×2 (does not build alone)" in text and "AMD EPYC" in text
    assert "kernels of step" not in estimate_summary(dict(REPLY, from_step=9))  # its own step


def test_memory_by_length_text():
    plan = {"by_length": {"dim": "seq", "fixed": {"batch": 2}, "drawn": 8, "rows": [
        {"value": 128, "planned_bytes": 2 << 20, "peak_bytes": 1 << 20},
        {"value": 512, "error": "could not plan"}]}}
    text = by_length_text(plan)
    assert text.startswith("Activations by seq (batch = 2)")
    assert "128: planned 2.0 MiB, peak 1.0 MiB" in text and "512: could not plan" in text
    assert text.endswith("Drawn below at seq = 8.")
    assert by_length_text({"by_length": None}) == "" and by_length_text({}) == ""


def test_totals_read_in_seconds_once_they_are_long():
    assert fmt_total(0.7248) == "0.7248 ms" and fmt_total(3210.0) == "3.21 s"
    assert fmt_total(12_730_465.0) == "12,730 s"
