"""GUI start-up figures (offscreen).

1. launch -> window shown: a fresh `python` subprocess that imports irviz, builds the main window
   (which starts the engine process in the background) and prints when the window is shown;
   measured from just before the subprocess is spawned (includes interpreter start-up).
2. open -> panes filled: in this process, open MODEL (default sample:resnet18) and wait until the
   FX, Relax and TensorIR panes (and the rest) show step 0; then step once and time the same.
3. the longest event-loop stall (the window frozen) during each of those, and during Build & Run:
   a 5 ms QTimer records the largest gap between its ticks (target: under ~100 ms).

    python benchmarks/gui_startup.py [--model sample:resnet18] [--repeats 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import sys, time
t_import = time.time()
from irviz.ui.app import make_app
from PySide6.QtCore import QSettings, QTimer
app = make_app()
from irviz.ui.main_window import MainWindow
settings = QSettings(QSettings.Format.IniFormat, QSettings.Scope.UserScope, "irviz", "bench")
w = MainWindow(settings=settings)
w.show()
def shown():
    print("SHOWN", time.time(), flush=True)
    w.bridge.shutdown()
    app.quit()
QTimer.singleShot(0, shown)
app.exec()
"""


def launch_times(repeats: int) -> list[float]:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen",
           "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = []
    for _ in range(repeats):
        t0 = time.time()
        r = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=120)
        line = next((l for l in r.stdout.splitlines() if l.startswith("SHOWN")), None)
        if line is None:
            raise RuntimeError(f"child failed:\n{r.stdout}\n{r.stderr}")
        out.append(float(line.split()[1]) - t0)
    return out


class StallProbe:
    """Largest gap between ticks of a 5 ms timer: how long the GUI thread stopped answering.

    ``worst_cpu`` is the most CPU time the GUI thread itself used between two ticks: on a shared
    machine a wall-clock gap also counts the time the OS ran other processes instead.

    With ``trace=True`` a watchdog thread samples the GUI thread's Python stack while a tick is
    late, so every stall over ``report_ms`` can be printed with where the time went."""

    def __init__(self, trace: bool = False, report_ms: float = 100.0):
        from PySide6.QtCore import QTimer

        self.timer = QTimer()
        self.timer.setInterval(5)
        self.timer.timeout.connect(self._tick)
        self.last = None
        self.worst = 0.0
        self.last_cpu = None
        self.worst_cpu = 0.0
        self.trace = trace
        self.report_ms = report_ms
        self.stalls: list[tuple[float, float, dict]] = []   # (ms, GUI CPU ms, {stack: samples})
        self._samples: dict = {}
        self._stop = None

    def _tick(self):
        now = time.perf_counter()
        cpu = time.thread_time()
        used = 0.0 if self.last_cpu is None else cpu - self.last_cpu
        self.worst_cpu = max(self.worst_cpu, used)
        self.last_cpu = cpu
        if self.last is not None:
            gap = now - self.last
            self.worst = max(self.worst, gap)
            if self.trace and gap * 1e3 > self.report_ms:
                self.stalls.append((gap * 1e3, used * 1e3, self._samples))
        self._samples = {}
        self.last = now

    def _watch(self, main_id: int) -> None:
        import traceback

        while not self._stop.wait(0.004):
            last = self.last
            if last is None or time.perf_counter() - last < 0.02:
                continue
            frame = sys._current_frames().get(main_id)
            if frame is None:
                continue
            stack = tuple(f"{os.path.relpath(fs.filename, REPO) if fs.filename.startswith(REPO) else os.path.basename(fs.filename)}"
                          f":{fs.lineno} {fs.name}" for fs in traceback.extract_stack(frame)[-14:])
            self._samples[stack] = self._samples.get(stack, 0) + 1

    def start(self):
        self.last, self.worst = None, 0.0
        self.last_cpu, self.worst_cpu = None, 0.0
        self.timer.start()
        if self.trace:
            import threading

            self._stop = threading.Event()
            threading.Thread(target=self._watch, args=(threading.get_ident(),), daemon=True).start()
        # a first tick before the caller acts: what the action itself does on the GUI thread counts
        from PySide6.QtCore import QCoreApplication

        deadline = time.perf_counter() + 1.0
        while self.last is None and time.perf_counter() < deadline:
            QCoreApplication.processEvents()
            time.sleep(0.002)

    def stop(self) -> float:
        self.timer.stop()
        if self._stop is not None:
            self._stop.set()
            self._stop = None
        return self.worst * 1e3

    def report(self, phase: str) -> None:
        for ms, cpu_ms, samples in self.stalls:
            print(f"  stall {ms:.0f} ms ({cpu_ms:.0f} ms GUI CPU) during {phase}; GUI thread stacks "
                  "(samples, innermost last):")
            for stack, n in sorted(samples.items(), key=lambda kv: -kv[1])[:3]:
                print(f"    {n} x " + "\n        ".join(stack))
        self.stalls = []


def settle(app, seconds: float = 2.0) -> None:
    """Keep the event loop (and the stall probe) running while the panes finish what they do a
    slice at a time after their replies: graph items, syntax colours, diff colours."""
    from irviz.cli.snapshot import wait_until

    wait_until(app, lambda: False, seconds)


