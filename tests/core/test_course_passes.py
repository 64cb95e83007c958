"""The course's passes (irviz/core/course_passes.py): TVM-style Before/Expected + build checks."""
from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

from irviz.core.passes import course as cp
from irviz.core.passes import PassInvocation, apply_pass, get_pipeline
from irviz.core.tvm_compat import host_target


@pytest.fixture(scope="module")
def target():
    return host_target()


def _run(mod, target, *args):
    ex = tvm.compile(mod, target=target)
    vm = relax.VirtualMachine(ex, tvm.cpu())
    return vm["main"](*[tvm.runtime.tensor(a) for a in args]).numpy()


# ---------------------------------------------------------------------------------------------
# EwiseFMA


def test_ewise_fma_before_expected():
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((3, 4), "float32"), y: R.Tensor((3, 4), "float32")):
            with R.dataflow():
                lv0 = R.multiply(x, y)
                gv0 = R.add(lv0, y)
                R.output(gv0)
            return gv0

    @I.ir_module
    class Expected:
        @R.function
        def main(x: R.Tensor((3, 4), "float32"), y: R.Tensor((3, 4), "float32")):
            with R.dataflow():
                gv0 = R.ewise_fma(x, y, y)
                R.output(gv0)
            return gv0

    after = cp.EwiseFMA()(Before)
    tvm.ir.assert_structural_equal(after, Expected)
    assert cp.EwiseFMA().info.name == "EwiseFMA"


def test_ewise_fma_leaves_broadcasting_add_and_other_functions():
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((3, 4), "float32"), b: R.Tensor((4,), "float32")):
            with R.dataflow():
                lv0 = R.multiply(x, x)
                gv0 = R.add(lv0, b)  # broadcast: ewise_fma would be rejected by TVM
                R.output(gv0)
            return gv0

        @R.function
        def helper(x: R.Tensor((3, 4), "float32")):
            with R.dataflow():
                lv0 = R.subtract(x, x)
                gv0 = R.add(lv0, x)  # not a multiply
                R.output(gv0)
            return gv0

    tvm.ir.assert_structural_equal(cp.EwiseFMA()(Before), Before)


def test_ewise_fma_then_legalize_builds(target):
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((3, 4), "float32"), y: R.Tensor((3, 4), "float32")):
            with R.dataflow():
                lv0 = R.multiply(x, y)
                gv0 = R.add(lv0, y)
                R.output(gv0)
            return gv0

    mod = apply_pass(PassInvocation("EwiseFMA"), Before, target)
    assert "R.ewise_fma" in mod.script()
    mod = apply_pass(PassInvocation("LegalizeOps"), mod, target)  # irviz's LegalizeOps knows ewise_fma
    assert "R.ewise_fma" not in mod["main"].script()
    x = np.random.rand(3, 4).astype("float32")
    y = np.random.rand(3, 4).astype("float32")
    np.testing.assert_allclose(_run(mod, target, x, y), x * y + y, rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# MatmulAddFuse


def test_matmul_add_fuse_before_expected():
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((2, 4), "float32"), w: R.Tensor((3, 4), "float32"), b: R.Tensor((3,), "float32")):
            with R.dataflow():
                lv = R.permute_dims(w)
                lv1 = R.matmul(x, lv)
                lv2 = R.add(lv1, b)
                lv3 = R.nn.relu(lv2)
                R.output(lv3)
            return lv3

    @I.ir_module
    class Expected:
        @R.function
        def fused_matmul_add0(x: R.Tensor((2, 4), "float32"), w: R.Tensor((4, 3), "float32"), b: R.Tensor((3,), "float32")) -> R.Tensor((2, 3), "float32"):
            R.func_attr({"Primitive": 1})
            with R.dataflow():
                lv = R.matmul(x, w)
                gv = R.add(lv, b)
                R.output(gv)
            return gv

        @R.function
        def main(x: R.Tensor((2, 4), "float32"), w: R.Tensor((3, 4), "float32"), b: R.Tensor((3,), "float32")) -> R.Tensor((2, 3), "float32"):
            cls = Expected
            with R.dataflow():
                lv = R.permute_dims(w)
                lv2 = cls.fused_matmul_add0(x, lv, b)
                lv3 = R.nn.relu(lv2)
                R.output(lv3)
            return lv3

    after = cp.MatmulAddFuse()(Before)
    tvm.ir.assert_structural_equal(after, Expected)
    assert cp.MatmulAddFuse().info.name == "MatmulAddFuse"


