"""The kernel table marks a kernel whose time is not to be trusted, and says why; so do its ms and
% headers when the kernels together add up to more than the run."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

pytest.importorskip("pytestqt")

WHY = "4.33 ms per run... 2.17 ms per call in the run, 0.069 ms per call timed alone with the same arguments (31× apart)"
KERNELS = [{"name": "fused_matmul_add1_prepacked", "calls": 2, "ms": 4.33, "binding": "lv3",
            "reliable": False, "reason": WHY, "alone_ms": 0.138},
           {"name": "fused_matmul_add2_prepacked", "calls": 2, "ms": 0.138, "binding": "lv5",
            "reliable": True, "reason": None, "alone_ms": 0.13}]


def test_an_unreliable_kernel_is_marked_with_its_reason(qtbot):
    from irviz.ui.panes.kernel_table import KernelTable

    t = KernelTable()
    qtbot.addWidget(t)
    t.set_kernels(KERNELS)
    ms = t.column_index("ms")
    assert t.kernel_at(0)["name"] == "fused_matmul_add1_prepacked"
    assert t.item(0, ms).text().startswith("⚠") and t.item(0, 0).text().startswith("⚠")
    assert WHY in t.item(0, ms).toolTip() and "0.138 ms per run" in t.item(0, ms).toolTip()
    assert t.item(1, ms).text() == "0.138" and t.item(1, ms).toolTip() == ""
    assert "⚠" not in t.horizontalHeaderItem(ms).text()  # the sum was not questioned


def test_kernels_adding_up_to_more_than_the_run_mark_the_headers(qtbot):
    from irviz.ui.panes.kernel_table import KernelTable

    t = KernelTable()
    qtbot.addWidget(t)
    reason = "the kernels add up to 4.47 ms per run, more than the whole run's 0.513 ms allows"
    t.set_kernels(KERNELS, reliable=False, reason=reason)
    for header in ("ms", "%"):
        head = t.horizontalHeaderItem(t.column_index(header))
        assert head.text() == f"{header} ⚠" and reason in head.toolTip()
    assert reason in t.toolTip()
    t.set_kernels(KERNELS[1:])  # the next run's figures hold: the mark goes
    assert t.horizontalHeaderItem(t.column_index("ms")).text() == "ms" and t.toolTip() == ""


def test_a_run_whose_kernels_do_not_add_up_says_so_in_the_run_pane(qtbot, win):
    from fake_bridge import FakeBridge, open_mlp

    reason = "the kernels add up to 4.47 ms per run, more than the whole run's 0.513 ms allows"
    reply = {"ok": True, "allclose": True, "max_abs_error": 0.0, "max_rel_error": 0.0, "reference": True,
             "reference_name": "PyTorch", "tvm_ms": 0.513, "torch_ms": 0.9, "threads": 2, "build_seconds": 0.8,
             "kernels": KERNELS, "kernels_reliable": False, "kernels_reason": reason,
             "timing_text": "each timed alone: median of 10 runs, 2 threads"}
    compute = FakeBridge._compute
    win.bridge._compute = (lambda self, cmd, args: dict(reply) if cmd == "build_run"
                           else compute(self, cmd, args)).__get__(win.bridge)
    open_mlp(qtbot, win)
    win.run.result = None
    win.act_build_run.trigger()
    qtbot.waitUntil(lambda: win.run.result is not None, timeout=5000)
    assert f"kernel times unreliable: {reason}" in win.run.timing_note.text()
    t = win.run.kernels
    assert t.horizontalHeaderItem(t.column_index("ms")).text() == "ms ⚠"
    assert t.item(0, t.column_index("ms")).text().startswith("⚠")
