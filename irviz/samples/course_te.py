"""Course "Tensor Expression for TensorIR Creation": te.compute matmul + relu -> te.create_prim_func."""
# The chapter writes the computation as tensor expressions (TE) and turns them into a TensorIR
# PrimFunc with te.create_prim_func. The intermediate `matmul` becomes a buffer the PrimFunc
# allocates itself (T.sblock_alloc_buffer). A small Relax `main` calls the PrimFunc with
# call_tir, so irviz can build and run it; the TensorIR pane shows the PrimFunc.
import numpy as np
from tvm import relax, te


def te_matmul(A: te.Tensor, B: te.Tensor) -> te.Tensor:
    assert A.shape[1] == B.shape[0]
    n, m = A.shape[0], B.shape[1]
    k = te.reduce_axis((0, A.shape[1]), name="k")
    return te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="matmul")


def te_relu(A: te.Tensor) -> te.Tensor:
    return te.compute(A.shape, lambda *i: te.max(A(*i), 0), name="relu")


def get_irmodule():
    A = te.placeholder((128, 128), name="A", dtype="float32")
    B = te.placeholder((128, 128), name="B", dtype="float32")
    D = te_relu(te_matmul(A, B))
    mm_relu = te.create_prim_func([A, B, D])  # C is internal: only A, B and the output are params
    # create_prim_func names every PrimFunc "main"; the module's main is the Relax function below
    mm_relu = mm_relu.with_attr("global_symbol", "mm_relu")

    bb = relax.BlockBuilder()
    gv = bb.add_func(mm_relu, "mm_relu")
    a = relax.Var("A", relax.TensorType((128, 128), "float32"))
    b = relax.Var("B", relax.TensorType((128, 128), "float32"))
    with bb.function("main", [a, b]):
        with bb.dataflow():
            d = bb.emit(relax.call_tir(gv, [a, b], relax.TensorType((128, 128), "float32")))
            out = bb.emit_output(d)
        bb.emit_func_output(out)
    return bb.get()


_rng = np.random.default_rng(0)
_a = _rng.standard_normal((128, 128)).astype("float32")
_b = _rng.standard_normal((128, 128)).astype("float32")


def get_inputs():
    return _a, _b


def reference(a, b):
    return np.maximum(a @ b, 0)
