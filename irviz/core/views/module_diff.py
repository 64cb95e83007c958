"""Per-function comparison of two IRModules: which functions changed, their TVMScript text, and
readable diffs (unified text and side-by-side rows with intra-line character ranges).

Speed: a function is compared by its structural hash (see ``_function_hash``), and only functions whose hash differs are
printed and diffed.  Unchanged functions are usually the *same object* in consecutive snapshots
(passes share structure), so hashes are cached by object handle, and printed text is cached by
(structural hash, name) in a small LRU.

Text: ``function_text`` prints one function on its own (``func.script(name=...)``), without the
``# from tvm.script import ...`` header and the "Metadata omitted" footer.  Printed alone, calls
to other functions read ``fused_conv2d_add(x, ...)`` / ``R.call_tir(add, ...)`` (not ``cls.add``)
and tensor constants are numbered ``metadata["ir.GenericConst"][k]`` *within the function*, so a
change in one function never renumbers the text of another: the diff stays local.  The whole
module's text (``mod.script()``) is what an export writes.
"""
from __future__ import annotations

import difflib
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import tvm_ffi

from irviz.core import tvm_compat

__all__ = [
    "FunctionChanges", "FunctionDiff", "function_hashes", "compare_modules", "function_names",
    "function_text", "unified_diff", "function_unified_diff", "side_by_side", "function_rows",
    "intraline_ranges", "clear_caches",
]

_LOCK = threading.Lock()

# ---------------------------------------------------------------------------------------------
# hashes


class _HandleCache:
    """handle -> value, keeping a strong reference to the object so the address is not reused."""

    def __init__(self, maxsize: int):
        self.maxsize = maxsize
        self._d: OrderedDict[int, tuple[object, object]] = OrderedDict()

    def get(self, obj):
        key = obj.__chandle__()
        with _LOCK:
            hit = self._d.get(key)
            if hit is not None:
                self._d.move_to_end(key)
                return hit[1]
        return None

    def put(self, obj, value):
        with _LOCK:
            self._d[obj.__chandle__()] = (obj, value)
            while len(self._d) > self.maxsize:
                self._d.popitem(last=False)


_HASHES = _HandleCache(8192)


_CONST_HASHES = _HandleCache(65536)


def _const_hash(c) -> int:
    h = _CONST_HASHES.get(c)
    if h is None:
        h = int(tvm_ffi.structural_hash(c))
        _CONST_HASHES.put(c, h)
    return h


def _function_hash(func) -> int:
    """Structural hash of one function that does not depend on GlobalVar *identity*.

    A function alone sees the GlobalVars it calls as free variables, which the default structural
    hash compares by pointer: two parses of the same text, or a pass that re-creates the module's
    GlobalVars, would look changed.  So hash with map_free_vars=True and add the callee names in
    order of use (a renamed callee is a change).

    Tensor constants (weights) are hashed once each, by object, and combined in order: hashing
    ResNet-18's main with its 45 MB of weights took 32 ms per call, without them 0.4 ms."""
    h = _HASHES.get(func)
    if h is None:
        h = int(tvm_ffi.structural_hash(func, map_free_vars=True, skip_tensor_content=True))
        if _is_relax(func):
            relax = tvm_compat.relax
            callees = tuple(g.name_hint for g in relax.analysis.all_global_vars(func))
            consts: list[int] = []

            def visit(e):
                if isinstance(e, tvm_compat.GenericConst) and isinstance(e.value, tvm_compat.RuntimeTensor):
                    consts.append(_const_hash(e))

            relax.analysis.post_order_visit(func, visit)
            if callees or consts:
                h = hash((h, callees, tuple(consts))) & 0xFFFFFFFFFFFFFFFF
        _HASHES.put(func, h)
    return h


def clear_caches() -> None:
    """Forget cached hashes (they hold references to functions and constants, i.e. weights).
    A Session calls this when it is garbage-collected."""
    with _LOCK:
        _HASHES._d.clear()
        _CONST_HASHES._d.clear()


def _functions(mod) -> dict[str, object]:
    return {gv.name_hint: f for gv, f in mod.functions.items()}


