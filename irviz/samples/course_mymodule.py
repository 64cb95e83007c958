"""Course "End to End Model Execution": TVMScript MyModule, call_dps_packed to its prim_funcs, sizes m, n, k."""
# The MLP written by hand: two prim_funcs with symbolic sizes (T.int64() + T.match_buffer), a
# Relax main that calls them by name with R.call_dps_packed, weights passed as parameters, and the
# course's variant with two dataflow blocks (main_two_blocks; the TVM 0.27 parser merges adjacent
# dataflow blocks into one). TVM 0.27 spells the course's T.block as T.sblock.
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

from _course_mlp import mlp_inputs, numpy_mlp


@I.ir_module
class MyModule:
    @T.prim_func(s_tir=True)
    def relu0(x: T.handle, y: T.handle):
        n = T.int64()
        X = T.match_buffer(x, (1, n), "float32")
        Y = T.match_buffer(y, (1, n), "float32")
        for i, j in T.grid(1, n):
            with T.sblock("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.max(X[vi, vj], T.float32(0))

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
            lv1 = R.call_dps_packed("relu0", (lv0,), R.Tensor((1, n), "float32"))
            out = R.call_dps_packed("linear0", (lv1, w1, b1), R.Tensor((1, k), "float32"))
            R.output(out)
        return out

    @R.function
    def main_two_blocks(x: R.Tensor((1, "m"), "float32"),
                        w0: R.Tensor(("n", "m"), "float32"),
                        b0: R.Tensor(("n",), "float32"),
                        w1: R.Tensor(("k", "n"), "float32"),
                        b1: R.Tensor(("k",), "float32")):
        m, n, k = T.int64(), T.int64(), T.int64()
        with R.dataflow():
            lv0 = R.call_dps_packed("linear0", (x, w0, b0), R.Tensor((1, n), "float32"))
            gv0 = R.call_dps_packed("relu0", (lv0,), R.Tensor((1, n), "float32"))
            R.output(gv0)
        with R.dataflow():
            out = R.call_dps_packed("linear0", (gv0, w1, b1), R.Tensor((1, k), "float32"))
            R.output(out)
        return out


def get_inputs():
    return mlp_inputs()


def reference(data, w0, b0, w1, b1):
    return numpy_mlp(data, w0, b0, w1, b1)
