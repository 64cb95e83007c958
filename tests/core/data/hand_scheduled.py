"""A learner's own schedule, as in the course's TensorIR chapter: mm_relu's loops split, reordered
and parallelized by hand before irviz sees the module."""
import numpy as np
import tvm
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T


@I.ir_module
class MyModule:
    @T.prim_func(s_tir=True)
    def mm_relu(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"),
                C: T.Buffer((128, 128), "float32")):
        Y = T.alloc_buffer((128, 128), dtype="float32")
        for i, j, k in T.grid(128, 128, 128):
            with T.sblock("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(128, 128):
            with T.sblock("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = T.max(Y[vi, vj], T.float32(0))

    @R.function
    def main(a: R.Tensor((128, 128), "float32"), b: R.Tensor((128, 128), "float32")):
        cls = MyModule
        with R.dataflow():
            out = R.call_tir(cls.mm_relu, (a, b), out_ty=R.Tensor((128, 128), "float32"))
            R.output(out)
        return out


def get_irmodule():
    sch = tvm.s_tir.Schedule(MyModule)
    block_y = sch.get_sblock("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(block_y)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.parallel(i)
    return sch.mod


_rng = np.random.default_rng(0)
_a = _rng.standard_normal((128, 128)).astype("float32")
_b = _rng.standard_normal((128, 128)).astype("float32")


def get_inputs():
    return _a, _b


def reference(a, b):
    return np.maximum(a @ b, 0)
