"""Opening what is not a PyTorch model (an exported TVMScript step, a Python file defining an
IRModule, with its schedule(sch) run one primitive per step), and writing kept weights to a .npz:
the half of the Workspace's opening that needs no capture (see the package docstring for the
lazy imports)."""
from __future__ import annotations

import os
import time
from types import SimpleNamespace

from irviz.core.errors import IRImportError
from irviz.core.export import step_files
from irviz.core.workspace.host import WorkspaceHost


class IRFileOpening:
    """Opens IR files and step files in the Workspace `ws` that owns it."""

    def __init__(self, ws: WorkspaceHost):
        self.ws = ws

    def write_params(self, loaded, params: dict) -> str:
        """The kept weights as a .npz BindParams reads. Without a params_dir the file goes to a
        temp folder, named by its content, so a restarted engine finds the same file."""
        import hashlib
        import tempfile

        import numpy as np

        name = getattr(loaded, "name", None) or "model"
        if self.ws.params_dir is not None:
            folder, fname = str(self.ws.params_dir), f"{name}.params.npz"
        else:
            h = hashlib.sha1()
            for k, v in params.items():
                h.update(k.encode())
                h.update(np.ascontiguousarray(v).tobytes())
            folder = os.path.join(tempfile.gettempdir(), f"irviz-params-{os.getuid()}")
            fname = f"{name}-{h.hexdigest()[:12]}.npz"
        path = os.path.abspath(os.path.join(folder, fname))
        try:
            os.makedirs(folder, exist_ok=True)
            np.savez(path, **params)
        except OSError as exc:
            raise IRImportError(f"cannot write the weights to {path}: {exc}",
                                "choose a folder you can write to") from exc
        return path

    def open_step_file(self, spec, planned, at):
        """An exported TVMScript step: a session on its IRModule, with no FX graph or torch model."""
        from irviz.core.frontend.imported import Imported
        from irviz.core.session import Session

        self.ws.progress("Parsing the TVMScript step", at(0.3))
        t = time.perf_counter()
        mod = step_files.load_exported(spec)
        imported = Imported(mod=mod, provenance={}, importer="tvmscript", seconds=time.perf_counter() - t)
        session = Session(imported, None)
        session.set_pipeline(list(planned or ()))
        self.ws.replace_open(spec, "tvmscript", None, None, imported, session)

    def open_ir_file(self, spec, path, name, planned, at):
        """A Python file defining an IRModule: a session on it, run on get_inputs() (or made-up
        inputs) and compared with its reference(), if it has one."""
        from irviz.core.frontend.imported import Imported
        from irviz.core.frontend.ir_file import load_ir_file, weights_of
        from irviz.core.session import Session

        self.ws.progress("Running the IR file", at(0.3))
        t = time.perf_counter()
        ir = load_ir_file(path, name, spec)
        imported = Imported(mod=ir.mod, provenance={}, importer="tvmscript", seconds=time.perf_counter() - t)
        self.ws.log(f"load     {imported.seconds:7.2f} s  {ir.name} (an IRModule)")
        weights = weights_of(ir)
        if weights:  # BindParams without params= binds them, as after --keep-params
            imported.params = weights
            imported.params_file = self.write_params(SimpleNamespace(name=ir.path.stem), weights)
            self.ws.log(f"params   {len(weights)} weights from get_params(), written to {imported.params_file}")
        if ir.schedule is not None:
            self._run_schedule(ir, imported, at)
        session = Session(imported, None)
        session.set_pipeline(list(planned or ()))
        self.ws.replace_open(spec, "tvmscript", None, None, imported, session, ir)
        self.ws.stage_seconds["load"] = imported.seconds

    def _run_schedule(self, ir, imported, at) -> None:
        """The file's schedule(sch), one step per primitive; a failing primitive keeps the steps
        before it and the session's schedule_error says which line failed."""
        from irviz.core.frontend.files import shown_path
        from irviz.core.frontend.schedule_steps import run_schedule

        self.ws.stage = "pipeline"
        self.ws.progress("Running schedule(sch), one step per primitive", at(0.6))
        run = run_schedule(ir.schedule, ir.mod, ir.path, shown_path(ir.path))
        imported.schedule = run
        self.ws.log(f"schedule {run.seconds:7.2f} s  {len(run.steps)} primitives of schedule() in {run.source}")
        for k, st in enumerate(run.steps, 1):
            line = f"line {st.params['line']}" if st.params.get("line") else ""
            self.ws.log(f"  {k:2d} {st.name:28} {st.seconds:7.3f} s  {line}")
        if run.error is not None:
            self.ws.log(f"schedule failed: {run.error.message}")