def test_matmul_add_fuse_commuted_add_with_constant_bias():
    """add(b, matmul(x, w)) - what from_exported_program writes for aten.addmm - fuses too."""
    bias = np.arange(3, dtype="float32")

    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((2, 4), "float32"), w: R.Tensor((4, 3), "float32")):
            with R.dataflow():
                lv1 = R.matmul(x, w, out_dtype="float32")
                lv2 = R.add(R.const(bias), lv1)
                R.output(lv2)
            return lv2

    @I.ir_module
    class Expected:
        @R.function
        def fused_matmul_add0(x: R.Tensor((2, 4), "float32"), w: R.Tensor((4, 3), "float32"), b: R.Tensor((3,), "float32")) -> R.Tensor((2, 3), "float32"):
            R.func_attr({"Primitive": 1})
            with R.dataflow():
                lv = R.matmul(x, w, out_dtype="float32")
                gv = R.add(lv, b)
                R.output(gv)
            return gv

        @R.function
        def main(x: R.Tensor((2, 4), "float32"), w: R.Tensor((4, 3), "float32")) -> R.Tensor((2, 3), "float32"):
            cls = Expected
            with R.dataflow():
                lv2 = cls.fused_matmul_add0(x, w, R.const(bias))
                R.output(lv2)
            return lv2

    tvm.ir.assert_structural_equal(cp.MatmulAddFuse()(Before), Expected)


def test_ewise_fma_commuted_and_constant_first_add():
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((3,), "float32"), y: R.Tensor((3,), "float32")):
            with R.dataflow():
                lv0 = R.multiply(x, y)
                lv1 = R.add(y, lv0)
                lv2 = R.add(R.const(np.ones(3, "float32")), lv1)  # const first: no crash, no match
                R.output(lv2)
            return lv2

    @I.ir_module
    class Expected:
        @R.function
        def main(x: R.Tensor((3,), "float32"), y: R.Tensor((3,), "float32")):
            with R.dataflow():
                lv1 = R.ewise_fma(x, y, y)
                lv2 = R.add(R.const(np.ones(3, "float32")), lv1)
                R.output(lv2)
            return lv2

    tvm.ir.assert_structural_equal(cp.EwiseFMA()(Before), Expected)


def test_matmul_add_fuse_twice_picks_fresh_names():
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((2, 4), "float32"), w: R.Tensor((4, 4), "float32")):
            with R.dataflow():
                lv1 = R.matmul(x, w)
                lv2 = R.add(lv1, x)
                lv3 = R.matmul(lv2, w)
                lv4 = R.add(lv3, x)
                R.output(lv4)
            return lv4

    once = cp.MatmulAddFuse()(Before)
    names = sorted(gv.name_hint for gv in once.get_global_vars())
    assert names == ["fused_matmul_add0", "fused_matmul_add1", "main"]
    assert int(once["fused_matmul_add1"].attrs["Primitive"]) == 1
    # already fused: nothing left to fuse, existing functions untouched
    tvm.ir.assert_structural_equal(cp.MatmulAddFuse()(once), once)


# ---------------------------------------------------------------------------------------------
# LowerToTensorIR


