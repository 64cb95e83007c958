"""What every pane shares: the bridge and the event hub given in the constructor, request
bookkeeping (a reply to a request that a newer one replaced is dropped), a search box, and the
hooks the main window calls on every pane of the pane table (:mod:`irviz.ui.pane_table`)."""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (QAbstractItemView, QLabel, QLineEdit, QSizePolicy, QTableWidget,
                               QWidget)

from irviz.protocol.commands import State
from irviz.ui import result_stamp, themes


class Pane(QWidget):
    """One view of the session, docked by the main window from its row in the pane table.

    Lifecycle: built as ``cls(bridge, hub, settings=settings)`` (it connects to both there and may
    send its first requests) -> ``restore_settings(settings)`` -> ``on_state`` for every state the
    engine reports, ``on_reply`` / ``on_error`` for its own requests (sent with :meth:`ask`),
    ``on_reset`` when a model is opened, ``restyle`` after a theme change -> ``save_settings``
    when the window closes.

    Must implement: ``on_state(state, prev)`` and ``on_reply(purpose, result)`` (the base raises
    NotImplementedError). May override: ``on_error``, ``is_filled``, ``restyle``,
    ``save_settings`` / ``restore_settings``, ``set_show_bookkeeping``, ``on_reset``."""

    filledChanged = Signal()

    def __init__(self, bridge, hub, parent=None, settings=None):
        super().__init__(parent)
        self.bridge = bridge
        self.hub = hub
        self.settings = settings            # a QSettings, or None: nothing outlives the window
        self.state: State | None = None
        self._pending: dict[int, str] = {}
        self._latest: dict[str, int] = {}
        bridge.replied.connect(self._on_replied)
        bridge.failed.connect(self._on_failed)
        bridge.stateChanged.connect(self._on_state)
        hub.sessionReset.connect(self.on_reset)

    # -- requests --------------------------------------------------------------------------
    def ask(self, purpose: str, cmd: str, **args) -> int:
        """Send ``cmd``; a newer ask of the same purpose (in this pane) drops the older reply."""
        old = self._latest.get(purpose)
        if old is not None:
            self._pending.pop(old, None)
        rid = self.bridge.request(cmd, supersede=f"{type(self).__name__}.{purpose}", **args)
        self._pending[rid] = purpose
        self._latest[purpose] = rid
        return rid

    def waiting(self, purpose: str | None = None) -> bool:
        if purpose is None:
            return bool(self._pending)
        return purpose in self._pending.values()

    def _take(self, rid: int) -> str | None:
        purpose = self._pending.pop(rid, None)
        if purpose is None or self._latest.get(purpose) != rid:
            return None  # not ours, or stale
        return purpose

    def _on_replied(self, rid: int, cmd: str, result) -> None:
        purpose = self._take(rid)
        if purpose is not None:
            self.on_reply(purpose, result)
            self.filledChanged.emit()

    def _on_failed(self, rid: int, cmd: str, error: dict) -> None:
        purpose = self._take(rid)
        if purpose is not None:
            if (error or {}).get("stage") in ("cancelled", "engine"):
                self._forget_shown()  # the replayed state that follows must be fetched again
            self.on_error(purpose, error or {})

    def _on_state(self, state: State) -> None:
        prev = self.state
        self.state = state
        if state.get("model") and getattr(self, "_problem_shown", False):
            self._show_problem(None)
        self.on_state(state, prev)

    # -- for subclasses ----------------------------------------------------------------------
    def on_reset(self) -> None:
        """A model was opened (maybe the same file again, edited): the next state is all new."""
        self.state = None
        self._forget_shown()

    def _forget_shown(self) -> None:
        for attr in ("_shown", "_loaded_key"):
            if hasattr(self, attr):
                setattr(self, attr, None)

    def on_state(self, state: State, prev: State | None) -> None:
        """Show `state` (the engine's whole state; `prev` the one shown before, None at first)."""
        raise NotImplementedError(f"{type(self).__name__} must implement on_state")

    def on_reply(self, purpose: str, result) -> None:
        """The answer to this pane's newest ``ask(purpose, ...)``."""
        raise NotImplementedError(f"{type(self).__name__} must implement on_reply")

    def on_error(self, purpose: str, error: dict) -> None:
        pass

    def is_filled(self) -> bool:
        """Whether the pane shows the current step (tests and snapshots wait for every pane)."""
        return True

    def restyle(self) -> None:
        """The theme changed (:func:`themes.colors` is the new one): repaint what kept old colours."""

    def save_settings(self, settings) -> None:
        """Write the pane's own choices (a view mode, a tab) to the QSettings `settings`."""

    def restore_settings(self, settings) -> None:
        """Read back what :meth:`save_settings` wrote; called once, after the theme is set."""

    def set_show_bookkeeping(self, on: bool) -> None:
        """Draw (or leave out) bookkeeping nodes, for panes that draw a graph."""

    def refresh(self) -> None:
        """Show the last state again from scratch (after a failed open said "Opening…")."""
        self._forget_shown()
        if self.state and self.state.get("model"):
            self.on_state(self.state, None)
        else:
            self.say_no_model()

    def say_no_model(self) -> None:
        """"No model open", or why the import failed, in the pane's status line."""
        err = self.state.get("import_error") if self.state else None
        self._show_problem(self.no_model_text(self.state) if err else None,
                           err.get("hint") if err else None)
        if not err:
            self.show_loading("No model open")

    def _show_problem(self, text: str | None, tip: str | None = None) -> None:
        label = getattr(self, "info", None)
        if label is None:
            return
        self._problem_shown = text is not None
        label.setWordWrap(text is not None)
        label.setStyleSheet(f"color: {themes.colors().bad};" if text is not None else "")
        label.setToolTip(tip or "")
        if text is not None:
            label.setText(text)

    @staticmethod
    def no_model_text(state: State | None) -> str:
        """What a pane that needs the Relax module says without one: why, when an import failed."""
        err = state.get("import_error") if state else None
        if not err:
            return "No model open"
        where = f" at FX node {err['node']}" + (f" ({err['op']})" if err.get("op") else "") \
            if err.get("node") else ""
        return (f"Import into Relax failed{where}: {err.get('message') or 'no message'} — "
                "nothing to show until it imports. Load a converter for the op (File ▸ Load "
                "converters…) and Re-import (Ctrl+Shift+R); the FX pane marks the node in red.")

    def show_loading(self, text: str) -> None:
        """Say in the pane's status line what it is waiting for (e.g. a model being opened)."""
        if getattr(self, "_problem_shown", False):
            self._show_problem(None)
        label = getattr(self, "info", None)
        if label is not None:
            label.setText(text)

    def focus_search(self) -> None:
        box = getattr(self, "search", None)
        if box is not None:
            box.setFocus()
            box.selectAll()

    # -- state helpers -----------------------------------------------------------------------
    @staticmethod
    def cursor_of(state: State | None) -> int | None:
        if not state or not state.get("model"):
            return None
        return int(state.get("cursor", 0))

    model_key = staticmethod(result_stamp.model_key)


