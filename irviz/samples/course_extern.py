"""Course "Integrating Existing Libraries": env.linear / env.relu registered in Python, run by torch via DLPack."""
# main only calls R.call_dps_packed("env.linear") / ("env.relu"): functions this file registers
# with tvm.register_global_func (the course's tvm.register_func). They receive TVM tensors and
# view them as torch tensors through DLPack without copying, then write the destination in place.
import torch
import tvm
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

from _course_mlp import mlp_inputs, numpy_mlp


@tvm.register_global_func("env.linear", override=True)
def torch_linear(x: tvm.runtime.Tensor, w: tvm.runtime.Tensor, b: tvm.runtime.Tensor,
                 out: tvm.runtime.Tensor):
    x_torch = torch.from_dlpack(x)
    w_torch = torch.from_dlpack(w)
    b_torch = torch.from_dlpack(b)
    out_torch = torch.from_dlpack(out)
    torch.mm(x_torch, w_torch.T, out=out_torch)
    torch.add(out_torch, b_torch, out=out_torch)


@tvm.register_global_func("env.relu", override=True)
def torch_relu(x: tvm.runtime.Tensor, out: tvm.runtime.Tensor):
    x_torch = torch.from_dlpack(x)
    out_torch = torch.from_dlpack(out)
    torch.maximum(x_torch, torch.Tensor([0.0]), out=out_torch)


@I.ir_module
class MyModuleWithExternCall:
    @R.function
    def main(x: R.Tensor((1, "m"), "float32"),
             w0: R.Tensor(("n", "m"), "float32"),
             b0: R.Tensor(("n",), "float32"),
             w1: R.Tensor(("k", "n"), "float32"),
             b1: R.Tensor(("k",), "float32")):
        m, n, k = T.int64(), T.int64(), T.int64()
        with R.dataflow():
            lv0 = R.call_dps_packed("env.linear", (x, w0, b0), R.Tensor((1, n), "float32"))
            lv1 = R.call_dps_packed("env.relu", (lv0,), R.Tensor((1, n), "float32"))
            out = R.call_dps_packed("env.linear", (lv1, w1, b1), R.Tensor((1, k), "float32"))
            R.output(out)
        return out


def get_inputs():
    return mlp_inputs()


def reference(data, w0, b0, w1, b1):
    return numpy_mlp(data, w0, b0, w1, b1)
