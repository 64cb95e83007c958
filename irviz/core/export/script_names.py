"""Give clashing symbolic sizes distinct names in a printed module, so TVM's parser reads it back.

TVM 0.27 prints a symbolic size that a function takes through its signature (a PrimFunc's
``T.Buffer((batch, 128))``, a Relax parameter's ``R.Tensor((batch, 784))``) as a module-level
``batch = TypeVar("batch")``, and a size a Relax function defines in its body (``R.match_cast``
to ``(batch, 784)``) as ``batch = T.int64()`` inside that function.  After LegalizeOps the
PrimFuncs made from such a function carry the same name, and the parser refuses the second
definition ("Cannot redefine a non-PrimType object to a PrimType value").

Each function binds its own size variable, so renaming the module-level one where it is used
(not in a function from the point where that function defines its own) changes only a name,
which structural equality does not compare; the export still runs the renamed text back and
compares it with the module, so a renaming that went wrong shows as a file that does not load
or is not equal, never as a silent difference.  Only Python's tokenizer decides what a name is:
strings (an ``sblock("batch")``) and comments are left alone.
"""
from __future__ import annotations

import io
import re
import tokenize

__all__ = ["distinct_size_names"]

_TYPEVAR_RE = re.compile(r'^([A-Za-z_]\w*) = TypeVar\("\1"\)$', re.M)
# one size a function defines in its body, as the printer writes it: `batch = T.int64()`
_LOCAL_SIZE_RE = re.compile(r"^\s+([A-Za-z_]\w*) = T\.\w+\(\)\s*$")
# a function of the printed class starts at its first decorator (or its def) at class indentation
_FUNC_START_RE = re.compile(r"^    (@|def )")


def _function_spans(lines: list[str]) -> list[tuple[int, int]]:
    """[first, last) line numbers (1-based) of each function of the printed class."""
    starts = [k for k, ln in enumerate(lines, 1)
              if _FUNC_START_RE.match(ln) and not (k > 1 and lines[k - 2].startswith("    @"))]
    return list(zip(starts, starts[1:] + [len(lines) + 1]))


def distinct_size_names(text: str) -> tuple[str, dict[str, str]]:
    """``text`` with each module-level size that a function also defines in its body renamed
    (``batch`` -> ``batch_1``, a name the script does not use) wherever it means the module-level
    one: everywhere but in such a function from its own definition on; a comment above it says
    so -> (new text, {old name: new name}); ``text`` unchanged when nothing clashes."""
    module_level = set(_TYPEVAR_RE.findall(text))
    if not module_level:
        return text, {}
    lines = text.splitlines(keepends=True)
    # name -> (function start, its local definition, function end): from its definition on, the
    # name is the function's own; before it (the signature) it is still the module-level one
    local: dict[str, list[tuple[int, int, int]]] = {}
    for a, b in _function_spans(lines):
        for row in range(a, b):
            m = _LOCAL_SIZE_RE.match(lines[row - 1])
            if (m and m.group(1) in module_level
                    and not any(a == a2 for a2, _, _ in local.get(m.group(1), []))):
                local.setdefault(m.group(1), []).append((a, row, b))
    if not local:
        return text, {}
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):  # not Python: the parse-back check will say so
        return text, {}
    used = {t.string for t in tokens if t.type == tokenize.NAME}
    renames: dict[str, str] = {}
    for name in sorted(local):
        k = 1
        while f"{name}_{k}" in used:
            k += 1
        renames[name] = f"{name}_{k}"
        used.add(renames[name])

    edits: dict[int, list[tuple[int, int, str]]] = {}
    for t in tokens:
        row, col = t.start
        if t.type == tokenize.NAME and t.string in renames:
            if any(d <= row < b for _, d, b in local[t.string]):
                continue
            edits.setdefault(row, []).append((col, t.end[1], renames[t.string]))
        elif t.type == tokenize.STRING and _TYPEVAR_RE.match(t.line.rstrip("\n")):
            old = t.string[1:-1]
            if old in renames:
                edits.setdefault(row, []).append((col, t.end[1], f'"{renames[old]}"'))
    for row, spans in edits.items():
        ln = lines[row - 1]
        for c0, c1, new in sorted(spans, reverse=True):
            ln = ln[:c0] + new + ln[c1:]
        lines[row - 1] = ln

    first = min(text[:m.start()].count("\n") for m in _TYPEVAR_RE.finditer(text)
                if m.group(1) in renames)
    said = ", ".join(f"{old} -> {new}" for old, new in renames.items())
    where = ", ".join(sorted({_function_name(lines, a) for spans in local.values()
                              for a, _, _ in spans}))
    lines.insert(first, f"# irviz renamed {said} where it is this module-level size: {where} "
                        "defines its own size of that name in its body, and TVM's parser refuses "
                        "a second definition of one name\n")
    return "".join(lines), renames


def _function_name(lines: list[str], start: int) -> str:
    for ln in lines[start - 1:]:
        m = re.match(r"^    def ([A-Za-z_]\w*)\(", ln)
        if m:
            return m.group(1)
    return "?"
