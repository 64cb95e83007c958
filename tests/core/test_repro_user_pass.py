"""A repro folder of a user's pass that bears a TVM pass's name applies the user's pass (through
irviz and its pass file), not TVM's pass of that name."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from irviz.core import passes as P
from irviz.core.backend.step_bisect import reference_for
from irviz.core.export.repro import write_repro
from irviz.core.workspace import Workspace

ROOT = Path(__file__).resolve().parents[2]


def test_apply_mode_repro_runs_the_users_pass_of_a_tvm_name(tmp_path):
    pass_file = tmp_path / "mine.py"
    pass_file.write_text(textwrap.dedent('''\
        import tvm

        @tvm.ir.transform.module_pass(opt_level=0, name="FoldConstant")
        class MyFold:
            def transform_module(self, mod, ctx):
                raise ValueError("the user's FoldConstant ran")
        '''))
    P.load_pass_file(pass_file)
    try:
        ws = Workspace()
        ws.open("sample:mul_add", planned=[])
        out = write_repro(tmp_path / "repro", ws.session, before=ws.session.steps[0],
                          pass_name="FoldConstant", stage="pass", mode="apply", ref=reference_for(ws, "main"),
                          pass_files=[str(pass_file)], crashed=True)
    finally:
        P.unregister_pass("FoldConstant")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    run = subprocess.run([sys.executable, "repro.py"], cwd=out, capture_output=True, text=True,
                         timeout=300, env=env)
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"FoldConstant failed at {pass_file}:6: the user's FoldConstant ran" in run.stdout
