"""Read Inductor's output code: the C++ source of each kernel it defines and, in order, the calls
its ``call()`` makes, each with the provenance key Inductor wrote above it
(``# [Provenance debug handles] cpp_fused_relu_0:3``) and the line of the call.

A call is a generated kernel (``cpp_fused_...(...)``) or a library call Inductor does not generate
(``extern_kernels.convolution``, ``torch.ops.mkldnn._convolution_pointwise``, ``aten.foo``): the
latter are rows of their own, named after the call.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["KernelCall", "call_body", "call_sequence", "kernel_sources", "profiler_key"]

_DEF = re.compile(r"^(\w+) = async_compile\.\w+\(.*?r'''\n(.*?)'''\)", re.S | re.M)
_HANDLE = re.compile(r"^\s*# \[Provenance debug handles\] (\S+):(\d+)\s*$")
_CALL_START = re.compile(r"^\s*(?:\w+\s*=\s*)?([\w.]+)\(")


@dataclass
class KernelCall:
    kernel: str              # "cpp_fused_relu_0", "extern_kernels.convolution"
    handle: str | None       # "cpp_fused_relu_0:3": the key of the provenance JSON; None untracked
    line: str                # the call as the wrapper writes it
    generated: bool          # Inductor generated its code (C++), else a library call
    row: str = ""            # the name of the report's kernel row it counts in


def kernel_sources(output_code: str) -> dict[str, str]:
    """Kernel name -> its C++ source, for every kernel the output code defines."""
    return {m.group(1): m.group(2).strip("\n") for m in _DEF.finditer(output_code)}


def call_body(output_code: str) -> list[str]:
    """The lines of the wrapper's call() (a method of Runner, or a plain function)."""
    lines = output_code.splitlines()
    start = next((i for i, l in enumerate(lines) if re.match(r"^\s*def call\(self, args\)|^def call\(args\)", l)),
                 None)
    if start is None:
        return []
    indent = len(lines[start]) - len(lines[start].lstrip())
    out = []
    for l in lines[start + 1:]:
        if l.strip() and len(l) - len(l.lstrip()) <= indent:
            break
        out.append(l)
    return out


def call_sequence(output_code: str) -> list[KernelCall]:
    """The kernel and library calls of call(), in order. A generated kernel called without a
    provenance comment is kept (handle None) so that it is not silently missing."""
    defined = set(kernel_sources(output_code))
    out: list[KernelCall] = []
    pending: tuple[str, str] | None = None
    def unmatched() -> None:  # a handle whose call was not recognised: kept, with no line
        if pending is not None:
            out.append(KernelCall(pending[0], pending[1], "", pending[0] in defined))

    for l in call_body(output_code):
        h = _HANDLE.match(l)
        if h:
            unmatched()
            pending = (h.group(1), f"{h.group(1)}:{h.group(2)}")
            continue
        s = l.strip()
        if not s or s.startswith("#"):
            continue
        m = _CALL_START.match(l)
        callee = m.group(1) if m else None
        if pending is not None and callee is not None and (callee == pending[0] or callee.endswith(pending[0])
                                                           or pending[0].endswith(callee)):
            out.append(KernelCall(pending[0], pending[1], s, pending[0] in defined))
            pending = None
        elif callee in defined:
            out.append(KernelCall(callee, None, s, True))
    unmatched()
    return out


def profiler_key(call: KernelCall) -> str:
    """What the profiler's event for this call ends with: the kernel name for generated code (its
    RecordFunction is "graph_<id>_<kernel>"), the operator name for a library call
    ("aten::convolution" for extern_kernels.convolution, "mkldnn::_convolution_pointwise")."""
    if call.generated:
        return call.kernel
    parts = call.kernel.split(".")
    if parts[0] == "extern_kernels":
        return parts[1] if len(parts) > 1 else parts[0]
    if parts[:2] == ["torch", "ops"] and len(parts) >= 4:
        return parts[3]
    if len(parts) >= 2 and parts[0] in ("aten", "prims", "mkldnn", "mkl", "_quantized"):
        return parts[1]
    return parts[-1]
