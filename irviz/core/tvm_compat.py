"""The one place that knows TVM-0.27 names (tirx, s_tir, tvm_ffi, runtime.tensor, TensorType).

Import TVM things from here when a name differs from the course, so a TVM upgrade touches one file.
"""
from __future__ import annotations

import tvm
import tvm_ffi
from tvm import relax, te, topi  # noqa: F401 - re-exported: the one place irviz takes them from
from tvm import tirx
from tvm.script import ir as I  # noqa: F401 - re-exported for TVMScript in step files
from tvm.script import relax as R  # noqa: F401 - re-exported for TVMScript in step files
from tvm.script import tirx as T  # noqa: F401 - re-exported for TVMScript in step files

PrimFunc = tvm.tirx.PrimFunc
GenericConst = tvm.ir.GenericConst
RuntimeTensor = tvm.runtime.Tensor
TensorType = relax.TensorType


def structural_hash(obj) -> int:
    return int(tvm_ffi.structural_hash(obj))


def structural_equal(a, b) -> bool:
    return bool(tvm_ffi.structural_equal(a, b))


def host_target():
    """llvm with the host's CPU features ("llvm -mcpu=native" strings are rejected in 0.27)."""
    return tvm.target.Target.from_device(tvm.cpu())


def as_target(target):
    """None -> the host CPU; a string like "llvm -mcpu=znver3" -> Target; a Target as it is.
    Raises TVM's own error for a bad string, which callers word for their stage."""
    if target is None:
        return host_target()
    if isinstance(target, tvm.target.Target):
        return target
    return tvm.target.Target(target)


def callee_name(expr) -> str | None:
    """The global a call goes to: a GlobalVar's name, an extern symbol, or None for anything else
    (a Relax op, a closure)."""
    if isinstance(expr, tvm.ir.GlobalVar):
        return expr.name_hint
    if isinstance(expr, relax.ExternFunc):
        return str(expr.global_symbol)
    return None


def var_name(var) -> str:
    """relax.Var.name in 0.27 (name_hint in the course); GlobalVar keeps name_hint."""
    name = getattr(var, "name", None)
    return name if isinstance(name, str) else var.name_hint


def shallow_copy(mod):
    """copy/deepcopy/pickle of an IRModule segfault in 0.27; this is the safe copy."""
    return tvm.IRModule(dict(mod.functions), attrs=mod.attrs)


def static_shape(ty) -> list[int] | None:
    """The shape of a Relax tensor type as ints; None when it is not a tensor or a size is symbolic."""
    if not isinstance(ty, relax.TensorType) or ty.shape is None:
        return None
    dims = ty.shape.values
    return [int(d) for d in dims] if all(isinstance(d, tirx.IntImm) for d in dims) else None
