"""`run_app(spec=None) -> int`: the desktop application (called by `irviz [MODEL]`).

Qt's GUI modules are imported inside the functions, after :func:`display_problem` said they can
load here: a missing system library of Qt's fails at import (or aborts), before any message of ours.
"""
from __future__ import annotations

import sys

from irviz.ui.display_check import display_problem


def make_app(argv: list[str] | None = None):
    from PySide6.QtWidgets import QApplication

    from irviz.ui.widgets.code_view import warm_up_lexer

    running = QApplication.instance()
    app = running if isinstance(running, QApplication) else None
    if app is None:
        app = QApplication(list(argv) if argv is not None else [sys.argv[0] if sys.argv else "irviz"])
    app.setOrganizationName("irviz")
    app.setApplicationName("irviz")
    app.setApplicationDisplayName("irviz")
    warm_up_lexer()  # while the engine imports torch, before the first code view needs it
    return app


def run_app(spec: str | None = None, pipeline: str = "zero", no_weights: bool = False,
            generate: bool = False, tokens: int = 16) -> int:
    """The app's exit code; 2, with what to do, when Qt could not open a window here."""
    # before QApplication: Qt's answer to a missing display or library is abort() and a core dump
    problem = display_problem()
    if problem:
        print(problem, file=sys.stderr)
        return 2
    app = make_app()
    from PySide6.QtCore import QSettings

    from irviz.ui import themes
    from irviz.ui.main_window import MainWindow

    # the theme before any widget exists: applying a style sheet later repolishes them all
    themes.apply_theme(str(QSettings("irviz", "irviz").value("theme", "light")), app)
    window = MainWindow()
    window.show()
    if spec and generate:
        window.generation.open(spec, pipeline=pipeline, tokens=tokens, no_weights=no_weights)
    elif spec:
        window.open_spec(spec, pipeline=pipeline, no_weights=no_weights)
    return app.exec()


if __name__ == "__main__":
    raise SystemExit(run_app(sys.argv[1] if len(sys.argv) > 1 else None))