def function_hashes(mod) -> dict[str, int]:
    """Function name -> structural hash (callee names and constant values are part of the hash)."""
    return {name: _function_hash(f) for name, f in _functions(mod).items()}


def _is_relax(func) -> bool:
    return isinstance(func, tvm_compat.relax.Function)


def function_names(mod) -> list[str]:
    """Display order: Relax functions first ("main" first), then TensorIR functions, each by name."""
    funcs = _functions(mod)
    return sorted(funcs, key=lambda n: (0 if _is_relax(funcs[n]) else 1, n != "main", n))


# ---------------------------------------------------------------------------------------------
# changes


@dataclass
class FunctionChanges:
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    # the changed functions whose code is the same, only their attributes differ (op_pattern,
    # schedule notes, ...)
    attrs_only: list[str] = field(default_factory=list)

    @property
    def changed_any(self) -> bool:
        return bool(self.added or self.removed or self.changed)

    @property
    def what(self) -> str:
        """"none", "attrs" (only function attributes changed) or "ir"."""
        if not self.changed_any:
            return "none"
        if not self.added and not self.removed and set(self.changed) <= set(self.attrs_only):
            return "attrs"
        return "ir"

    def to_dict(self) -> dict:
        return {"added": list(self.added), "removed": list(self.removed), "changed": list(self.changed)}


def compare_modules(before, after) -> FunctionChanges:
    """Functions added, removed, or whose structural hash changed (by global name)."""
    if before is None:
        return FunctionChanges(added=function_names(after))
    if before.same_as(after):
        return FunctionChanges()
    fb, fa = _functions(before), _functions(after)
    order = {n: i for i, n in enumerate(function_names(after))}
    order_b = {n: i for i, n in enumerate(function_names(before))}
    # the same object is unchanged without hashing (passes share untouched functions)
    changed = [n for n in fa if n in fb and not fa[n].same_as(fb[n])
               and _function_hash(fa[n]) != _function_hash(fb[n])]
    changed = sorted(changed, key=order.get)
    return FunctionChanges(
        added=sorted((n for n in fa if n not in fb), key=order.get),
        removed=sorted((n for n in fb if n not in fa), key=order_b.get),
        changed=changed,
        attrs_only=[n for n in changed if _same_but_attrs(fa[n], fb[n])],
    )


def _without_attrs(func):
    attrs = func.attrs
    for key in list(attrs.keys()) if attrs is not None else []:
        func = func.without_attr(key)
    return func


def _same_but_attrs(a, b) -> bool:
    try:
        return tvm_ffi.structural_equal(_without_attrs(a), _without_attrs(b))
    except Exception:  # a label only: when in doubt, say the code changed
        return False


# ---------------------------------------------------------------------------------------------
# text

_TEXT: OrderedDict[tuple[int, str], str] = OrderedDict()
_TEXT_MAX = 4096
_HEADER_RE = re.compile(r"^# from tvm\.(script|tirx)\b.*$")
_FOOTER = "# Metadata omitted."


def _clean_script(text: str) -> str:
    lines = text.splitlines()
    i = 0
    while i < len(lines) and (not lines[i].strip() or _HEADER_RE.match(lines[i])):
        i += 1
    j = len(lines)
    while j > i and (not lines[j - 1].strip() or lines[j - 1].startswith(_FOOTER)):
        j -= 1
    return "\n".join(lines[i:j]) + "\n"


def function_text(mod, name: str) -> str:
    """TVMScript of one function (see the module docstring), cached by (structural hash, name)."""
    func = None
    for gv, f in mod.functions.items():
        if gv.name_hint == name:
            func = f
            break
    if func is None:
        raise KeyError(f"no function named {name!r} in the module")
    key = (_function_hash(func), name)
    with _LOCK:
        text = _TEXT.get(key)
        if text is not None:
            _TEXT.move_to_end(key)
            return text
    text = _clean_script(func.script(name=name))
    with _LOCK:
        _TEXT[key] = text
        while len(_TEXT) > _TEXT_MAX:
            _TEXT.popitem(last=False)
    return text


def _lines(mod, name) -> list[str]:
    if mod is None or name is None:
        return []
    return function_text(mod, name).splitlines()


