"""A module whose Relax function defines its batch size in its body (``batch = T.int64()`` and
R.match_cast, as the course writes MyModule) exports every fast-cpu step as a file that loads
back, and a loaded step computes what the module computes."""
import json
import runpy
import subprocess
import sys

import numpy as np
import pytest

from irviz.cli.main import main
from irviz.core.export.script_names import distinct_size_names
from irviz.core.export.step_files import load_exported, module_script, parse_script
from irviz.core.passes.named_pipelines import get_pipeline
from irviz.core.tvm_compat import structural_equal

_MY_MODULE = '''
import numpy as np
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T


@I.ir_module
class MyModule:
    @R.function
    def main(x: R.Tensor(ndim=2, dtype="float32"), w0: R.Tensor((32, 16), "float32"),
             b0: R.Tensor((32,), "float32"), w1: R.Tensor((8, 32), "float32"),
             b1: R.Tensor((8,), "float32")):
        batch = T.int64()
        with R.dataflow():
            xb = R.match_cast(x, R.Tensor((batch, 16), "float32"))
            h = R.nn.relu(R.add(R.matmul(xb, R.permute_dims(w0)), b0))
            out = R.add(R.matmul(h, R.permute_dims(w1)), b1)
            R.output(out)
        return out


def get_inputs():
    g = np.random.default_rng(0)
    return tuple(g.standard_normal(s).astype("float32")
                 for s in [(3, 16), (32, 16), (32,), (8, 32), (8,)])
'''


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    d = tmp_path_factory.mktemp("symbolic")
    path = d / "my_module.py"
    path.write_text(_MY_MODULE)
    out = d / "out"
    assert main(["export", str(path), "--pipeline", "fast-cpu", "--out", str(out), "--no-build"]) == 0
    recs = json.loads((out / "steps.json").read_text())["steps"]
    return runpy.run_path(str(path))["MyModule"], out, recs


def _script_of(path) -> str:
    return path.read_text().split("SCRIPT = ", 1)[1]


def test_every_fast_cpu_step_of_a_match_cast_module_loads_back_equal(exported):
    _, out, recs = exported
    assert [r["pass"] for r in recs] == ["import", *(inv.name for inv in get_pipeline("fast-cpu"))]
    assert all(r["loadable"] and r["verified"] and r["equal"] for r in recs), \
        [(r["pass"], r["note"]) for r in recs if not r["equal"]]
    legalized = _script_of(out / next(r["file"] for r in recs if r["pass"] == "LegalizeOps"))
    # the PrimFuncs' size is renamed, main keeps the name the module gave it
    assert 'batch_1 = TypeVar("batch_1")' in legalized and "T.Buffer((batch_1, " in legalized
    assert "        batch = T.int64()" in legalized
    assert "# irviz renamed batch -> batch_1" in legalized
    last = out / recs[-1]["file"]
    proc = subprocess.run([sys.executable, str(last)], cwd=out, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and "IRModule with" in proc.stdout, proc.stderr


def _run(mod, args):
    import tvm
    from tvm import relax

    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    return vm["main"](*[tvm.runtime.tensor(a) for a in args]).numpy()


@pytest.mark.parametrize("batch", [3, 5])
def test_loaded_steps_compute_what_the_module_computes(exported, batch):
    original, out, recs = exported
    g = np.random.default_rng(batch)
    args = [g.standard_normal(s).astype("float32")
            for s in [(batch, 16), (32, 16), (32,), (8, 32), (8,)]]
    x, w0, b0, w1, b1 = args
    expected = np.maximum(x @ w0.T + b0, 0) @ w1.T + b1
    want = _run(original, args)
    np.testing.assert_allclose(want, expected, rtol=1e-4, atol=1e-4)
    for r in recs:
        if r["pass"] in ("LegalizeOps", "FuseTIR", recs[-1]["pass"]):
            got = _run(load_exported(out / r["file"]), args)
            assert got.shape == (batch, 8), r["pass"]
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=r["pass"])


_SIZE_NAMED_BLOCK = '''
@I.ir_module
class Mod:
    @T.prim_func(private=True, s_tir=True)
    def double(var_x: T.handle, var_y: T.handle):
        batch = T.int64()
        X = T.match_buffer(var_x, (batch, 4), "float32")
        Y = T.match_buffer(var_y, (batch, 4), "float32")
        for i, j in T.grid(batch, 4):
            with T.sblock("batch"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = X[vi, vj] * T.float32(2)

    @R.function
    def main(x: R.Tensor(ndim=2, dtype="float32")):
        batch = T.int64()
        cls = Mod
        with R.dataflow():
            xb = R.match_cast(x, R.Tensor((batch, 4), "float32"))
            y = R.call_tir(cls.double, (xb,), out_ty=R.Tensor((batch, 4), "float32"))
            R.output(y)
        return y
'''


def _module(source):
    from tvm.script import from_source

    from irviz.core.tvm_compat import I, R, T

    return from_source(source, extra_vars={"I": I, "R": R, "T": T})


def test_renaming_leaves_strings_alone_and_parses_back_equal():
    mod = _module(_SIZE_NAMED_BLOCK)
    with pytest.raises(Exception, match="Cannot redefine a non-PrimType object"):
        parse_script(mod.script(), [])  # TVM's own print of it does not parse back
    text, consts = module_script(mod)
    assert 'T.sblock("batch")' in text and "T.grid(batch_1, 4)" in text
    assert structural_equal(parse_script(text, consts), mod)


def test_a_module_without_a_clash_is_printed_as_tvm_prints_it():
    mod = _module(_SIZE_NAMED_BLOCK.replace("batch = T.int64()\n        cls", "n = T.int64()\n        cls")
                  .replace("R.Tensor((batch, 4)", "R.Tensor((n, 4)"))
    text = mod.script()
    assert 'batch = TypeVar("batch")' in text
    assert distinct_size_names(text) == (text, {})
    assert module_script(mod)[0] == text