def open_times(model: str, timeout: float, build: bool = True, trace: bool = False) -> dict:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    sys.path.insert(0, REPO)
    from PySide6.QtCore import QSettings

    from irviz.cli.snapshot import wait_until
    from irviz.ui.app import make_app
    from irviz.ui.main_window import MainWindow

    app = make_app()
    settings = QSettings(QSettings.Format.IniFormat, QSettings.Scope.UserScope, "irviz", "bench")
    t0 = time.perf_counter()
    w = MainWindow(settings=settings)
    w.resize(1600, 1000)
    w.show()
    wait_until(app, lambda: w.bridge.ready, timeout)
    engine_ready = time.perf_counter() - t0
    res = {"engine_ready_s": engine_ready}

    probe = StallProbe(trace=trace)
    probe.start()
    t0 = time.perf_counter()
    w.open_spec(model)
    wait_until(app, lambda: bool(w.state.get("model")) or w.last_error is not None, timeout)
    res["open_reply_s"] = time.perf_counter() - t0
    if not wait_until(app, lambda: w.all_filled() or w.last_error is not None, timeout) or w.last_error:
        raise RuntimeError(f"open failed: {w.last_error}")
    res["open_to_filled_s"] = time.perf_counter() - t0
    settle(app)
    res["open_stall_ms"] = probe.stop()
    res["open_stall_cpu_ms"] = probe.worst_cpu * 1e3
    probe.report("open")
    res["fx_nodes"] = len((w.fx.graph_dict or {}).get("nodes", []))
    res["relax_nodes"] = len((w.relax.graph_dict or {}).get("nodes", []))

    probe.start()
    t0 = time.perf_counter()
    w.step()
    wait_until(app, lambda: w.state.get("cursor") == 1, timeout)
    wait_until(app, w.all_filled, timeout)
    res["step_to_filled_s"] = time.perf_counter() - t0
    settle(app)
    res["step_stall_ms"] = probe.stop()
    res["step_stall_cpu_ms"] = probe.worst_cpu * 1e3
    probe.report("step")
    res["tir_functions"] = len(w.tir.functions or [])

    # the diff of all changed functions, drawn again in each mode (the step drew side by side)
    probe.start()
    for mode in ("unified", "side"):
        w.diff.view.set_mode(mode)
        wait_until(app, lambda: False, 0.3)
    res["diff_stall_ms"] = probe.stop()
    res["diff_stall_cpu_ms"] = probe.worst_cpu * 1e3
    probe.report("diff")
    res["diff_functions"] = len((w.diff.result or {}).get("functions") or [])

    if not build:
        w.bridge.shutdown()
        w.close()
        return res
    probe.start()
    run_pane = w.run
    t0 = time.perf_counter()
    run_pane.build_run()
    wait_until(app, lambda: run_pane.result is not None or w.last_error is not None, timeout)
    res["build_run_s"] = time.perf_counter() - t0
    res["build_run_stall_ms"] = probe.stop()
    res["build_run_stall_cpu_ms"] = probe.worst_cpu * 1e3
    probe.report("build+run")
    w.bridge.shutdown()
    w.close()
    return res


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="sample:resnet18")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--no-build", action="store_true", help="skip Build & Run (big models: minutes)")
    ap.add_argument("--trace", action="store_true",
                    help="print the GUI thread's stacks during every stall over 100 ms")
    ap.add_argument("--no-launch", action="store_true", help="skip the launch timing")
    args = ap.parse_args()
    if hasattr(os, "getloadavg"):
        print(f"load average now: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    if not args.no_launch:
        launch = launch_times(args.repeats)
        print(f"launch -> window shown: median {statistics.median(launch):.2f} s "
              f"(runs: {', '.join(f'{t:.2f}' for t in launch)}; includes interpreter start-up)")
    r = open_times(args.model, args.timeout, build=not args.no_build, trace=args.trace)
    print(f"engine process says ready (it then imports torch and TVM in the background): "
          f"{r['engine_ready_s']:.2f} s after the window was created")
    print(f"open {args.model} -> all panes filled: {r['open_to_filled_s']:.2f} s "
          f"(engine open reply {r['open_reply_s']:.2f} s: torch.export + import; then the panes "
          f"{r['open_to_filled_s'] - r['open_reply_s']:.2f} s; FX {r['fx_nodes']} nodes, "
          f"Relax {r['relax_nodes']} nodes)")
    print(f"step 1 (LegalizeOps) -> all panes filled: {r['step_to_filled_s']:.2f} s "
          f"({r['tir_functions']} prim_funcs)")
    if "build_run_s" in r:
        print(f"Build & Run of step 1: {r['build_run_s']:.2f} s")
    phases = [("open", "open"), ("step", "step"),
              ("diff", f"diff of all {r['diff_functions']} changed functions"), ("build_run", "build+run")]
    print("longest GUI stall, wall clock (GUI thread's own CPU time within one stall): "
          + ", ".join(f"{label} {r[k + '_stall_ms']:.0f} ms ({r[k + '_stall_cpu_ms']:.0f} ms)"
                      for k, label in phases if k + "_stall_ms" in r)
          + " (target: under ~100 ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
