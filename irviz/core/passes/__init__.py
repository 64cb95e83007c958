"""Passes: the registry, the built-in catalogue (TVM's passes, the course's, library dispatch, the
CPU schedule rules of ``core.schedules`` and the measuring passes of ``core.tuning``), named
pipelines, and users' pass files.

User pass files import their decorator and types from here (`examples/my_passes.py`):

    from irviz.core.passes import PassParam, PassSpec, irviz_pass
"""
from irviz.core.passes.registry import (
    BUILTIN_PREFIX,
    PassInvocation,
    PassParam,
    PassSpec,
    apply_pass,
    apply_pass_noted,
    as_invocation,
    find_pass,
    get_pass,
    list_passes,
    pass_note,
    pass_progress,
    register_pass,
    reporting_progress,
    resolve_params,
    unregister_pass,
)
from irviz.core.passes.user_files import irviz_pass, load_params_file, load_pass_file
from irviz.core.passes.named_pipelines import (
    CPU_SCHEDULE_STEPS,
    CPU_ZERO_STEPS,
    DEFAULT_BUILD_STEPS,
    GPU_SCHEDULE_STEPS,
    PIPELINES,
    ZERO_STEPS,
    check_target,
    get_pipeline,
    list_pipelines,
)
from irviz.core.passes import catalogue  # registers the built-in passes
from irviz.core.passes.pipeline_text import Pipeline, PipelineTextError, parse_pipeline, pipeline_text

__all__ = [
    "as_invocation",
    "BUILTIN_PREFIX",
    "CPU_SCHEDULE_STEPS",
    "CPU_ZERO_STEPS",
    "DEFAULT_BUILD_STEPS",
    "GPU_SCHEDULE_STEPS",
    "PIPELINES",
    "ZERO_STEPS",
    "PassInvocation",
    "PassParam",
    "PassSpec",
    "Pipeline",
    "PipelineTextError",
    "apply_pass",
    "apply_pass_noted",
    "catalogue",
    "check_target",
    "find_pass",
    "get_pass",
    "get_pipeline",
    "irviz_pass",
    "list_passes",
    "list_pipelines",
    "load_params_file",
    "load_pass_file",
    "parse_pipeline",
    "pass_note",
    "pass_progress",
    "pipeline_text",
    "register_pass",
    "reporting_progress",
    "resolve_params",
    "unregister_pass",
]