def _diff_list(before, after) -> list[tuple[str, str]]:
    """(name, status) for every function that differs, in display order (after's, then removed)."""
    ch = compare_modules(before, after)
    status = {n: "changed" for n in ch.changed}
    status.update({n: "added" for n in ch.added})
    out = [(n, status[n]) for n in function_names(after) if n in status]
    out += [(n, "removed") for n in ch.removed]
    return out


# ---------------------------------------------------------------------------------------------
# unified diff


def function_unified_diff(before_mod, after_mod, name: str, status: str | None = None,
                          context: int = 3) -> str:
    if status is None:
        status = "added" if before_mod is None or name not in _functions(before_mod) else (
            "removed" if name not in _functions(after_mod) else "changed")
    a = _lines(before_mod, name) if status != "added" else []
    b = _lines(after_mod, name) if status != "removed" else []
    fromfile = "/dev/null" if status == "added" else f"a/{name}"
    tofile = "/dev/null" if status == "removed" else f"b/{name}"
    return "\n".join(difflib.unified_diff(a, b, fromfile, tofile, n=context, lineterm=""))


def unified_diff(before_mod, after_mod, context: int = 3) -> str:
    """Unified diff (git style, one file section per function) of only the functions that were
    added, removed or changed.  Empty string when nothing changed."""
    parts = [function_unified_diff(before_mod, after_mod, n, s, context)
             for n, s in _diff_list(before_mod, after_mod)]
    text = "\n".join(p for p in parts if p)
    return text + "\n" if text else ""


# ---------------------------------------------------------------------------------------------
# side by side

_TOKEN_RE = re.compile(r"\d+(?:\.\d+)?(?:[eE][-+]?\d+)?\w*|\w+|\s+|[^\w\s]")


def _merge(ranges: list[list[int]]) -> list[list[int]]:
    out: list[list[int]] = []
    for s, e in ranges:
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def intraline_ranges(left: str, right: str) -> tuple[list[list[int]], list[list[int]]]:
    """Character ranges [start, end) that differ between two lines, matched token by token
    (identifiers, numbers, whitespace runs, single punctuation), so ``lv1`` -> ``lv12`` marks the
    whole identifier rather than one digit."""
    lt, rt = _TOKEN_RE.findall(left), _TOKEN_RE.findall(right)
    loff, roff = [0], [0]
    for t in lt:
        loff.append(loff[-1] + len(t))
    for t in rt:
        roff.append(roff[-1] + len(t))
    sm = difflib.SequenceMatcher(None, lt, rt, autojunk=False)
    if lt and rt and sm.ratio() < 0.3:  # unrelated lines: mark them whole, not a confetti of bits
        return [[0, len(left)]], [[0, len(right)]]
    lr, rr = [], []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        if i2 > i1:
            lr.append([loff[i1], loff[i2]])
        if j2 > j1:
            rr.append([roff[j1], roff[j2]])
    return _merge(lr), _merge(rr)


@dataclass
class FunctionDiff:
    """Side-by-side diff of one function.

    rows: ``[left_no, left_text, right_no, right_text, tag, left_ranges, right_ranges]`` with
    1-based line numbers (None on the side that has no line), tag in "equal" | "replace" |
    "insert" | "delete", ranges = [[start, end), ...] character ranges to emphasise within a
    "replace" pair (empty for the other tags: the whole line is new or gone).
    Only hunks (changed lines plus ``context`` lines around them) are kept; a new hunk starts at
    each index in ``hunk_starts`` (line numbers jump there).
    """

    name: str
    status: str  # "added" | "removed" | "changed"
    rows: list[list]
    hunk_starts: list[int] = field(default_factory=list)
    left_lines: int = 0
    right_lines: int = 0

    def to_dict(self) -> dict:
        return {"name": self.name, "status": self.status, "rows": self.rows,
                "hunk_starts": self.hunk_starts}


