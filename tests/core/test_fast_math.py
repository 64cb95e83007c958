"""FastMath: exp, tanh, erf and friends become arithmetic that compiles without a libm call per
element, and the numbers stay within a few ulp of the exact functions."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import relax
from tvm.script import relax as R

from irviz.core.passes.fast_math import fast_math
import irviz.core.passes  # noqa: F401  (registers the built-in passes)
from irviz.core.passes.registry import apply_pass_noted

SHAPE = (4, 1024)


def _module(ops, dtype="float32"):
    bb = relax.BlockBuilder()
    x = relax.Var("x", R.Tensor(SHAPE, dtype))
    with bb.function("main", [x]):
        with bb.dataflow():
            outs = [bb.emit(op(x)) for op in ops]
            gv = bb.emit_output(relax.Tuple(outs))
        bb.emit_func_output(gv)
    return bb.get()


def _erf(v):
    return np.vectorize(math.erf)(v.astype(np.float64))


def _sigmoid(v):
    return 1 / (1 + np.exp(-v.astype(np.float64)))


def _softmax(v):
    e = np.exp(v.astype(np.float64) - v.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


CASES = {  # name: (relax op, exact float64 reference)
    "exp": (relax.op.exp, lambda v: np.exp(v.astype(np.float64))),
    "tanh": (relax.op.tanh, lambda v: np.tanh(v.astype(np.float64))),
    "erf": (relax.op.erf, _erf),
    "sigmoid": (relax.op.sigmoid, _sigmoid),
    "silu": (relax.op.nn.silu, lambda v: v * _sigmoid(v)),
    "gelu": (relax.op.nn.gelu, lambda v: v * 0.5 * (1 + _erf(v / math.sqrt(2)))),
    "gelu_tanh": (relax.op.nn.gelu_tanh,
                  lambda v: 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v.astype(np.float64) ** 3)))),
    "power3": (lambda x: relax.op.power(x, relax.const(3.0, "float32")), lambda v: v.astype(np.float64) ** 3),
    "softmax": (lambda x: relax.op.nn.softmax(x, axis=-1), _softmax),
}


def _compile(mod):
    return tvm.compile(mod, target=tvm.target.Target.from_device(tvm.cpu()))


def _libm_calls(ex) -> set[str]:
    asm = "\n".join(m.inspect_source("asm") for m in ex.mod.imports)
    return set(re.findall(r"\b(expf|tanhf|erff|powf|exp|tanh|erf|pow)@PLT", asm))


def test_every_op_is_replaced_compiles_without_libm_and_keeps_the_numbers():
    mod = _module([op for op, _ in CASES.values()])
    new, notes = apply_pass_noted("FastMath", mod)
    text = new["main"].script()
    assert not re.search(r"R\.(exp|tanh|erf|sigmoid|power|nn\.\w+)\(", text), text
    assert notes and all(k in notes[0] for k in ("exp x1", "tanh x1", "erf x1", "power(x, 3) x1", "nn.softmax x1")), notes

    # the plain build calls libm per element; FastMath's does not
    plain, fast = _compile(mod), _compile(new)
    assert {"expf", "erff"} & _libm_calls(plain)
    assert _libm_calls(fast) == set()

    # [-20, 20] in fine steps, where every function is finite
    x = np.linspace(-20, 20, int(np.prod(SHAPE)), dtype=np.float32).reshape(SHAPE)
    outs = relax.VirtualMachine(fast, tvm.cpu())["main"](tvm.runtime.tensor(x))
    for (name, (_, exact)), out in zip(CASES.items(), outs):
        ref = exact(x)
        got = out.numpy().astype(np.float64)
        # a few ulp of the result; gelu is x times a probability, so a few ulp of x where that is larger
        scale = np.maximum(np.abs(ref), np.abs(x)) if name.startswith("gelu") else np.abs(ref)
        tol = 4e-7 * (np.maximum(scale, 1.0) if name != "power3" else scale)
        worst = float((np.abs(got - ref) - tol).max())
        assert worst <= 0, (name, float(np.abs(got - ref).max()))


@pytest.mark.parametrize("dtype,op", [
    ("float64", relax.op.exp),
    ("float32", lambda x: relax.op.power(x, relax.const(2.5, "float32"))),
    ("float32", lambda x: relax.op.power(x, x)),
    ("float32", relax.op.sqrt),
])
def test_other_dtypes_other_powers_and_other_ops_are_left_alone(dtype, op):
    mod = _module([op], dtype)
    new = fast_math()(mod)
    assert tvm_ffi.structural_equal(new, mod)
