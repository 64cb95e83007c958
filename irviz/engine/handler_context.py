"""What the engine's command handlers (session, build, analysis, catalogue, code_diff) share, in
one object each of them is given: irviz.engine.dispatch.Engine makes it and binds the handlers'
methods to the protocol's commands."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from irviz.core.pipeline_compare import Comparison
    from irviz.core.workspace import Workspace
    from irviz.engine.views import StepViews


@dataclass
class EngineContext:
    ws: Workspace
    views: StepViews
    # progress(text, fraction=None, pass_name=None): a progress message for the request answered now
    progress: Callable[..., None]
    # the last `compare`: its two step lists, for compare_diff
    comparison: Comparison | None = None
    # the last bisect: (its passes, {step index: that step's check})
    last_bisect: tuple[list, dict[int, dict]] | None = None
    # a causal LM opened for generation: irviz.engine.generate_commands.OpenGeneration
    generation: Any = None
