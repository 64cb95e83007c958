"""The one place that knows TVM-0.27 names (tirx, s_tir, tvm_ffi, runtime.tensor, TensorType).

Import TVM things from here when a name differs from the course, so a TVM upgrade touches one file.
"""
from __future__ import annotations

import contextlib
import importlib
import inspect
import json
import linecache
import os
import sys
import threading

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


def constant_array(expr):
    """The numpy array a Relax tensor constant holds, or None when `expr` is no such constant."""
    if isinstance(expr, GenericConst) and isinstance(expr.value, RuntimeTensor):
        return expr.value.numpy()
    return None


def structural_hash(obj) -> int:
    return int(tvm_ffi.structural_hash(obj))


def structural_equal(a, b) -> bool:
    return bool(tvm_ffi.structural_equal(a, b))


# A TVM target as a JSON dict that stands in for the host's: benchmarks/cpu_speed.py --isa avx2 sets
# it to build, tune and time AVX2 code on an AVX-512 machine (an AVX2 proxy on the same CPU)
HOST_TARGET_ENV = "IRVIZ_HOST_TARGET"


def host_target():
    """llvm with the host's CPU features ("llvm -mcpu=native" strings are rejected in 0.27), or the
    target IRVIZ_HOST_TARGET names."""
    spec = os.environ.get(HOST_TARGET_ENV)
    if spec:
        return tvm.target.Target(json.loads(spec))
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


class _FramesOnly:
    """`inspect` as TVM's script decorators see it inside :func:`quick_script_parsing`.

    `T.prim_func(...)`, `R.function(...)` and `I.ir_module` call `inspect.stack()` each time the
    parser evaluates them, and `inspect.stack()` looks up every frame's source; for a frame of code
    compiled from text it scans all of `sys.modules` (thousands with torch loaded). Parsing a
    ~300-function module back took minutes, nearly all of it there. These frames carry the same
    frame objects and read a source line only from files on disk (linecache), which is what TVM's
    "defined in a class?" check reads.
    """

    def __getattr__(self, name):
        return getattr(inspect, name)

    @staticmethod
    def stack(context: int = 1) -> list:
        out = []
        f = sys._getframe(1)
        while f is not None:
            path, line = f.f_code.co_filename, f.f_lineno
            text = linecache.getline(path, line) if context and os.path.exists(path) else ""
            out.append(inspect.FrameInfo(f, path, line, f.f_code.co_name, [text] if text else None,
                                         0 if text else None))
            f = f.f_back
        return out


_SCRIPT_ENTRIES = ("tvm.tirx.script.parser.entry", "tvm.relax.script.parser.entry",
                   "tvm.script.parser.ir.entry")
_quick_lock = threading.Lock()
_quick_depth = 0


@contextlib.contextmanager
def quick_script_parsing():
    """Parse TVMScript without `inspect.stack()`'s source look-ups (see :class:`_FramesOnly`)."""
    global _quick_depth
    mods = [m for m in (sys.modules.get(n) or importlib.import_module(n) for n in _SCRIPT_ENTRIES)
            if getattr(m, "inspect", None) is not None]
    with _quick_lock:
        _quick_depth += 1
        if _quick_depth == 1:
            for m in mods:
                m.inspect = _FramesOnly()
    try:
        yield
    finally:
        with _quick_lock:
            _quick_depth -= 1
            if _quick_depth == 0:
                for m in mods:
                    m.inspect = inspect