def test_lower_to_tensorir_before_expected():
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((2, 3), "float32"), b: R.Tensor((3,), "float32")):
            with R.dataflow():
                lv = R.add(x, b)
                lv1 = R.nn.relu(lv)
                R.output(lv1)
            return lv1

    @I.ir_module
    class Expected:
        @T.prim_func(private=True, s_tir=True)
        def add(x: T.Buffer((T.int64(2), T.int64(3)), "float32"), b: T.Buffer((T.int64(3),), "float32"), T_add: T.Buffer((T.int64(2), T.int64(3)), "float32")):
            T.func_attr({"tirx.noalias": True})
            for ax0, ax1 in T.grid(T.int64(2), T.int64(3)):
                with T.sblock("T_add"):
                    v_ax0, v_ax1 = T.axis.remap("SS", [ax0, ax1])
                    T.reads(x[v_ax0, v_ax1], b[v_ax1])
                    T.writes(T_add[v_ax0, v_ax1])
                    T_add[v_ax0, v_ax1] = x[v_ax0, v_ax1] + b[v_ax1]

        @T.prim_func(private=True, s_tir=True)
        def relu(lv: T.Buffer((T.int64(2), T.int64(3)), "float32"), compute: T.Buffer((T.int64(2), T.int64(3)), "float32")):
            T.func_attr({"tirx.noalias": True})
            for i0, i1 in T.grid(T.int64(2), T.int64(3)):
                with T.sblock("compute"):
                    v_i0, v_i1 = T.axis.remap("SS", [i0, i1])
                    T.reads(lv[v_i0, v_i1])
                    T.writes(compute[v_i0, v_i1])
                    compute[v_i0, v_i1] = T.max(lv[v_i0, v_i1], T.float32(0.0))

        @R.function
        def main(x: R.Tensor((2, 3), "float32"), b: R.Tensor((3,), "float32")) -> R.Tensor((2, 3), "float32"):
            cls = Expected
            with R.dataflow():
                lv = R.call_tir(cls.add, (x, b), out_ty=R.Tensor((2, 3), "float32"))
                lv1 = R.call_tir(cls.relu, (lv,), out_ty=R.Tensor((2, 3), "float32"))
                R.output(lv1)
            return lv1

    after = cp.LowerToTensorIR()(Before)
    tvm.ir.assert_structural_equal(after, Expected)


def test_lower_to_tensorir_transpose_matmul_and_leaves_3d_matmul():
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((2, 4), "float32"), w: R.Tensor((3, 4), "float32"), y: R.Tensor((5, 2, 4), "float32")):
            with R.dataflow():
                lv = R.permute_dims(w)
                lv1 = R.matmul(x, lv)
                lv2 = R.matmul(y, lv)  # 3-D: topi.nn.matmul can't, left for LegalizeOps
                R.output(lv1, lv2)
            return (lv1, lv2)

    @I.ir_module
    class Expected:
        @T.prim_func(private=True, s_tir=True)
        def transpose(w: T.Buffer((T.int64(3), T.int64(4)), "float32"), T_transpose: T.Buffer((T.int64(4), T.int64(3)), "float32")):
            T.func_attr({"tirx.noalias": True})
            for ax0, ax1 in T.grid(T.int64(4), T.int64(3)):
                with T.sblock("T_transpose"):
                    v_ax0, v_ax1 = T.axis.remap("SS", [ax0, ax1])
                    T.reads(w[v_ax1, v_ax0])
                    T.writes(T_transpose[v_ax0, v_ax1])
                    T_transpose[v_ax0, v_ax1] = w[v_ax1, v_ax0]

        @T.prim_func(private=True, s_tir=True)
        def matmul(x: T.Buffer((T.int64(2), T.int64(4)), "float32"), lv: T.Buffer((T.int64(4), T.int64(3)), "float32"), T_matmul_NN: T.Buffer((T.int64(2), T.int64(3)), "float32")):
            T.func_attr({"layout_free_buffers": [1], "tirx.noalias": True})
            for i0, i1, k in T.grid(T.int64(2), T.int64(3), T.int64(4)):
                with T.sblock("T_matmul_NN"):
                    v_i0, v_i1, v_k = T.axis.remap("SSR", [i0, i1, k])
                    T.reads(x[v_i0, v_k], lv[v_k, v_i1])
                    T.writes(T_matmul_NN[v_i0, v_i1])
                    with T.init():
                        T_matmul_NN[v_i0, v_i1] = T.float32(0.0)
                    T_matmul_NN[v_i0, v_i1] = T_matmul_NN[v_i0, v_i1] + x[v_i0, v_k] * lv[v_k, v_i1]

        @R.function
        def main(x: R.Tensor((2, 4), "float32"), w: R.Tensor((3, 4), "float32"), y: R.Tensor((5, 2, 4), "float32")):
            cls = Expected
            with R.dataflow():
                lv = R.call_tir(cls.transpose, (w,), out_ty=R.Tensor((4, 3), "float32"))
                lv1 = R.call_tir(cls.matmul, (x, lv), out_ty=R.Tensor((2, 3), "float32"))
                lv2 = R.matmul(y, lv)
                R.output(lv1, lv2)
            return (lv1, lv2)

    after = cp.LowerToTensorIR()(Before)
    tvm.ir.assert_structural_equal(after, Expected)


