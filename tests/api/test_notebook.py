"""irviz.show / irviz.report from a Python session: the files written for objects in memory load
back to the same module, and the report holds the pipeline's steps. (The app itself, started by
show(), is tested in tests/api/test_notebook_show.py.)"""
import html
import subprocess
import sys
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tvm = pytest.importorskip("tvm")

from torch import nn
from tvm import relax, te
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

import irviz
from irviz.core.errors import ExportError
from irviz.core.frontend.ir_file import ir_file_spec, load_ir_file
from irviz.core.tvm_compat import structural_equal
from irviz.api.notebook import write_model_file


# --- the course's objects, as its chapters write them (TVM 0.27 names) -----------------------

def te_matmul(A, B):
    k = te.reduce_axis((0, A.shape[1]), name="k")
    return te.compute((A.shape[0], B.shape[1]), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="matmul")


def te_relu(A):
    return te.compute(A.shape, lambda *i: te.max(A(*i), 0), name="relu")


def blockbuilder_module():
    """Integration chapter: bb.emit_te(te_matmul) then bb.emit_te(te_relu) in main."""
    A = relax.Var("A", relax.TensorType((128, 128), "float32"))
    B = relax.Var("B", relax.TensorType((128, 128), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main"):
        with bb.dataflow():
            C = bb.emit_te(te_matmul, A, B)
            D = bb.emit_te(te_relu, C)
            R_ = bb.emit_output(D)
        bb.emit_func_output(R_, params=[A, B])
    return bb.get()


@I.ir_module
class MyModule:
    """TensorIR chapter: mm_relu written in TVMScript."""

    @T.prim_func(s_tir=True)
    def mm_relu(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"),
                C: T.Buffer((128, 128), "float32")):
        T.func_attr({"global_symbol": "mm_relu", "tirx.noalias": True})
        Y = T.alloc_buffer((128, 128), dtype="float32")
        for i, j, k in T.grid(128, 128, 128):
            with T.sblock("Y"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j)
                vk = T.axis.reduce(128, k)
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(128, 128):
            with T.sblock("C"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j)
                C[vi, vj] = T.max(Y[vi, vj], T.float32(0))


@I.ir_module
class MatmulRelu:
    @R.function
    def main(x: R.Tensor((1, 128), "float32"), w: R.Tensor((128, 128), "float32")):
        with R.dataflow():
            lv0 = R.matmul(x, w)
            lv1 = R.nn.relu(lv0)
            R.output(lv1)
        return lv1


class MyModel(nn.Module):
    """Integration chapter: the matmul relu model."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(128, 128))

    def forward(self, x):
        x = torch.matmul(x, self.weight)
        x = torch.relu(x)
        return x


def te_prim_func():
    A, B = te.placeholder((8, 8), name="A"), te.placeholder((8, 8), name="B")
    return te.create_prim_func([A, B, te_relu(te_matmul(A, B))])


def scheduled_module():
    sch = tvm.s_tir.Schedule(MyModule)
    i, j, k = sch.get_loops(sch.get_sblock("Y", func_name="mm_relu"))
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    return sch


def bound_module():
    """BindParams: w becomes a tensor constant (printed as metadata, written to .params)."""
    w = np.random.default_rng(0).standard_normal((128, 128)).astype("float32")
    return relax.transform.BindParams("main", {"w": tvm.runtime.tensor(w)})(MatmulRelu)


def _reload(path):
    spec = str(path)
    found = ir_file_spec(spec)
    assert found is not None, f"{path} is not recognised as an IR file"
    return load_ir_file(*found, spec)


# --- the files ---------------------------------------------------------------------------------

@pytest.mark.parametrize("make, symbols", [
    (blockbuilder_module, {"main", "te_matmul", "te_relu"}),
    (lambda: MyModule, {"mm_relu"}),
    (lambda: MyModule["mm_relu"], {"mm_relu"}),                 # a PrimFunc alone
    (lambda: te_prim_func(), {"main"}),                        # te.create_prim_func, no name
    (lambda: MatmulRelu["main"], {"main"}),                     # a Relax function alone
    (bound_module, {"main"}),
], ids=["blockbuilder", "tvmscript_prim_func", "prim_func", "te_prim_func", "relax_function", "bind_params"])
def test_the_written_ir_file_reopens_to_the_same_module(tmp_path, make, symbols):
    obj = make()
    path = write_model_file(obj, folder=tmp_path, name="MyModule")
    assert path == tmp_path / "MyModule.py"
    ir = _reload(path)
    want = obj if isinstance(obj, tvm.IRModule) else tvm.IRModule({next(iter(symbols)): obj})
    assert structural_equal(ir.mod, want)
    assert {gv.name_hint for gv in ir.mod.get_global_vars()} == symbols
    assert ir.name == "MyModule" and ir.get_inputs is None and ir.reference is None


def test_a_module_with_constants_keeps_them_next_to_the_file(tmp_path):
    path = write_model_file(bound_module(), folder=tmp_path, name="bound")
    assert (tmp_path / "bound.params").exists()
    assert "bound.params" in path.read_text()
    assert not (tmp_path / "plain.params").exists()
    write_model_file(MatmulRelu, folder=tmp_path, name="plain")
    assert not (tmp_path / "plain.params").exists()


def test_a_schedule_is_written_as_its_current_module(tmp_path):
    sch = scheduled_module()
    ir = _reload(write_model_file(sch, folder=tmp_path, name="sched"))
    assert structural_equal(ir.mod, sch.mod) and not structural_equal(ir.mod, MyModule)


def test_inputs_and_expected_outputs_become_get_inputs_and_reference(tmp_path):
    x = torch.randn(1, 128)
    w = np.random.default_rng(1).standard_normal((128, 128)).astype("float32")
    expected = np.maximum(x.numpy() @ w, 0)
    ir = _reload(write_model_file(MatmulRelu, (x, tvm.runtime.tensor(w)), expected=expected,
                                  folder=tmp_path, name="mm"))
    got = ir.get_inputs()
    assert len(got) == 2 and np.array_equal(got[0], x.numpy()) and np.array_equal(got[1], w)
    assert np.array_equal(ir.reference(*got), expected)


def test_a_module_that_parses_back_differently_is_written_with_a_warning(tmp_path):
    @I.ir_module
    class Take:
        @R.function
        def main(x: R.Tensor((10, 4), "float32"), idx: R.Tensor((3,), "int32")):
            with R.dataflow():
                y = R.take(x, idx, axis=0)
                R.output(y)
            return y

    legalized = relax.transform.LegalizeOps()(Take)   # an int32 extent the printer does not show
    with pytest.warns(UserWarning, match="not structurally equal.*first difference at"):
        path = write_model_file(legalized, folder=tmp_path, name="take")
    assert "# NOTE: the TVMScript TVM prints" in path.read_text()
    ir = _reload(path)
    assert {gv.name_hint for gv in ir.mod.get_global_vars()} == {"main", "take"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        write_model_file(Take, folder=tmp_path, name="plain")   # the usual case: no warning


def test_a_module_tvm_cannot_print_back_is_refused_and_nothing_is_left(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    mod = relax.transform.LegalizeOps()(MatmulRelu)
    for p in (relax.transform.ToNonDataflow(), relax.transform.RemovePurityChecking(),
              relax.transform.CallTIRRewrite()):
        mod = p(mod)
    with pytest.raises(ExportError) as err:
        irviz.show(mod)
    assert "cannot parse" in str(err.value) and "CallTIRRewrite" in err.value.hint
    assert list(tmp_path.iterdir()) == []


def test_a_torch_model_is_written_as_a_pt2_that_reopens(tmp_path):
    from irviz.core.frontend.model_file import load_model

    torch.manual_seed(0)
    model, x = MyModel().eval(), torch.randn(1, 128)
    path = write_model_file((model, x), folder=tmp_path)
    assert path == tmp_path / "MyModel.pt2"
    loaded = load_model(str(path))
    assert torch.allclose(loaded.module(*loaded.example_inputs), model(x))
    program = torch.export.export(model, (x,))
    assert write_model_file(program, folder=tmp_path, name="ep").suffix == ".pt2"


def test_show_names_what_it_accepts_for_anything_else():
    with pytest.raises(TypeError) as err:
        irviz.show(42)
    for word in ("builtins.int", "IRModule", "PrimFunc", "nn.Module", "ExportedProgram", "example inputs"):
        assert word in str(err.value)
    with pytest.raises(TypeError, match="needs example inputs"):
        irviz.show(MyModel())
    with pytest.raises(TypeError, match="cannot open"):
        irviz.report({"not": "a module"})
    with pytest.raises(FileNotFoundError, match="no_such_model.py"):
        irviz.show("no_such_model.py")
    with pytest.raises(TypeError, match="model file gives its own"):
        irviz.show("sample:mlp", (torch.randn(1, 784),))
    program = torch.export.export(MyModel(), (torch.randn(1, 128),))
    with pytest.raises(TypeError, match="expected= gives the outputs for the inputs"):
        irviz.show(MatmulRelu, expected=np.zeros((1, 128), "float32"))
    with pytest.raises(TypeError, match="exported with"):
        irviz.show(program, (torch.randn(2, 128),))


def test_importing_irviz_and_its_notebook_functions_loads_neither_torch_tvm_nor_qt():
    code = ("import sys, irviz\nirviz.show, irviz.report\n"
            "print(sorted(k for k in sys.modules if k.split('.')[0] in ('torch', 'tvm', 'tvm_ffi', 'PySide6')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# --- the report --------------------------------------------------------------------------------

def test_report_on_a_course_irmodule_holds_every_step_and_displays_inline():
    MyModule = blockbuilder_module()  # the course's name, which names the report
    r = irviz.report(MyModule, pipeline="zero", build=False)
    assert [p for p, _ in r.steps] == ["LegalizeOps", "AnnotateTIROpPattern", "FoldConstant", "FuseOps", "FuseTIR"]
    assert dict(r.steps)["FuseOps"] and not dict(r.steps)["FoldConstant"]
    text = str(r)
    assert text == r.html and text.startswith("<!DOCTYPE html>")
    assert "irviz pass trace: MyModule" in text
    for i, p in enumerate(["LegalizeOps", "AnnotateTIROpPattern", "FoldConstant", "FuseOps", "FuseTIR"], 1):
        assert f"Step {i}: {p}" in text
    assert "fused_te_matmul_te_relu" in text      # FuseOps' new function, in its diff
    inline = r._repr_html_()
    assert inline.startswith("<iframe srcdoc=\"") and html.unescape(inline.split('"')[1]) == text
    assert r.error is None and r.allclose is None


def test_report_builds_and_judges_with_the_expected_outputs():
    x = np.random.default_rng(2).standard_normal((1, 128)).astype("float32")
    w = np.random.default_rng(3).standard_normal((128, 128)).astype("float32")
    r = irviz.report(MatmulRelu, (x, w), expected=np.maximum(x @ w, 0),
                     pipeline="LegalizeOps,FuseOps,FuseTIR")
    assert [p for p, _ in r.steps] == ["LegalizeOps", "FuseOps", "FuseTIR"]
    assert r.error is None and r.allclose is True and r.max_abs_error < 1e-3
    assert "Build and run of step 3" in r.html
    wrong = irviz.report(MatmulRelu, (x, w), expected=np.zeros((1, 128), "float32"), pipeline="zero")
    assert wrong.allclose is False


def test_report_on_a_torch_model_compares_with_pytorch():
    torch.manual_seed(0)
    r = irviz.report(MyModel().eval(), (torch.randn(1, 128),))
    assert [p for p, _ in r.steps] == ["LegalizeOps", "AnnotateTIROpPattern", "FoldConstant", "FuseOps", "FuseTIR"]
    assert r.error is None and r.allclose is True
    assert "irviz pass trace: MyModel" in r.html and "Step 4: FuseOps" in r.html
    assert '<th>allclose</th><td><span class="yes">yes</span>' in r.html


@I.ir_module
class SymbolicRelu:
    @R.function
    def main(x: R.Tensor(("n", 128), "float32")):
        with R.dataflow():
            y = R.nn.relu(x)
            R.output(y)
        return y


def test_report_says_why_the_build_and_run_stopped():
    r = irviz.report(SymbolicRelu, pipeline="LegalizeOps")   # random inputs need a value for n
    assert [p for p, _ in r.steps] == ["LegalizeOps"] and "Step 1: LegalizeOps" in r.html
    assert r.error is not None and "n" in r.error and r.allclose is None
    assert "irviz: " in r._repr_html_()
    sized = irviz.report(SymbolicRelu, pipeline="LegalizeOps", dims={"n": 4})
    assert sized.error is None


def test_a_report_with_nothing_to_compare_with_has_no_error_figure():
    x = np.random.default_rng(2).standard_normal((1, 128)).astype("float32")
    w = np.random.default_rng(3).standard_normal((128, 128)).astype("float32")
    r = irviz.report(MatmulRelu, (x, w), pipeline="LegalizeOps")  # no expected: run, not judged
    assert r.error is None and r.allclose is None
    assert r.max_abs_error is None  # not NaN
    assert "nan" not in r.html.lower().replace("nanoseconds", "")
