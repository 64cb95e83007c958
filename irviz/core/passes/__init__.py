"""Passes: the registry and catalogue, named pipelines, the course's passes, CPU schedules, library
dispatch, and users' pass files.

User pass files import their decorator and types from here (`examples/my_passes.py`):

    from irviz.core.passes import PassParam, PassSpec, irviz_pass
"""
from irviz.core.passes.registry import (  # noqa: F401
    PIPELINES,
    PassInvocation,
    PassParam,
    PassSpec,
    apply_pass,
    get_pass,
    get_pipeline,
    irviz_pass,
    list_passes,
    list_pipelines,
    load_params_file,
    load_pass_file,
    register_pass,
    resolve_params,
    unregister_pass,
)
