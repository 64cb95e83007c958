"""What the main window is given by name while it is built, declared for the type checker: a pane
per row of the pane table (``setattr(window, row.key, pane)``) and the chrome's parts
(``WindowChrome.parts()``) that the window and the snapshot command read."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QLabel, QMainWindow, QMenu, QProgressBar, QPushButton

if TYPE_CHECKING:  # the window imports the pane table, which imports these, at run time
    from irviz.ui.generation_dialog import GenerationOpening
    from irviz.ui.graph_chooser import CaptureBar
    from irviz.ui.panes.diff import DiffPane
    from irviz.ui.panes.fx import FxPane
    from irviz.ui.panes.pipeline import PipelinePane
    from irviz.ui.panes.relax import RelaxPane
    from irviz.ui.panes.build_run import RunPane
    from irviz.ui.panes.tir import TirPane


class WindowParts(QMainWindow):
    # the pane table's built-in panes (a row's key is the attribute)
    fx: FxPane
    relax: RelaxPane
    tir: TirPane
    pipeline: PipelinePane
    diff: DiffPane
    run: RunPane
    # the chrome's actions, menus and status widgets
    act_step: QAction
    act_cancel: QAction
    act_bookkeeping: QAction
    theme_actions: dict[str, QAction]
    recent_files: Callable[[], list[str]]
    recent_menu: QMenu
    samples_menu: QMenu
    capture_bar: CaptureBar
    generation: GenerationOpening
    status_label: QLabel
    step_label: QLabel
    progress: QProgressBar
    cancel_button: QPushButton