def test_lower_to_tensorir_numbers(target):
    """Every op in the op map, lowered, then built: numbers equal numpy."""

    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3), "float32")):
            with R.dataflow():
                a = R.multiply(x, y)
                b = R.subtract(a, y)
                c = R.ewise_fma(x, y, b)
                d = R.exp(c)
                e = R.tanh(d)
                f = R.sigmoid(e)
                g = R.permute_dims(f, axes=[1, 0])
                R.output(g)
            return g

    lowered = cp.LowerToTensorIR()(Before)
    main_txt = lowered["main"].script()
    assert "R.call_tir" in main_txt and "R.multiply" not in main_txt and "R.ewise_fma" not in main_txt
    x = np.random.rand(2, 3).astype("float32")
    y = np.random.rand(2, 3).astype("float32")
    c = x * y + (x * y - y)
    ref = (1 / (1 + np.exp(-np.tanh(np.exp(c))))).T
    np.testing.assert_allclose(_run(lowered, target, x, y), ref, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# the course pipeline on the course MLP


def _course_mlp(rng):
    params = {
        "w0": (rng.standard_normal((128, 784)) * 0.05).astype("float32"),
        "b0": (rng.standard_normal((128,)) * 0.05).astype("float32"),
        "w1": (rng.standard_normal((10, 128)) * 0.05).astype("float32"),
        "b1": (rng.standard_normal((10,)) * 0.05).astype("float32"),
    }
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 784), "float32"))
    w0, b0, w1, b1 = (relax.const(params[k], "float32") for k in ("w0", "b0", "w1", "b1"))
    with bb.function("main", [x]):
        with bb.dataflow():
            lv0 = bb.emit(relax.op.matmul(x, relax.op.permute_dims(w0)))
            lv1 = bb.emit(relax.op.add(lv0, b0))
            lv2 = bb.emit(relax.op.nn.relu(lv1))
            lv3 = bb.emit(relax.op.matmul(lv2, relax.op.permute_dims(w1)))
            lv4 = bb.emit(relax.op.add(lv3, b1))
            gv = bb.emit_output(lv4)
        bb.emit_func_output(gv)
    return bb.get(), params


def test_course_pipeline_on_course_mlp(target):
    rng = np.random.default_rng(0)
    mod, p = _course_mlp(rng)
    cur = mod
    for inv in get_pipeline("course"):
        cur = apply_pass(inv, cur, target)
    kinds = {gv.name_hint: type(f).__name__ for gv, f in cur.functions.items()}
    assert kinds["fused_matmul_add0"] == "PrimFunc" and kinds["fused_matmul_add1"] == "PrimFunc"
    assert kinds["main"] == "Function"
    data = rng.random((1, 784)).astype("float32")
    ref = np.maximum(data @ p["w0"].T + p["b0"], 0) @ p["w1"].T + p["b1"]
    np.testing.assert_allclose(_run(cur, target, data), ref, rtol=1e-4, atol=1e-4)


def test_course_pipeline_with_fma_and_uncovered_op(target):
    """EwiseFMA fires, and an op the course lowering lacks (softmax) is left to LegalizeOps."""

    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((2, 4), "float32"), y: R.Tensor((2, 4), "float32")):
            with R.dataflow():
                lv0 = R.multiply(x, y)
                lv1 = R.add(lv0, y)
                lv2 = R.nn.softmax(lv1, axis=-1)
                R.output(lv2)
            return lv2

    cur = Before
    for inv in get_pipeline("course"):
        cur = apply_pass(inv, cur, target)
        if inv.name == "EwiseFMA":
            assert "R.ewise_fma" in cur["main"].script()
    assert "R.nn.softmax" not in cur["main"].script()
    x = np.random.rand(2, 4).astype("float32")
    y = np.random.rand(2, 4).astype("float32")
    z = x * y + y
    ref = np.exp(z - z.max(-1, keepdims=True))
    ref /= ref.sum(-1, keepdims=True)
    np.testing.assert_allclose(_run(cur, target, x, y), ref, rtol=1e-5, atol=1e-6)