class SearchBox(QLineEdit):
    def __init__(self, placeholder: str = "Search name, op, shape…", parent=None):
        super().__init__(parent)
        self.setPlaceholderText(placeholder)
        self.setClearButtonEnabled(True)


def row_table(headers: list[str]) -> QTableWidget:
    """A read-only table that selects one whole row at a time, compact rows, no row numbers."""
    t = QTableWidget(0, len(headers))
    t.setHorizontalHeaderLabels(headers)
    t.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    t.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    t.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    t.verticalHeader().setVisible(False)
    t.verticalHeader().setDefaultSectionSize(20)
    return t


def dim_label(text: str = "", elastic: bool = True) -> QLabel:
    """A grey status line; ``elastic`` ones never force their pane wider than it is."""
    label = QLabel(text)
    if elastic:
        label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
    label.setProperty("role", "dim")
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


def bold(widget: QWidget) -> QWidget:
    f = QFont(widget.font())
    f.setBold(True)
    widget.setFont(f)
    return widget


def shape_text(shapes) -> str:
    """[[1, 3, 224, 224]] -> '1×3×224×224'; several outputs joined by ', '."""
    if not shapes:
        return ""
    if isinstance(shapes, str):
        return shapes
    if shapes and not isinstance(shapes[0], (list, tuple)):
        shapes = [shapes]
    return ", ".join("×".join(str(d) for d in s) if s else "scalar" for s in shapes)
