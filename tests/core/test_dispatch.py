"""LibraryDispatch: conv2d/matmul → call_dps_packed into torch; everything else left to TensorIR."""
import numpy as np
import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R

from irviz.core.backend.library_functions import library_calls, register_library_functions
from irviz.core.passes.library_dispatch import library_dispatch


@I.ir_module
class Before:
    @R.function
    def main(x: R.Tensor((1, 3, 8, 8), "float32"), w: R.Tensor((4, 3, 3, 3), "float32"),
             m: R.Tensor((64, 5), "float32")):
        with R.dataflow():
            c = R.nn.conv2d(x, w, strides=[2, 2], padding=[1, 1, 1, 1])
            r = R.nn.relu(c)
            f = R.reshape(r, R.shape([1, 64]))
            y = R.matmul(f, m)
            R.output(y)
        return y


@I.ir_module
class Expected:
    @R.function
    def main(x: R.Tensor((1, 3, 8, 8), "float32"), w: R.Tensor((4, 3, 3, 3), "float32"),
             m: R.Tensor((64, 5), "float32")):
        with R.dataflow():
            c = R.call_dps_packed("irviz.torch.conv2d.s2_2.p1_1.d1_1.g1", (x, w),
                                  out_ty=R.Tensor((1, 4, 4, 4), "float32"))
            r = R.nn.relu(c)
            f = R.reshape(r, R.shape([1, 64]))
            y = R.call_dps_packed("irviz.torch.matmul", (f, m), out_ty=R.Tensor((1, 5), "float32"))
            R.output(y)
        return y


def test_dispatch_rewrites_conv_and_matmul_and_leaves_the_rest():
    after = library_dispatch()(Before)
    tvm.ir.assert_structural_equal(after, Expected)


@I.ir_module
class Asymmetric:
    @R.function
    def main(x: R.Tensor((1, 3, 8, 8), "float32"), w: R.Tensor((4, 3, 3, 3), "float32")):
        with R.dataflow():
            c = R.nn.conv2d(x, w, padding=[0, 0, 1, 1])
            R.output(c)
        return c


def test_unsupported_conv_stays_a_relax_op_for_tensorir():
    after = library_dispatch()(Asymmetric)
    tvm.ir.assert_structural_equal(after, Asymmetric)
    assert library_calls(after) == []


def test_only_selected_ops_are_dispatched():
    after = library_dispatch(ops=("matmul",))(Before)
    assert library_calls(after) == ["irviz.torch.matmul"]
    assert "R.nn.conv2d" in after.script()


def test_dispatched_module_builds_and_matches_numpy():
    import torch

    mod = library_dispatch()(Before)
    target = tvm.target.Target.from_device(tvm.cpu())
    with target:
        mod = relax.get_pipeline("zero")(mod)
    # the relu/reshape stayed in TensorIR (the course's "mixture")
    assert any(isinstance(f, tvm.tirx.PrimFunc) for f in mod.functions.values())
    assert set(register_library_functions(mod)) == {"irviz.torch.conv2d.s2_2.p1_1.d1_1.g1",
                                                    "irviz.torch.matmul"}
    vm = relax.VirtualMachine(tvm.compile(mod, target=target), tvm.cpu())
    rng = np.random.default_rng(0)
    x, w, m = (rng.standard_normal(s).astype("float32") for s in [(1, 3, 8, 8), (4, 3, 3, 3), (64, 5)])
    out = vm["main"](*(tvm.runtime.tensor(a) for a in (x, w, m))).numpy()
    ref = torch.relu(torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), stride=2,
                                                padding=1)).reshape(1, 64) @ torch.from_numpy(m)
    np.testing.assert_allclose(out, ref.numpy(), rtol=1e-4, atol=1e-4)


def test_min_macs_keeps_small_calls_in_tensorir():
    # conv: 4×4×4 outputs × 3·3·3 = 1728 multiply-adds; matmul: 5 × 64 = 320
    assert library_calls(library_dispatch(min_macs=1000)(Before)) == ["irviz.torch.conv2d.s2_2.p1_1.d1_1.g1"]
    after = library_dispatch(min_macs=10_000)(Before)
    tvm.ir.assert_structural_equal(after, Before)


@I.ir_module
class Grouped:
    @R.function
    def main(x: R.Tensor((1, 4, 8, 8), "float32"), w: R.Tensor((4, 1, 3, 3), "float32"),
             v: R.Tensor((8, 4, 1, 1), "float32")):
        with R.dataflow():
            d = R.nn.conv2d(x, w, padding=[1, 1, 1, 1], groups=4)  # depthwise: not blocked by TensorIR
            c = R.nn.conv2d(d, v)  # 8 output channels, groups 1: CPUTileConv2d blocks it
            R.output(c)
        return c


def test_keep_tileable_conv_sends_only_the_others_to_torch():
    after = library_dispatch(keep_tileable_conv=True)(Grouped)
    assert library_calls(after) == ["irviz.torch.conv2d.s1_1.p1_1.d1_1.g4"]
    assert after["main"].script().count("R.nn.conv2d") == 1
    assert len(library_calls(library_dispatch()(Grouped))) == 2