def test_course_pipeline_on_pytorch_mlp(target):
    """Through from_exported_program (addmm -> add(bias, matmul)): fuses and matches torch."""
    torch = pytest.importorskip("torch")
    from tvm.relax.frontend.torch import from_exported_program

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).eval()
    x = torch.randn(1, 784)
    ep = torch.export.export(model, (x,)).run_decompositions()
    cur = from_exported_program(ep, unwrap_unit_return_tuple=True)
    for inv in get_pipeline("course"):
        cur = apply_pass(inv, cur, target)
    names = sorted(gv.name_hint for gv in cur.get_global_vars())
    assert "fused_matmul_add0" in names and "fused_matmul_add1" in names
    with torch.no_grad():
        ref = model(x).numpy()
    np.testing.assert_allclose(_run(cur, target, x.numpy()), ref, rtol=1e-4, atol=1e-5)


def test_course_pipeline_leaves_batched_matmul_add_alone(target):
    """Attention with an additive mask: a 3-D matmul + add is not the course's dense pattern, so
    MatmulAddFuse leaves it (fusing it gave a sub-function LowerToTensorIR cannot lower)."""
    torch = pytest.importorskip("torch")
    from tvm.relax.frontend.torch import from_exported_program

    class Attention(torch.nn.Module):
        def forward(self, q, k, mask):
            return torch.softmax(q @ k.transpose(-2, -1) + mask, dim=-1)

    torch.manual_seed(0)
    args = (torch.randn(2, 4, 8), torch.randn(2, 4, 8), torch.randn(2, 4, 4))
    ep = torch.export.export(Attention(), args).run_decompositions()
    cur = from_exported_program(ep, unwrap_unit_return_tuple=True)
    fused = apply_pass(PassInvocation("MatmulAddFuse", {}), cur, target)
    assert not any(gv.name_hint.startswith("fused_matmul_add") for gv in fused.get_global_vars())
    for inv in get_pipeline("course"):
        cur = apply_pass(inv, cur, target)
    with torch.no_grad():
        ref = Attention()(*args).numpy()
    np.testing.assert_allclose(_run(cur, target, *(a.numpy() for a in args)), ref, rtol=1e-5, atol=1e-6)


def test_course_steps_output_reparses(target):
    """roundtrip_ok=True for the course passes: TVM's printed script parses back equal."""
    from tvm.script import from_source

    from irviz.core.passes import get_pass

    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((2, 2), "float32"), w: R.Tensor((2, 2), "float32")):
            with R.dataflow():
                lv0 = R.multiply(x, w)
                lv1 = R.add(lv0, x)
                lv2 = R.matmul(lv1, w)
                lv3 = R.add(lv2, R.const(np.ones((2,), "float32")))
                R.output(lv3)
            return lv3

    cur = Before
    for inv in get_pipeline("course"):
        cur = apply_pass(inv, cur, target)
        consts = []

        def visit(e, consts=consts):
            if isinstance(e, tvm.ir.GenericConst) and not any(e.same_as(c) for c in consts):
                consts.append(e)

        relax.analysis.post_order_visit(cur["main"], visit)
        back = from_source(cur.script(), extra_vars={
            "metadata": {"ir.GenericConst": consts}, "I": I, "R": R, "T": T})
        tvm.ir.assert_structural_equal(back, cur)
        assert get_pass(inv.name).roundtrip_ok


def test_matmul_add_fuse_says_why_it_left_a_3d_matmul():
    # a pass that changed nothing says why, through the step's notes
    from irviz.core.frontend.importer import Imported
    from irviz.core.session import Session

    @I.ir_module
    class Batched:
        @R.function
        def main(x: R.Tensor((2, 4, 8), "float32"), w: R.Tensor((8, 3), "float32"),
                 b: R.Tensor((3,), "float32")):
            with R.dataflow():
                lv0 = R.matmul(x, w)
                gv0 = R.add(lv0, b)
                R.output(gv0)
            return gv0

    s = Session(Imported(mod=Batched, provenance={}, importer="test", seconds=0.0))
    s.set_pipeline(["MatmulAddFuse"])
    s.run_to_end()
    step = s.steps[1]
    assert step.changed is False
    assert step.notes == ["matmul (2, 4, 8) x (8, 3) + (3,): left alone, MatmulAddFuse matches "
                          "2-D matmul only (x and w of rank 2)"]
