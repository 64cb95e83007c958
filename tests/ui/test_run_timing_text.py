"""The Run pane's timing line: a ratio that contention made up is not shown, the reason is."""
from __future__ import annotations

from fake_bridge import FakeBridge, open_mlp

from irviz.ui.panes.build_run import ratio_text


def _show(qtbot, win, **extra):
    reply = {"ok": True, "allclose": True, "max_abs_error": 0.0, "max_rel_error": 0.0,
             "reference": True, "reference_name": "PyTorch", "tvm_ms": 0.05, "torch_ms": 0.1,
             "threads": 2, "build_seconds": 0.8, "kernels": [],
             "timing_text": "each timed alone: median of 10 runs, 2 threads", **extra}
    compute = FakeBridge._compute
    win.bridge._compute = (lambda self, cmd, args: dict(reply) if cmd == "build_run"
                           else compute(self, cmd, args)).__get__(win.bridge)
    open_mlp(qtbot, win)
    win.run.result = None
    win.act_build_run.trigger()
    qtbot.waitUntil(lambda: win.run.result is not None, timeout=5000)


def test_unreliable_figures_show_the_reason_instead_of_a_ratio(qtbot, win):
    why = "PyTorch: its threads waited for a core 70% of the time (after 3 rounds of blocks)"
    _show(qtbot, win, reliable=False, reason=why,
          timing_text="each timed alone: median of 10 runs, 2 threads · unreliable: " + why)
    ratio = win.run.fields["ratio"].text()
    assert ratio.startswith("unreliable") and "×" not in ratio
    assert win.run.fields["ratio"].toolTip() == why and why in win.run.timing_note.text()
    assert "trust the min" not in win.run.timing_note.text()
    assert win.run.fields["torch_ms"].text() != "—"     # the figures stay, marked by the line above


def test_reliable_figures_show_the_ratio(qtbot, win):
    _show(qtbot, win, reliable=True, reason=None)
    assert win.run.fields["ratio"].text() == "0.5×"
    # an older engine says nothing about reliability: the ratio is shown as before
    assert ratio_text({"tvm_ms": 1.0, "torch_ms": 4.0}) == "0.25×"
