"""Course "Mixing TensorIR Code and Libraries": linear0 in TensorIR, relu and the last linear in env.* (torch)."""
# One module mixes both kinds of call_dps_packed: "linear0" is the module's own TensorIR
# prim_func, "env.relu" / "env.linear" are library functions registered in Python (see
# course_extern, which this file imports to register them).
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

import course_extern  # noqa: F401  registers env.linear and env.relu
from _course_mlp import mlp_inputs, numpy_mlp


@I.ir_module
class MyModuleMixture:
    @T.prim_func(s_tir=True)
    def linear0(x: T.handle, w: T.handle, b: T.handle, z: T.handle):
        m, n, k = T.int64(), T.int64(), T.int64()
        X = T.match_buffer(x, (1, m), "float32")
        W = T.match_buffer(w, (n, m), "float32")
        B = T.match_buffer(b, (n,), "float32")
        Z = T.match_buffer(z, (1, n), "float32")
        Y = T.alloc_buffer((1, n), "float32")
        for i, j, k in T.grid(1, n, m):
            with T.sblock("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]
        for i, j in T.grid(1, n):
            with T.sblock("Z"):
                vi, vj = T.axis.remap("SS", [i, j])
                Z[vi, vj] = Y[vi, vj] + B[vj]

    @R.function
    def main(x: R.Tensor((1, "m"), "float32"),
             w0: R.Tensor(("n", "m"), "float32"),
             b0: R.Tensor(("n",), "float32"),
             w1: R.Tensor(("k", "n"), "float32"),
             b1: R.Tensor(("k",), "float32")):
        m, n, k = T.int64(), T.int64(), T.int64()
        with R.dataflow():
            lv0 = R.call_dps_packed("linear0", (x, w0, b0), R.Tensor((1, n), "float32"))
            lv1 = R.call_dps_packed("env.relu", (lv0,), R.Tensor((1, n), "float32"))
            out = R.call_dps_packed("env.linear", (lv1, w1, b1), R.Tensor((1, k), "float32"))
            R.output(out)
        return out


def get_inputs():
    return mlp_inputs()


def reference(data, w0, b0, w1, b1):
    return numpy_mlp(data, w0, b0, w1, b1)