def function_rows(a: list[str], b: list[str], context: int = 3) -> tuple[list[list], list[int]]:
    """Rows and hunk starts for two line lists (see FunctionDiff)."""
    rows: list[list] = []
    starts: list[int] = []
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for group in sm.get_grouped_opcodes(context):
        starts.append(len(rows))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                for k in range(i2 - i1):
                    rows.append([i1 + k + 1, a[i1 + k], j1 + k + 1, b[j1 + k], "equal", [], []])
            elif tag == "delete":
                for i in range(i1, i2):
                    rows.append([i + 1, a[i], None, "", "delete", [], []])
            elif tag == "insert":
                for j in range(j1, j2):
                    rows.append([None, "", j + 1, b[j], "insert", [], []])
            else:  # replace: pair similar lines, the others become delete/insert rows
                for i, j in _align(a, b, i1, i2, j1, j2):
                    if i is not None and j is not None:
                        lr, rr = intraline_ranges(a[i], b[j])
                        rows.append([i + 1, a[i], j + 1, b[j], "replace", lr, rr])
                    elif i is not None:
                        rows.append([i + 1, a[i], None, "", "delete", [], []])
                    else:
                        rows.append([None, "", j + 1, b[j], "insert", [], []])
    return rows, starts


_PAIR_MIN = 0.6  # token similarity for two lines to be shown as one changed line
_ALIGN_MAX_CELLS = 1600
_ALIGN_TOKENS = 48  # similarity looks at the start of long lines only (speed)


def _align(a, b, i1, i2, j1, j2) -> list[tuple[int | None, int | None]]:
    """Order-preserving pairing of a[i1:i2] with b[j1:j2] that maximises the summed similarity of
    paired lines (pairs below _PAIR_MIN are not made).  Big blocks are paired in order."""
    m, n = i2 - i1, j2 - j1
    if m * n > _ALIGN_MAX_CELLS:
        out = [(i1 + k if k < m else None, j1 + k if k < n else None) for k in range(max(m, n))]
        return out
    ta = [_TOKEN_RE.findall(a[i1 + x])[:_ALIGN_TOKENS] for x in range(m)]
    tb = [_TOKEN_RE.findall(b[j1 + y])[:_ALIGN_TOKENS] for y in range(n)]
    sim = [[0.0] * n for _ in range(m)]
    sm = difflib.SequenceMatcher(None, autojunk=False)
    for y in range(n):
        sm.set_seq2(tb[y])  # the matcher caches its analysis of seq2
        ly = len(tb[y])
        for x in range(m):
            lx = len(ta[x])
            if 2.0 * min(lx, ly) / ((lx + ly) or 1) < _PAIR_MIN:
                continue
            sm.set_seq1(ta[x])
            sim[x][y] = sm.quick_ratio()  # token-bag overlap: cheap, good enough to pair lines
    best = [[0.0] * (n + 1) for _ in range(m + 1)]
    for x in range(m - 1, -1, -1):
        for y in range(n - 1, -1, -1):
            v = max(best[x + 1][y], best[x][y + 1])
            if sim[x][y] >= _PAIR_MIN:
                v = max(v, sim[x][y] + best[x + 1][y + 1])
            best[x][y] = v
    out: list[tuple[int | None, int | None]] = []
    x = y = 0
    while x < m and y < n:
        if sim[x][y] >= _PAIR_MIN and best[x][y] == sim[x][y] + best[x + 1][y + 1]:
            out.append((i1 + x, j1 + y))
            x, y = x + 1, y + 1
        elif best[x][y] == best[x + 1][y]:
            out.append((i1 + x, None))
            x += 1
        else:
            out.append((None, j1 + y))
            y += 1
    out += [(i1 + k, None) for k in range(x, m)]
    out += [(None, j1 + k) for k in range(y, n)]
    return out


def side_by_side(before_mod, after_mod, context: int = 3) -> list[FunctionDiff]:
    """One FunctionDiff per added/removed/changed function (unchanged ones are not printed)."""
    out = []
    for name, status in _diff_list(before_mod, after_mod):
        a = _lines(before_mod, name) if status != "added" else []
        b = _lines(after_mod, name) if status != "removed" else []
        rows, starts = function_rows(a, b, context)
        out.append(FunctionDiff(name, status, rows, starts, len(a), len(b)))
    return out
