"""`irviz snapshot MODEL --steps N --out FILE.png`: render the main window offscreen after N steps.

Starts the app offscreen (unless a platform is already chosen), opens MODEL, steps N times, waits
until every pane shows the current step, resizes the window and saves a grab of it. With
`--build-run --json PATH` it also writes the Run pane's figures as shown, so the app's own figures
can be checked by a script."""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time


HELP = "render the main window after N steps to a PNG, offscreen"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model")
    p.add_argument("--steps", type=int, default=0)
    p.add_argument("--out", required=True)
    p.add_argument("--pipeline", default="zero")
    p.add_argument("--passes", metavar="FILE", action="append", default=[],
                   help="a pass file loaded before the pipeline is read (as check --passes)")
    p.add_argument("--no-weights", action="store_true",
                   help="structure only: the model built on the meta device (as check --no-weights)")
    p.add_argument("--size", default="1600x1000")
    p.add_argument("--theme", default="light", choices=("light", "dark"))
    p.add_argument("--select", default=None,
                   help="FX node to select, showing the cross-links ('auto': the first op that maps to a kernel)")
    p.add_argument("--build-run", action="store_true", help="also Build & Run the last step")
    p.add_argument("--json", default=None, metavar="PATH",
                   help="with --build-run: write the Run pane's figures as shown to PATH ('-': stdout)")
    p.add_argument("--timeout", type=float, default=600.0)


def wait_until(app, predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        app.processEvents()
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def run_figures(win, pipeline: str) -> dict:
    """The Run pane's figures as the window shows them (`shown`: each field's text), beside the
    numbers they came from, so a script can check what a user would read."""
    pane = win.run
    r = pane.result or {}
    tvm_ms, torch_ms = r.get("tvm_ms"), r.get("torch_ms")
    reliable = r.get("reliable")
    return {
        "step": pane.built_step, "pipeline": pipeline, "func": r.get("func"),
        "verdict": pane.verdict.text() or None,
        "tvm_ms": tvm_ms, "torch_ms": torch_ms,
        "ratio": (tvm_ms / torch_ms) if tvm_ms and torch_ms and reliable is not False else None,
        "reliable": reliable, "reason": r.get("reason"),
        "max_abs_error": r.get("max_abs_error"), "max_rel_error": r.get("max_rel_error"),
        "threads": r.get("threads"), "torch_threads": r.get("torch_threads"),
        "shown": {k: label.text() for k, label in pane.fields.items()},
        "timing_note": pane.timing_note.text(),
        "error": pane.error,
    }


def write_figures(path: str, figures: dict) -> None:
    # NaN (no torch figure for an IR file) is not JSON: null instead
    clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in figures.items()}
    text = json.dumps(clean, indent=2)
    if path == "-":
        print(text)
    else:
        with open(path, "w") as f:
            f.write(text + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="irviz snapshot", description=HELP)
    add_arguments(p)
    return run(p.parse_args(argv))


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    # Qt is imported only after the platform is chosen, and never by the other subcommands
    from irviz.ui.display_check import display_problem

    problem = display_problem()   # only an explicit platform that needs a display can fail here
    if problem:
        print(problem, file=sys.stderr)
        return 2
    try:
        w, h = (int(x) for x in args.size.lower().split("x"))
    except ValueError:
        print(f"irviz snapshot: --size must look like 1600x1000, not {args.size!r}", file=sys.stderr)
        return 2

    from PySide6.QtCore import QSettings

    from irviz.ui.app import make_app
    from irviz.ui.main_window import MainWindow
    from irviz.ui.widgets.idle_work import idle_work

    app = make_app()
    settings = QSettings(QSettings.Format.IniFormat, QSettings.Scope.UserScope, "irviz", "snapshot")
    settings.clear()  # a snapshot is reproducible: default layout, no remembered geometry
    win = MainWindow(settings=settings)
    win.set_theme(args.theme, save=False)
    win.resize(w, h)
    win.show()
    failure: list[str] = []

    def failed(_i: int, cmd: str, err: dict) -> None:
        if cmd in ("open", "step", "set_pipeline", "build_run", "load_pass_file"):
            failure.append(f"{cmd}: {err.get('stage')}: {err.get('message')}")
    win.bridge.failed.connect(failed)
    for path in args.passes:  # the engine answers in order: loaded before the open reads the pipeline
        win.pipeline.load_pass_file(path if path.startswith("sample:") else os.path.abspath(path))

    def settled() -> bool:
        return bool(failure) or win.all_filled()

    win.open_spec(args.model, pipeline=args.pipeline, no_weights=args.no_weights)
    if not wait_until(app, lambda: failure or win.state.get("model"), args.timeout) or failure:
        print(f"irviz snapshot: could not open {args.model}: {'; '.join(failure) or 'timeout'}",
              file=sys.stderr)
        return 1
    for i in range(args.steps):
        before = int(win.state.get("cursor", 0))
        if not win.act_step.isEnabled():
            print(f"irviz snapshot: only {before} steps planned", file=sys.stderr)
            break
        win.step()
        if not wait_until(app, lambda: failure or int(win.state.get("cursor", 0)) > before,  # noqa: B023 - waited on in this iteration
                          args.timeout):
            print(f"irviz snapshot: step {i + 1} timed out", file=sys.stderr)
            return 1
        if failure:
            print(f"irviz snapshot: {failure[-1]}", file=sys.stderr)
            break
    if args.select:
        wait_until(app, settled, args.timeout)
        name = args.select
        if name == "auto":  # the first FX op whose Relax bindings call a kernel
            prov = win.hub.provenance
            ops = [n["id"] for n in (win.fx.table_nodes or []) if n.get("op") == "call_function"]
            name = next((fx for fx in ops + list(prov.fx_to_relax)
                         if any(v in prov.relax_to_callee for v in prov.fx_to_relax.get(fx, []))),
                        next(iter(prov.fx_to_relax), None))
        if name:
            win.hub.select_fx(name)
    if args.build_run:
        wait_until(app, settled, args.timeout)
        win.build_run()
        wait_until(app, lambda: win.run.result is not None or win.run.error is not None, args.timeout)
    if not wait_until(app, settled, args.timeout):
        print("irviz snapshot: panes did not fill in time; saving what is shown", file=sys.stderr)
    if args.json and args.build_run:
        write_figures(args.json, run_figures(win, args.pipeline))
    win.resize(w, h)
    wait_until(app, lambda: False, 0.3)  # let layouts and graph views settle
    # the colours of code and diffs (a big model's take seconds, done between events)
    wait_until(app, lambda: not idle_work().pending(), min(args.timeout, 60.0))
    if (win.width(), win.height()) != (w, h):
        print(f"irviz snapshot: the window could not shrink to {w}x{h} (minimum "
              f"{win.minimumSizeHint().width()}x{win.minimumSizeHint().height()})", file=sys.stderr)
    for pane in (win.fx, win.relax):
        pane.graph.reset_view()  # the default view for the final pane size (readable zoom, top of graph)
        if win.hub.selection is not None:
            pane.center_on_linked()
    wait_until(app, lambda: False, 0.1)
    out = os.path.abspath(args.out)
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    ok = win.grab().save(out)
    win.bridge.shutdown()
    win.close()
    if not ok:
        print(f"irviz snapshot: could not write {out}", file=sys.stderr)
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
