"""The peer compiler's command: torch.compile (inductor, CPU) beside the TVM run of a step."""
from __future__ import annotations

from irviz.engine.handler_context import EngineContext
from irviz.protocol.commands import BadRequest

# irviz.core.peer loads torch: imported in the handler (see irviz.engine.session_commands).

COMPILERS = ("inductor",)


def peer_report(ctx: EngineContext, step=None, compiler="inductor", repeats=10, freezing=False) -> dict:
    """The peer beside the TVM run of `step`, stamped with the model, pipeline, step and target it
    was put beside and the mode it was compiled in (a stamp the app and an export compare)."""
    if compiler not in COMPILERS:
        raise BadRequest(f"no peer compiler {compiler!r}; the peers: {', '.join(COMPILERS)}")
    from irviz.core.peer.peer_report import inductor_peer_for

    ws = ctx.ws
    session = ws.need_session()
    st = ws.step_at(step)
    report = inductor_peer_for(ws, st.index, repeats=int(repeats), progress=ctx.progress, freezing=bool(freezing))
    report["stamp"] = {"model": session.name, "pipeline": [s.pass_name for s in session.steps[1:st.index + 1]],
                       "step": st.index, "pass": st.pass_name, "target": str(session.target),
                       "freezing": bool(freezing)}
    return report


class PeerCommands:
    def __init__(self, ctx: EngineContext):
        self.ctx = ctx

    def peer(self, step=None, compiler="inductor", repeats=10, freezing=False) -> dict:
        """Inductor's kernels (code, FX nodes, times) and the FX nodes side by side with the TVM run
        of `step` (run it first with build_run for TVM's side); stamped with the model, pipeline
        and step it was put beside; `freezing`: Inductor's freezing=True."""
        report = peer_report(self.ctx, step, compiler, repeats, freezing)
        self.ctx.progress(f"Compared with torch.compile (inductor{', freezing' if freezing else ''})", 1.0)
        return report
