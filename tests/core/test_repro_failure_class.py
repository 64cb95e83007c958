"""A repro folder reproduces the failure bisect found, in the same class: a user's pass that
rewrites multiply+add into R.ewise_fma with its arguments slipped gives wrong numbers in irviz
(which lowers ewise_fma itself); the folder's repro.py must show those wrong numbers, not the build
failure plain TVM would give on an op it cannot lower, and must say so when the class differs."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("tvm")

from irviz.cli.main import main

# a course-style pattern rewrite whose author swapped the multiplier and the addend
PASS_FILE = '''
import tvm
from tvm import relax


@relax.expr_functor.mutator
class SlippedFMA(relax.PyExprMutator):
    def __init__(self, mod):
        super().__init__(mod)
        self.add_op = tvm.ir.Op.get("relax.add")
        self.multiply_op = tvm.ir.Op.get("relax.multiply")
        self.fma_op = tvm.ir.Op.get("relax.ewise_fma")

    def visit_call_(self, call):
        call = self.visit_expr_post_order(call)
        if call.op != self.add_op or not isinstance(call.args[0], relax.Var):
            return call
        value = self.lookup_binding(call.args[0])
        if not isinstance(value, relax.Call) or value.op != self.multiply_op:
            return call
        return relax.Call(self.fma_op, [value.args[0], call.args[1], value.args[1]], None, None)


@tvm.ir.transform.module_pass(opt_level=0, name="FMASlipped")
class FMASlipped:
    def transform_module(self, mod, ctx):
        rewriter = SlippedFMA(mod)
        for gv, func in mod.functions.items():
            if isinstance(func, relax.Function):
                rewriter.builder_.update_func(gv, relax.analysis.remove_all_unused(
                    rewriter.visit_expr(func)))
        return rewriter.builder_.get()
'''

IR_FILE = '''
import numpy as np
from tvm.script import ir as I
from tvm.script import relax as R


@I.ir_module
class Scaled:
    @R.function
    def main(x: R.Tensor((2, 6), "float32"), scale: R.Tensor((2, 6), "float32"),
             shift: R.Tensor((2, 6), "float32")):
        with R.dataflow():
            lv0 = R.multiply(x, scale)
            lv1 = R.add(lv0, shift)
            out = R.nn.relu(lv1)
            R.output(out)
        return out


def get_inputs():
    rng = np.random.default_rng(5)
    return {name: rng.standard_normal((2, 6)).astype("float32") for name in ("x", "scale", "shift")}


def reference(x, scale, shift):
    return np.maximum(x * scale + shift, 0)
'''


def _files(tmp_path):
    (tmp_path / "fma_pass.py").write_text(textwrap.dedent(PASS_FILE))
    (tmp_path / "scaled.py").write_text(textwrap.dedent(IR_FILE))
    return tmp_path / "scaled.py", tmp_path / "fma_pass.py"


# what the folder carries must do without irviz (and torch): neither can be imported
NO_IRVIZ = ("import sys, runpy; sys.modules['irviz'] = None; sys.modules['torch'] = None; "
            "sys.argv = ['repro.py']; runpy.run_path('repro.py', run_name='__main__')")


def _run_repro(folder: Path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-c", NO_IRVIZ], cwd=folder, capture_output=True,
                          text=True, timeout=300, env=env)


def test_repro_of_a_user_pass_emitting_ewise_fma_reproduces_the_wrong_numbers(tmp_path, capsys):
    model, passes = _files(tmp_path)
    code = main(["bisect", str(model), "--passes", str(passes), "--pipeline",
                 "FMASlipped,LegalizeOps", "--out", str(tmp_path / "repro"), "--json", "-"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 1, summary
    fb = summary["first_bad"]
    assert (fb["pass"], fb["stage"]) == ("FMASlipped", "compare"), summary
    folder = Path(summary["repro"])
    assert "R.ewise_fma" in (folder / "after.py").read_text()
    run = _run_repro(folder)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "REPRODUCED: wrong numbers after FMASlipped, max abs error" in run.stdout, run.stdout
    assert "build" not in run.stdout.split("REPRODUCED")[1]


def test_repro_says_so_when_plain_tvm_fails_in_another_way_than_bisect_found(tmp_path, capsys):
    model, passes = _files(tmp_path)
    code = main(["bisect", str(model), "--passes", str(passes), "--pipeline",
                 "FMASlipped,LegalizeOps", "--out", str(tmp_path / "repro"), "--json", "-"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 1, summary
    folder = Path(summary["repro"])
    # without irviz's lowering of ewise_fma, plain TVM cannot build the module after the pass
    for name in os.listdir(folder):
        if name.startswith("irviz_") and name.endswith(".py"):
            (folder / name).unlink()
    run = _run_repro(folder)
    assert run.returncode == 3, run.stdout + run.stderr
    assert ("NOT REPRODUCED the same way: bisect found wrong numbers, plain TVM fails to build"
            in run.stdout), run.stdout


# the course's way of mixing in a library: a function registered by the file, called by name
REGISTERING_FILE = '''
import numpy as np
import tvm
from tvm.script import ir as I
from tvm.script import relax as R

from _helpers_for_scale import scale_rows


@tvm.register_global_func("mine.scale_rows", override=True)
def _scale_rows(x, s, out):
    out.copyfrom(scale_rows(x.numpy(), s.numpy()))


@I.ir_module
class Rows:
    @R.function
    def main(x: R.Tensor((3, 4), "float32"), s: R.Tensor((3, 1), "float32")):
        with R.dataflow():
            lv0 = R.call_dps_packed("mine.scale_rows", (x, s), R.Tensor((3, 4), "float32"))
            out = R.nn.relu(lv0)
            R.output(out)
        return out


def get_inputs():
    rng = np.random.default_rng(2)
    return rng.standard_normal((3, 4)).astype("float32"), rng.standard_normal((3, 1)).astype("float32")


def reference(x, s):
    return np.maximum(x * s, 0)
'''


def test_repro_registers_the_functions_the_opened_file_registered(tmp_path):
    from irviz.core.export.repro import repro_for_step
    from irviz.core.workspace import Workspace

    (tmp_path / "_helpers_for_scale.py").write_text(
        "def scale_rows(x, s):\n    return (x * s).astype(x.dtype)\n")
    (tmp_path / "rows.py").write_text(textwrap.dedent(REGISTERING_FILE))
    ws = Workspace()
    ws.open(str(tmp_path / "rows.py"))
    folder = repro_for_step(ws, tmp_path / "repro", 0)
    run = _run_repro(folder)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "did not reproduce" in run.stdout and "matches expected.npz" in run.stdout
    assert "mine.scale_rows" in (folder / "README.txt").read_text()
