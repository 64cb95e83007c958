"""What a Workspace's parts (Results, Stepping, IRFileOpening, GraphBreakOpening) read and change of
the Workspace that owns them, declared once: each part is given its Workspace as a `WorkspaceHost`
and uses nothing of it that is not here, so the type checker knows what they share."""
from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from irviz.core.target import Target


class WorkspaceHost(Protocol):
    # what is open (see Workspace.__init__ for each)
    spec: str | None
    importer: str | None
    loaded: Any
    ir_file: Any
    dims: dict[str, int]
    captured: Any
    imported: Any
    session: Any
    target: Target
    keep_params: bool
    params_dir: Any
    # how it is going: progress(text, fraction=None, pass_name=None), log(line), the stage running
    progress: Callable[..., None]
    log: Callable[[str], None]
    stage: str | None
    stage_seconds: dict[str, float]

    @property
    def structure_only(self) -> bool: ...

    def need_session(self) -> Any: ...

    def need_weights(self, what: str) -> None: ...

    def step_at(self, index: Any = None) -> Any: ...

    def applied(self) -> list: ...

    def planned(self) -> list: ...

    def set_target(self, text: Target | str | None, whole: Any = None) -> None: ...

    def build_step(self, step: Any = None) -> Any: ...

    def forget_results(self) -> None: ...

    def reporting_passes(self, total: int | None,
                         fraction_span: tuple[float, float] = (0.0, 1.0)) -> AbstractContextManager[None]: ...

    def after_fallback(self, captured: Any, importer: str, asked_importer: str | None) -> str: ...

    def import_capture(self, spec: Any, importer: str, loaded: Any, captured: Any, planned: Any,
                       f_import: float, f_session: float, maps: Any = (),
                       keep_params: bool = False) -> None: ...

    def replace_open(self, spec: Any, importer: str | None, loaded: Any, captured: Any, imported: Any,
                     session: Any, ir: Any = None) -> None: ...
