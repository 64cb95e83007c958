"""The one place a pipeline and a target meet: every entry point (CLI, engine, notebook, graph
breaks) hands the Workspace what the user wrote, and this turns it into the passes and the target
they run under, or says what is wrong before anything loads.

    plan("target=x86-avx2; zero")            # Plan(passes=[...zero...], target=Target("x86-avx2"))
    plan("zero", target="cuda")              # the --target option, the text naming none
    plan("target=cuda; gpu", target="host")  # PassError: the two name different targets
    plan("target=sparc; zero")               # PassError (stage "pipeline"): no such target
"""
from __future__ import annotations

from dataclasses import dataclass, field

from irviz.core.errors import PassError, RequestError
from irviz.core.passes.pipeline_text import Pipeline, parse_pipeline
from irviz.core.passes.named_pipelines import check_target
from irviz.core.passes.registry import as_invocation
from irviz.core.target import Target


@dataclass
class Plan:
    passes: list = field(default_factory=list)
    target: Target = field(default_factory=Target)  # its name as the user wrote it; None: the host


def _passes(pipeline) -> tuple[list, str | None]:
    if pipeline is None:
        return [], None
    if isinstance(pipeline, str):
        parsed = parse_pipeline(pipeline) if pipeline.strip() else Pipeline()
        return list(parsed), parsed.target
    return [as_invocation(x) for x in pipeline], getattr(pipeline, "target", None)


def same_target(a: Target | str, b: Target | str) -> bool:
    return Target.of(a) == Target.of(b)


def plan(pipeline=None, target: Target | str | None = None, default: Target | str | None = None) -> Plan:
    """The passes of `pipeline` (a name, a pipeline text, a Pipeline or a list of invocations) and
    the target they run under: `target` (the user's --target or the pane's choice) or the one the
    text names; both, when they differ, is an error naming both. With neither, `default` (the
    session's target so far). A target this TVM cannot build for, or a pass that cannot run
    under it, raises here."""
    passes, in_text = _passes(pipeline)
    try:
        if target and in_text and not same_target(target, in_text):
            raise PassError(f"the target {target!r} and the pipeline text's target={in_text} differ",
                            "name the target once: as the target or at the start of the pipeline text")
        chosen = Target.of(target or in_text or default)
    except RequestError as exc:  # a bad target is a bad pipeline: nothing opens with it
        raise PassError(exc.message, exc.hint) from exc
    check_target(passes, chosen.for_passes)
    return Plan(passes, chosen)
