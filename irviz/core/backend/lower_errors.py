"""Where in a kernel's TensorIR a failed lowering points: the line of the kernel's TVMScript (as the
TensorIR pane prints it, `views.diff.function_text`) that TVM's error quotes or names, or else the
statement the target cannot take (a GPU thread binding on a CPU, a CPU-parallel loop or a loop with
no thread bound on a GPU). TVM's own messages rarely say where ("not implemented").

    where = failing_line(text, "llvm", error)     # (7, 'for tx in T.thread_binding(64, ...):') or None
    failing_kernel(lowered, target)               # "kernel NAME (line 7 of its TensorIR: ...): ..."
"""
from __future__ import annotations

import re


def _find(lines: list[str], pattern: str) -> tuple[int, str] | None:
    rx = re.compile(pattern)
    for i, line in enumerate(lines, 1):
        if rx.search(line):
            return i, line.strip()
    return None


def _quoted(lines: list[str], error: str) -> tuple[int, str] | None:
    """A statement TVM printed after "but got:" (dlight, schedule checks), found in the kernel."""
    _, sep, rest = error.partition("but got:")
    if not sep:
        return None
    for snippet in (ln.strip() for ln in rest.splitlines()):
        if snippet and not snippet.startswith(("#", "@")):
            hit = _find(lines, re.escape(snippet))
            if hit is not None:
                return hit
    return None


def _named(lines: list[str], error: str) -> tuple[int, str] | None:
    """A buffer or variable TVM names in backquotes (memory verification: "Variable `B` is
    directly accessed by host memory"): its first store, else its first use."""
    for name in re.findall(r"`(\w+)`", error):
        hit = _find(lines, rf"\b{re.escape(name)}\[[^\]]*\]\s*=") or _find(lines, rf"\b{re.escape(name)}\b")
        if hit is not None:
            return hit
    return None


def _structural(lines: list[str], kind: str) -> tuple[int, str] | None:
    if kind == "llvm":
        return _find(lines, r"T\.(thread_binding|launch_thread)\(|threadIdx|blockIdx")
    return (_find(lines, r"T\.(parallel|vectorized)\(")
            or (None if _find(lines, r"T\.thread_binding\(") else _find(lines, r"^\s*for \w")))


def failing_line(text: str, kind: str, error: str) -> tuple[int, str] | None:
    """(1-based line, its code) in `text`, the kernel's TVMScript, that the failure of lowering
    it for a target of `kind` ("llvm", "cuda", ...) with message `error` points at; None if none."""
    lines = text.splitlines()
    return _quoted(lines, error) or _named(lines, error) or _structural(lines, kind)


def failing_kernel(lowered, target) -> str | None:
    """When a whole module does not compile for `target`: "kernel NAME (line N of its TensorIR:
    ...): TVM's message" for the first kernel that does not compile alone, or None (each does:
    the failure is elsewhere). Each kernel is compiled on its own: only on the way to an error."""
    import tvm

    from irviz.core.errors import tvm_error_text
    from irviz.core.views.module_diff import function_text

    kind = str(target.kind.name)
    for gv, func in lowered.functions.items():
        if not isinstance(func, tvm.tirx.PrimFunc):
            continue
        try:
            tvm.compile(tvm.IRModule({gv: func}), target=target)
        except Exception as exc:
            msg = tvm_error_text(exc, head=8, tail=4)
            try:
                where = failing_line(function_text(lowered, gv.name_hint), kind, msg)
            except Exception:  # the kernel is named without its line
                where = None
            loc = f" (line {where[0]} of its TensorIR: {where[1][:100]})" if where else ""
            return f"kernel {gv.name_hint}{loc}: {msg}"
    return None
