"""What is open, and the one place that chains the stages.

    ws = Workspace(progress=print_progress, log=print)
    ws.open("sample:mlp", planned=get_pipeline("zero"))    # load -> capture -> import -> Session
    ws.run_to_end()                                         # every planned pass, one step each
    built, result = ws.build_run()                          # build the cursor step, run, compare

The engine (`python -m irviz.engine`) and the CLI (`irviz check`, `irviz export`) both drive one of
these; neither chains the stages itself. A failed open keeps what was open before, except that a
model whose import fails stays captured (its FX graph is viewable, `reimport` retries it with the
converter files). Results that belong to one opened model (builds, latency measurements) are
dropped in one place, `forget_results`, whenever the model or its import changes. The Workspace
(`workspace.py`) owns its parts and delegates to them: building, running, measuring and exporting
are in `results.py`; applying passes in `stepping.py`; opening IR files and step files in
`ir_files.py`; a model nothing captures whole, one graph of its graph breaks at a time, in
`graph_breaks.py`. What the parts use of the Workspace is declared in `host.py`.

Stages are imported inside the methods that use them: opening an IR file or a step file never
loads torch, and importing this module loads neither torch nor TVM (the engine and the CLI import
it before they know what will be opened).
"""
from __future__ import annotations

from irviz.core.workspace.frontend_choice import DEFAULT_IMPORTER, choose_frontend
from irviz.core.workspace.workspace import Workspace

__all__ = ["DEFAULT_IMPORTER", "Workspace", "choose_frontend"]
