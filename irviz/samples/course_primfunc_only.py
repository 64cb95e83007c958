"""Course "Tensor Expression for TensorIR Creation" without Relax: te.create_prim_func only, run as a PrimFunc."""
# The chapter turns tensor expressions into a TensorIR function with te.create_prim_func and calls
# it directly, destination-passing style: mm_relu(a, b, d). The module holds that one PrimFunc and
# no Relax function: irviz runs mm_relu alone, allocates its output D from the buffer shape, and
# compares it with reference(a, b). Stepping the tir-cpu pipeline schedules it (tiles, parallel,
# vectorize): `irviz check sample:course_primfunc_only --pipeline tir-cpu`.
import numpy as np
import tvm
from tvm import te


def te_matmul(A: te.Tensor, B: te.Tensor) -> te.Tensor:
    assert A.shape[1] == B.shape[0]
    n, m = A.shape[0], B.shape[1]
    k = te.reduce_axis((0, A.shape[1]), name="k")
    return te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="matmul")


def te_relu(A: te.Tensor) -> te.Tensor:
    return te.compute(A.shape, lambda *i: te.max(A(*i), 0), name="relu")


A = te.placeholder((128, 128), name="A", dtype="float32")
B = te.placeholder((128, 128), name="B", dtype="float32")
D = te_relu(te_matmul(A, B))


def get_irmodule():
    # only the inputs and the output are parameters: the matmul result is a temporary buffer
    return tvm.IRModule({"mm_relu": te.create_prim_func([A, B, D])})


_rng = np.random.default_rng(0)
_a = _rng.standard_normal((128, 128)).astype("float32")
_b = _rng.standard_normal((128, 128)).astype("float32")


def get_inputs():
    return _a, _b  # D, the output, is allocated by irviz


def reference(a, b):
    return np.maximum(a @ b, 0)
