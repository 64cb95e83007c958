"""One kernel's code compared between two steps or two targets (the Diff pane's code mode)."""
from __future__ import annotations

from irviz.engine.handler_context import EngineContext


class CodeDiffCommands:
    """The command that compares one kernel's code between steps or targets."""

    def __init__(self, ctx: EngineContext):
        self.ctx = ctx

    def kernel_code_diff(self, kernel, a=None, b=None, target_a=None, target_b=None, format=None) -> dict:
        """`kernel` at step `a` on `target_a` against step `b` on `target_b` (default: the same
        target); steps default to the cursor's previous and the cursor."""
        from irviz.core.backend.kernel_code_diff import kernel_code_diff

        cursor = self.ctx.ws.need_session().cursor
        sa = self.ctx.ws.step_at(max(0, cursor - 1) if a is None else a)
        sb = self.ctx.ws.step_at(b)
        ta, tb = target_a or "host", target_b or target_a or "host"
        self.ctx.progress(f"Compiling {kernel} of steps {sa.index} and {sb.index}", 0.2)
        out = kernel_code_diff(sa.mod, sb.mod, kernel, ta, tb, format,
                               label_a=f"step {sa.index} {ta}", label_b=f"step {sb.index} {tb}")
        out["a"]["step"], out["b"]["step"] = sa.index, sb.index
        return out
