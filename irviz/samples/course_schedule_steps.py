"""Course "TensorIR": mm_relu and its schedule, one step per primitive (split, reorder, ...)."""
# The chapter's MyModule and the transformation it walks through: split j by 4, reorder the
# loops, move the relu block under the split loop (reverse_compute_at), and separate the
# reduction's init (decompose_reduction). irviz runs schedule(sch) and shows each primitive as a
# step of its own, with its diff, before the pipeline. parallel and vectorize are added as the
# chapter's later section does; in TVM 0.27 they come before decompose_reduction (after it,
# parallel refuses the loop).
#
# TVM 0.27 names: tvm.tir.Schedule is tvm.s_tir.Schedule (irviz makes it and passes it in),
# sch.get_block is sch.get_sblock, T.block is T.sblock, "tir.noalias" is "tirx.noalias".
# A small Relax main calls mm_relu with call_tir, so irviz can build and run every step.
import numpy as np
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T


@I.ir_module
class MyModule:
    @T.prim_func(s_tir=True)
    def mm_relu(A: T.Buffer((128, 128), "float32"),
                B: T.Buffer((128, 128), "float32"),
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

    @R.function
    def main(a: R.Tensor((128, 128), "float32"), b: R.Tensor((128, 128), "float32")):
        cls = MyModule
        with R.dataflow():
            c = R.call_tir(cls.mm_relu, (a, b), out_ty=R.Tensor((128, 128), "float32"))
            R.output(c)
        return c


def schedule(sch):
    block_Y = sch.get_sblock("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(block_Y)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    block_C = sch.get_sblock("C", "mm_relu")
    sch.reverse_compute_at(block_C, j0)
    sch.parallel(i)
    sch.vectorize(sch.get_loops(block_C)[-1])
    sch.decompose_reduction(block_Y, k)


_rng = np.random.default_rng(0)
_a = _rng.standard_normal((128, 128)).astype("float32")
_b = _rng.standard_normal((128, 128)).astype("float32")


def get_inputs():
    return _a, _b


def reference(a, b):
    return np.maximum(a @ b, 0)
