"""The torch functions behind LibraryDispatch's ``call_dps_packed`` calls, registered with TVM
before a build, in whichever process builds.

They view TVM's tensors through DLPack (zero copy) and write into the destination TVM allocated.
"""
from __future__ import annotations

import tvm
from tvm import relax

from irviz.core.library_names import MATMUL, PREFIX, conv2d_attrs


def library_calls(mod) -> list[str]:
    """Names of irviz library functions that `mod` calls (each once)."""
    names: list[str] = []

    def visit(e):
        if isinstance(e, relax.ExternFunc) and str(e.global_symbol).startswith(PREFIX):
            if str(e.global_symbol) not in names:
                names.append(str(e.global_symbol))

    for func in mod.functions.values():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func, visit)
    return names


def _torch_function(name: str):
    # lazy: torch loads only when a module really calls the library
    import torch
    import torch.nn.functional as F

    if name == MATMUL:
        def matmul(a, b, out):
            torch.matmul(torch.from_dlpack(a), torch.from_dlpack(b), out=torch.from_dlpack(out))
        return matmul
    attrs = conv2d_attrs(name)
    if attrs:
        sh, sw, ph, pw, dh, dw, groups = attrs

        def conv2d(x, w, out):
            res = F.conv2d(torch.from_dlpack(x), torch.from_dlpack(w), None, (sh, sw), (ph, pw),
                           (dh, dw), groups)
            torch.from_dlpack(out).copy_(res)
        return conv2d
    raise ValueError(f"unknown irviz library function {name!r}")


def register_library_functions(mod) -> list[str]:
    """Register every irviz.torch.* function `mod` calls; returns their names. Idempotent."""
    names = library_calls(mod)
    for name in names:
        tvm.register_global_func(name, _torch_function(name), override=True)
    return names
