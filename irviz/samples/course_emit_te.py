"""Course "Use BlockBuilder to Create an IRModule": bb.emit_te of TE matmul and relu in a dataflow block."""
# BlockBuilder builds the Relax function step by step: each bb.emit_te turns a TE function into a
# PrimFunc of the module and emits a call_tir to it; emit_output marks what leaves the dataflow
# block; emit_func_output closes main with its parameters.
import numpy as np
from tvm import relax, te


def te_matmul(A: te.Tensor, B: te.Tensor) -> te.Tensor:
    n, m = A.shape[0], B.shape[1]
    k = te.reduce_axis((0, A.shape[1]), name="k")
    return te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="matmul")


def te_relu(A: te.Tensor) -> te.Tensor:
    return te.compute(A.shape, lambda *i: te.max(A(*i), 0), name="relu")


def get_irmodule():
    A = relax.Var("A", relax.TensorType((128, 128), "float32"))
    B = relax.Var("B", relax.TensorType((128, 128), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main"):
        with bb.dataflow():
            C = bb.emit_te(te_matmul, A, B)
            D = bb.emit_te(te_relu, C)
            R = bb.emit_output(D)
        bb.emit_func_output(R, params=[A, B])
    return bb.get()


_rng = np.random.default_rng(0)
_a = _rng.standard_normal((128, 128)).astype("float32")
_b = _rng.standard_normal((128, 128)).astype("float32")


def get_inputs():
    return _a, _b


def reference(a, b):
    return np.maximum(a @ b, 0)
