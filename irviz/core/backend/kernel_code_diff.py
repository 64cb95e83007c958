"""One kernel's code on one side against the other: between two steps, or between two targets of
one step (AVX2 against AVX-512), in the shape of a step diff (irviz.core.views.module_diff) so the Diff
pane shows it as it shows TVMScript.

    d = kernel_code_diff(step_a.mod, step_b.mod, "fused_matmul_add", "x86-avx2", "x86-avx512")
    d["functions"][0]["rows"], d["language"], d["a"]["counts"], d["b"]["counts"]
"""
from __future__ import annotations

import difflib

from irviz.core.backend.kernel_code import kernel_code
from irviz.core.errors import RequestError
from irviz.core.views.module_diff import function_rows


def _side(mod, kernel: str, target, fmt: str | None) -> tuple[dict, str | None, str]:
    """(what the side is, its text or None when the step has no such kernel, its format)."""
    try:
        code = kernel_code(mod, target, only=kernel)
    except RequestError as exc:
        if "no kernel" not in exc.message:
            raise
        return {"target_name": target or "host", "counts": None, "error": None}, None, fmt or ""
    k = code.kernels[kernel]
    fmt = fmt or code.formats()[0]
    if fmt not in code.formats():
        raise RequestError(f"{kernel} on {code.target_name} has no {fmt} code",
                           hint=f"its formats: {', '.join(code.formats())}; compare targets of one "
                                f"kind (two CPUs, or two GPUs of one language)")
    info = {"target_name": code.target_name, "target": code.target, "kind": code.kind,
            "counts": k.counts, "error": k.error, "lexer": code.lexer(fmt)}
    return info, (k.code.get(fmt) if not k.error else f"; not compiled: {k.error}"), fmt


def kernel_code_diff(mod_a, mod_b, kernel: str, target_a=None, target_b=None, fmt: str | None = None,
                     label_a: str = "a", label_b: str = "b", context: int = 3) -> dict:
    """`{"unified", "functions": [{name, status, rows, hunk_starts}], "format", "language", "a", "b"}`;
    `a` and `b` say what each side is (target, counts). A kernel in one side only is added or removed."""
    side_a, text_a, fmt_a = _side(mod_a, kernel, target_a, fmt)
    side_b, text_b, fmt_b = _side(mod_b, kernel, target_b, fmt or (fmt_a if text_a is not None else None))
    if text_a is None and text_b is None:
        raise RequestError(f"no kernel {kernel!r} on either side",
                           hint="choose a kernel of one of the two steps (the TensorIR pane lists them)")
    if text_a is not None and text_b is not None and fmt_a != fmt_b:
        raise RequestError(f"{kernel} is {fmt_a} on one side and {fmt_b} on the other",
                           hint="compare targets of one kind (two CPUs, or two GPUs of one language)")
    a_lines = (text_a or "").splitlines()
    b_lines = (text_b or "").splitlines()
    rows, starts = function_rows(a_lines, b_lines, context)
    status = "added" if text_a is None else "removed" if text_b is None else "changed"
    functions = [{"name": kernel, "status": status, "rows": rows, "hunk_starts": starts}] if rows else []
    unified = "\n".join(difflib.unified_diff(a_lines, b_lines, label_a, label_b, n=context, lineterm=""))
    fmt_used = fmt_a if text_a is not None else fmt_b
    return {"unified": unified, "functions": functions, "format": fmt_used,
            "language": (side_a if text_a is not None else side_b).get("lexer", "text"),
            "a": side_a, "b": side_b, "kernel": kernel}
