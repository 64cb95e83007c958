"""The engine side: torch + TVM + networkx + pygments; never imports Qt.

Rooms, each importing only rooms below it (pyproject.toml's import-linter contracts check the order,
tests/core/test_layering.py that no import, lazy ones included, closes a cycle):

    workspace                  chains the stages for the engine process and the CLI
    export                     step files, reports, traces, repro folders
    compare                    two pipelines on one import
    session                    one snapshot per pass
    passes                     registry, catalogue, pipelines, the passes' rewrites
    tuning                     measure candidates: build + time, the per-machine decision cache
    backend | schedules        build, run, time, memory plan | TensorIR schedule rules
    views | frontend           graphs, layout, diffs, decisions | load, capture, import
    target                     the host CPU and its vector width
    errors | tvm_compat | user_code | library_names
"""
