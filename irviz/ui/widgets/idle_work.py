"""Work the window does a slice at a time between events, so that no reply freezes it.

Big replies (a 1,000-node graph, a 2,000-row diff, TVMScript to highlight) are turned into scene
items, colours and formats by generators that yield after a small unit of work.  All of them
share one budget per turn of the event loop: with four views busy at once, each slicing its own
work with its own timer, the turns added up to 100-400 ms stalls on full-size GPT-2.

    idle_work().submit(key, generator)   # a newer task with the same key replaces the older one
    idle_work().finish(key)              # run the rest now (e.g. before an export)
"""
from __future__ import annotations

import time
import traceback
from collections.abc import Iterator

from PySide6.QtCore import QObject, QTimer

BUDGET_S = 0.008


class IdleWork(QObject):
    def __init__(self, parent=None):
        super().__init__(parent)
        self._tasks: dict[object, Iterator] = {}
        self._timer = QTimer(self)
        self._timer.setInterval(0)
        self._timer.timeout.connect(self._turn)
        self.budget_s = BUDGET_S

    def submit(self, key, work: Iterator) -> None:
        self._tasks.pop(key, None)
        self._tasks[key] = work
        if not self._timer.isActive():
            self._timer.start()

    def cancel(self, key) -> None:
        self._tasks.pop(key, None)

    def pending(self, key=None) -> bool:
        return bool(self._tasks) if key is None else key in self._tasks

    def finish(self, key) -> None:
        work = self._tasks.pop(key, None)
        if work is not None:
            for _ in work:
                pass

    def _turn(self) -> None:
        deadline = time.perf_counter() + self.budget_s
        # round robin: every task moves on each turn, the first one does not starve the rest
        while self._tasks and time.perf_counter() < deadline:
            for key in list(self._tasks):
                work = self._tasks.get(key)
                if work is None:
                    continue
                try:
                    next(work)
                except StopIteration:
                    if self._tasks.get(key) is work:
                        del self._tasks[key]
                except Exception:  # one broken task must not stop the others
                    if self._tasks.get(key) is work:
                        del self._tasks[key]
                    traceback.print_exc()
                if time.perf_counter() >= deadline:
                    break
        if not self._tasks:
            self._timer.stop()


_INSTANCE: IdleWork | None = None


def idle_work() -> IdleWork:
    global _INSTANCE
    if _INSTANCE is None:
        _INSTANCE = IdleWork()
    return _INSTANCE
