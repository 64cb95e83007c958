"""What the subject mixins (session, build, analysis, catalogue, code_diff) use of the Engine
they are mixed into, declared once so the type checker knows it; irviz.engine.dispatch.Engine
sets each of them."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from irviz.core.compare import Comparison
    from irviz.core.workspace import Workspace
    from irviz.protocol import State
    from irviz.step_views import StepViews


class EngineParts:
    ws: Workspace
    views: StepViews
    # the last `compare`: its two step lists, for compare_diff
    comparison: Comparison | None
    # the last bisect: (its passes, {step index: that step's check})
    last_bisect: tuple[list, dict[int, dict]]

    if TYPE_CHECKING:  # defined by Engine and by the mixins; at run time the binding finds those
        @property
        def session(self) -> Any: ...

        def progress(self, text: str, fraction: float | None = None, pass_name: str | None = None) -> None: ...

        def state(self) -> State: ...

        def list_passes(self) -> list[dict]: ...
