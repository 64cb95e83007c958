"""The Run pane names outputs that cannot match by nature, and still says MISMATCH otherwise."""
from __future__ import annotations

import os

from fake_bridge import FakeBridge, open_mlp


def _build_run_reply(**extra):
    base = {"ok": False, "max_abs_error": 3.69, "max_rel_error": 12.6, "allclose": False,
            "reference": True, "reference_name": "PyTorch",
            "tvm_ms": 0.5, "torch_ms": 0.25, "threads": 1, "build_seconds": 0.8, "kernels": []}
    base.update(extra)
    return base


def _run(qtbot, win, reply):
    bridge = win.bridge
    compute = FakeBridge._compute

    def answer(self, cmd, args):
        return dict(reply) if cmd == "build_run" else compute(self, cmd, args)

    bridge._compute = answer.__get__(bridge)
    open_mlp(qtbot, win)
    win.run.result = None
    win.act_build_run.trigger()
    qtbot.waitUntil(lambda: win.run.result is not None, timeout=5000)


def test_random_op_reads_not_comparable(qtbot, win, tmp_path):
    _run(qtbot, win, _build_run_reply(verdict="not comparable",
                                      not_comparable="random op aten.randn_like"))
    assert win.run.verdict.text() == "NOT COMPARABLE"
    assert win.run.status.text().endswith("differ from PyTorch by nature: random op aten.randn_like.")
    assert "MISMATCH" not in win.run.verdict.text()
    assert win.run.fields["max_abs_error"].text() != "—"
    shot = os.environ.get("IRVIZ_SHOTS")
    if shot:
        qtbot.wait(100)  # let the layout settle before the picture
        win.run.grab().save(os.path.join(shot, "run_not_comparable.png"))


def test_a_genuine_mismatch_still_reads_mismatch(qtbot, win):
    _run(qtbot, win, _build_run_reply(verdict="mismatch", not_comparable=None))
    assert win.run.verdict.text() == "MISMATCH"
    status = win.run.status.text()
    assert "outputs differ from PyTorch: max abs error" in status and "by nature" not in status, status
    shot = os.environ.get("IRVIZ_SHOTS")
    if shot:
        qtbot.wait(100)  # let the layout settle before the picture
        win.run.grab().save(os.path.join(shot, "run_mismatch.png"))
