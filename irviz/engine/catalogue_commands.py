"""What there is (samples, passes, pipelines) and housekeeping (warm, ping)."""
from __future__ import annotations

import os
import time

from irviz.protocol import commands as protocol
from irviz.core.frontend.sample_files import list_samples
from irviz.core.workspace import Workspace
from irviz.protocol.commands import clean
from irviz.engine.handler_context import EngineContext

# irviz.core imports that load torch or TVM stay in the handlers (see irviz.engine.session_commands).


class CatalogueCommands:
    """The commands that say what there is, and housekeeping."""

    def __init__(self, ctx: EngineContext):
        self.ctx = ctx

    def list_samples(self) -> list[dict]:
        return [{"name": n, "description": d} for n, d in list_samples()]

    def list_passes(self) -> list[dict]:
        return list_passes()

    def list_pipelines(self) -> list[dict]:
        from irviz.core.passes import PIPELINES, get_pipeline

        # get_pipeline: a built-in a user pass took the name of is listed as builtin:NAME
        return [{"name": name, "description": desc,
                 "passes": [protocol.invocation(i.name, i.params) for i in get_pipeline(name)]}
                for name, (desc, _invs) in PIPELINES.items()]

    def list_targets(self) -> list[dict]:
        from irviz.core.target import NAMED_TARGETS, target_unavailable

        return [{"name": n, "description": t.description, "target": t.as_dict(),
                 "unavailable": target_unavailable(t.as_dict())} for n, t in NAMED_TARGETS.items()]

    def warm(self, spec="sample:mul_add") -> dict:
        """Pay the one-time costs in advance: the bridge's spare engine runs this so that a restart
        and replay is quick. Keeps nothing."""
        t0 = time.perf_counter()
        prewarm()
        t1 = time.perf_counter()
        Workspace.warm(spec)
        return {"import_seconds": t1 - t0, "open_seconds": time.perf_counter() - t1}

    def ping(self) -> dict:
        return {"pid": os.getpid(), "time": time.time()}


def list_passes() -> list[dict]:
    """Every pass there is, built-in and the user's (see `pass_dict`)."""
    from irviz.core.passes import list_passes as passes

    return [pass_dict(p) for p in passes()]


def pass_dict(spec) -> dict:
    return {
        "name": spec.name, "description": spec.description, "category": spec.category,
        "roundtrip_ok": bool(spec.roundtrip_ok),
        "source": spec.source if spec.category == "user" else "",
        "shadows": shadowed_builtin(spec),
        "params": [{"name": p.name, "kind": p.kind, "default": clean(p.default), "help": p.help,
                    "choices": list(p.choices) if p.choices is not None else None}
                   for p in spec.params],
    }


def shadowed_builtin(spec) -> str:
    """"builtin:NAME" when the user pass `spec` took the name of built-in NAME, else ""."""
    from irviz.core.passes import BUILTIN_PREFIX, find_pass

    if spec.category != "user":
        return ""
    return BUILTIN_PREFIX + spec.name if find_pass(BUILTIN_PREFIX + spec.name) is not None else ""


def prewarm() -> None:
    """Import torch and TVM while the engine waits for its first request."""
    try:
        import irviz.core.frontend.capture
        import irviz.core.frontend.importer
        import irviz.core.session  # noqa: F401 - imported for the time it takes, not for a name
    except Exception:  # the first command reports the real import error
        pass
