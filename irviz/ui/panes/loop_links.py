"""Links between a kernel's TensorIR loops and the code it becomes, where the code says which loop
is which, and "unknown" where it does not.

LLVM IR keeps each serial loop as blocks named after its variable (``for_body_ax1:``; a copy made
by unrolling an outer loop is ``for_body_ax1.1:``), so that link is exact.  Assembly keeps no
names; its loops are the natural loops of each function's control flow (machine_loops), never a
range from a label to a jump up to it, which took in the epilogue and ``ret`` LLVM placed between.
An assembly loop is linked to a TensorIR loop when either

- its function's loops nest exactly as the TensorIR loops that function runs (the body function,
  or the entry when LLVM inlined the body into it: the loops outside any parallel loop; each
  parallel lambda: its parallel loop and the loops inside), an outer loop's unrolled copies
  repeating its inner loops, in every reading of which short loops LLVM unrolled fully that fits
  (a loop of extent E unrolled fully leaves E copies of the loops inside it); or
- the same function's LLVM IR has its loops nested the same way, and the loop there exits to
  ``for_end_<var>``, the block TVM emits after loop <var>;

and the two never disagree.  Other assembly loops, and the TensorIR loops that would need them,
are unknown.  Line numbers are 1-based."""
from __future__ import annotations

import functools
import itertools
import json
import re
from dataclasses import dataclass

from irviz.core.backend.machine_loops import FunctionLoops, asm_functions, ll_functions

_ENTRY = {"asm": re.compile(r"^__tvm_ffi_\w*:"), "ll": re.compile(r"^define .*@__tvm_ffi_")}
_LL_BODY = re.compile(r"^for_body_(\w+?)(\.\d+)?:")
_LAMBDA = re.compile(r"^(\.L)?__tvm_parallel_lambda(\.\d+)?$")
_END_BLOCK = re.compile(r"^for_end_(\w+?)((\.\d+)|\.loopexit)*$")


@dataclass(frozen=True)
class Link:
    lines: tuple[int, ...]  # the code lines to mark (empty: not found); the first is scrolled to
    exact: bool
    note: str = ""
    copies: tuple[int, ...] = ()  # header lines of the loop's unrolled copies (also in `lines`)
    unknown: bool = False  # the code does not say where the loop is

    @property
    def where(self) -> str:
        """'lines 7–24, 40–41; copies at 28, 49', 'unknown' or 'not in this code'."""
        if self.unknown:
            return "unknown"
        own = [n for n in self.lines if n not in self.copies]
        if not own:
            return "not in this code"
        runs: list[str] = []
        start: int | None = own[0]
        for a, b in zip(own, own[1:] + [None]):
            if b != a + 1:
                runs.append(f"{start}–{a}" if a != start else str(start))
                start = b
        text = ("line " if len(runs) == 1 and "–" not in runs[0] else "lines ") + ", ".join(runs)
        return text + (f"; copies at {', '.join(map(str, self.copies))}" if self.copies else "")


def looping(nest: list[dict]) -> list[int]:
    """Indices (in the loop nest) of the loops that can still be loops in machine code."""
    return [i for i, lp in enumerate(nest)
            if (lp.get("kind") or "serial") in ("serial", "parallel") and str(lp.get("extent")) != "1"]


def _has_body_function(text: str, fmt: str) -> bool:
    pattern = r"^[\w.$]+_compute_:" if fmt == "asm" else r"^define .*@[\w.$]+_compute_\("
    return re.search(pattern, text, re.M) is not None


def _body_lines(text: str, fmt: str) -> list[str]:
    """The lines up to the FFI entry, which only checks arguments when a body function exists;
    all of them when LLVM inlined the body into the entry."""
    lines = text.splitlines()
    if not _has_body_function(text, fmt):
        return lines
    entry = _ENTRY.get(fmt)
    end = next((n for n, ln in enumerate(lines) if entry and entry.match(ln)), len(lines))
    return lines[:end]


def _loop_of_label(nest: list[dict], var_part: str, seen: dict) -> int | None:
    """The TensorIR loop a `for_body_<var_part>` block belongs to: the longest loop variable that
    starts var_part (LLVM appends digits to a name used twice), its n-th distinct name the n-th
    loop over that variable."""
    best = None
    for i in looping(nest):
        var = str(nest[i].get("var") or "")
        if var and var_part.startswith(var) and (var_part == var or var_part[len(var):].isdigit()):
            if best is None or len(var) > len(str(nest[best].get("var"))):
                best = i
    if best is None:
        return None
    var = str(nest[best].get("var"))
    names = seen.setdefault(var, [])
    if var_part not in names:
        names.append(var_part)
    same = [i for i in looping(nest) if str(nest[i].get("var")) == var]
    k = names.index(var_part)
    return same[k] if k < len(same) else None


def ll_loop_blocks(nest: list[dict], ll: str) -> list[tuple[int, int | None]]:
    """(line, TensorIR loop index or None) of each loop block of the kernel body's LLVM IR, in order."""
    seen: dict = {}
    out = []
    for n, line in enumerate(_body_lines(ll, "ll"), 1):
        m = _LL_BODY.match(line)
        if m:
            out.append((n, _loop_of_label(nest, m.group(1), seen)))
    return out


def _why_not(lp: dict) -> str | None:
    kind = lp.get("kind") or "serial"
    if kind not in ("serial", "parallel"):
        return f"{lp.get('var')} is {kind}: no loop of its own in the code"
    if str(lp.get("extent")) == "1":
        return f"{lp.get('var')} has extent 1: no loop of its own in the code"
    return None


# ---------------------------------------------------------------------------------------------
# assembly: which TensorIR loop each machine loop is


def _tir_tree(nest: list[dict]) -> dict[int | None, list[int]]:
    """{looping loop or None (the top): the looping loops directly inside it}, in program order."""
    keep = set(looping(nest))
    children: dict[int | None, list[int]] = {None: []}
    stack: list[tuple[int, int]] = []  # (depth, index) of the enclosing loops
    for i, lp in enumerate(nest):
        depth = int(lp.get("depth") or 0)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if i in keep:
            parent = next((j for _d, j in reversed(stack) if j in keep), None)
            children.setdefault(parent, []).append(i)
            children.setdefault(i, [])
        stack.append((depth, i))
    return children


def _groups(nest: list[dict]) -> tuple[list[int], list[int]]:
    """(the top loops the body function runs, the parallel loops each with a lambda of its own),
    both in program order: a parallel loop and what is inside it run in its lambda."""
    tree = _tir_tree(nest)
    lambdas: list[int] = []

    def walk(parent):
        for i in tree[parent]:
            if (nest[i].get("kind") or "serial") == "parallel":
                lambdas.append(i)
            else:
                walk(i)

    walk(None)
    return [i for i in tree[None] if i not in lambdas], lambdas


def _canon(kids, node) -> tuple:
    """A loop's nesting, its inner loops in no particular order (LLVM lays loops out in its own)."""
    return tuple(sorted(_canon(kids, c) for c in kids(node)))


def _correspond(src_kids, src_roots: list, f: FunctionLoops, copies: bool,
                label=lambda x: x) -> dict[int, set] | None:
    """{machine loop of `f`: the labels of the source loops it can be}, when `f`'s loops nest as
    the source's (each outer loop's unrolled copies repeating its inner loops where `copies`), else
    None.  Loops of the same nesting side by side cannot be told apart: each may be any of them."""
    out: dict[int, set] = {}

    def pair(srcs: list, machs: list[int]) -> bool:
        by_src: dict[tuple, list] = {}
        for x in srcs:
            by_src.setdefault(_canon(src_kids, x), []).append(x)
        by_mach: dict[tuple, list[int]] = {}
        for m in machs:
            by_mach.setdefault(_canon(f.children, m), []).append(m)
        if set(by_src) != set(by_mach):
            return False
        ratios = {len(by_mach[c]) / len(by_src[c]) for c in by_src}
        if len(ratios) > 1 or not all(r == int(r) for r in ratios) or (not copies and ratios - {1.0}):
            return False
        for c, group in by_mach.items():
            for m in group:
                out.setdefault(m, set()).update(label(x) for x in by_src[c])
                if not all(pair(src_kids(x), f.children(m)) for x in by_src[c]):
                    return False
        return True

    return out if f.certain and pair(list(src_roots), f.children(None)) else None


_MAX_UNROLLED = 64  # LLVM unrolls loops fully only when they are short
_MAX_CHOICES = 10  # TensorIR loops that may have been unrolled fully: 2^10 readings at most


@dataclass(eq=False)
class _Expanded:
    tir: int
    kids: list


def _by_shape(nest: list[dict], tir_kids, roots: list[int], members: set[int], f: FunctionLoops):
    """{machine loop: the TensorIR loop it is} from the nesting alone, over every reading of which
    short TensorIR loops LLVM unrolled fully (one unrolled E times leaves E copies of what is inside
    it); a machine loop is known where every reading that fits says the same."""
    def extent(i):
        text = str(nest[i].get("extent"))
        return int(text) if text.isdigit() else None

    short = sorted(i for i in members if (extent(i) or 0) <= _MAX_UNROLLED and extent(i))
    if len(short) > _MAX_CHOICES:
        short = []

    def size(ts, gone) -> int:
        return sum(extent(t) * size(tir_kids(t), gone) if t in gone else 1 + size(tir_kids(t), gone)
                   for t in ts)

    def expand(ts, gone) -> list[_Expanded]:
        out: list[_Expanded] = []
        for t in ts:
            inner = expand(tir_kids(t), gone)
            out.extend(inner * extent(t) if t in gone else [_Expanded(t, inner)])
        return out

    seen: dict[int, set] = {}
    fits = 0
    for r in range(len(short) + 1):
        for gone in itertools.combinations(short, r):
            if size(roots, set(gone)) > len(f.loops):
                continue
            got = _correspond(lambda x: x.kids, expand(roots, set(gone)), f, True, lambda x: x.tir)
            if got is not None:
                fits += 1
                for m, c in got.items():
                    seen.setdefault(m, set()).update(c)
    return {m: _one(c) for m, c in seen.items()} if fits else {}


def _ll_names(nest: list[dict], group: set[int], ll: FunctionLoops) -> dict[int, int]:
    """{LLVM IR loop: the TensorIR loop in `group` it is}, from the `for_end_<var>` block it exits to."""
    out = {}
    for k in range(len(ll.loops)):
        vars_ = {m.group(1) for s in ll.exits(k) if (m := _END_BLOCK.match(s))}
        hits = [i for i in group if str(nest[i].get("var")) in vars_]
        if len(vars_) == 1 and len(hits) == 1:
            out[k] = hits[0]
    return out


def _one(candidates: set | None, name=lambda x: x):
    named = {name(x) for x in candidates or ()}
    return next(iter(named)) if len(named) == 1 else None


@dataclass
class _AsmMap:
    functions: list[FunctionLoops]
    owner: dict[tuple[int, int], int | None]  # (function, loop) -> TensorIR loop, None: unknown
    notes: dict[int | None, str]  # function (None: all) -> why some of its loops are unknown
    group_of: dict[int, int]  # TensorIR loop -> the function that runs it, where that is clear


def _asm_map(nest: list[dict], code: dict) -> _AsmMap:
    """Which TensorIR loop each assembly loop is (the Code tab asks on every selection and click:
    the last few answers are kept)."""
    return _asm_map_of(json.dumps(nest, sort_keys=True, default=str), code.get("asm", ""), code.get("ll", ""))


@functools.lru_cache(maxsize=8)
def _asm_map_of(nest_json: str, asm: str, ll_text: str) -> _AsmMap:
    nest = json.loads(nest_json)
    code = {"asm": asm, "ll": ll_text}
    funcs = asm_functions(code.get("asm", ""))
    tree = _tir_tree(nest)
    body_roots, lambdas = _groups(nest)
    cut = set(lambdas)

    def tir_kids(i):
        return [c for c in tree.get(i, []) if c not in cut]

    inlined = not any(f.name.endswith("_compute_") for f in funcs)
    body = [k for k, f in enumerate(funcs)
            if f.name.endswith("_compute_") or (inlined and f.name.startswith("__tvm_ffi_"))]
    lams = [k for k, f in enumerate(funcs) if _LAMBDA.match(f.name)]
    notes: dict[int | None, str] = {}
    groups = [(body[0], body_roots)] if len(body) == 1 else []
    if len(lams) == len(lambdas):
        groups += list(zip(lams, [[p] for p in lambdas]))
    else:
        notes[None] = f"{len(lams)} parallel lambdas for {len(lambdas)} parallel loops"
    ll_funcs = {f.name: f for f in ll_functions(code.get("ll", ""))} if code.get("ll") else {}
    owner: dict[tuple[int, int], int | None] = {(k, j): None for k, f in enumerate(funcs)
                                                for j in range(len(f.loops))}
    group_of: dict[int, int] = {}
    for k, roots in groups:
        f = funcs[k]
        members, todo = set(), list(roots)
        while todo:
            i = todo.pop()
            members.add(i)
            todo.extend(tir_kids(i))
        group_of.update(dict.fromkeys(members, k))
        if not f.certain:
            notes[k] = f"the control flow of {f.name} cannot be read: {f.why}"
            continue
        by_shape = _by_shape(nest, tir_kids, roots, members, f)
        ll = ll_funcs.get(f.name[2:] if f.name.startswith(".L") else f.name)
        by_name: dict[int, int | None] = {}
        if ll is not None and ll.certain:
            named = _ll_names(nest, members, ll)
            same = _correspond(ll.children, ll.children(None), f, copies=False) or {}
            by_name = {m: _one(c, named.get) for m, c in same.items()}
        for j in range(len(f.loops)):
            a, b = by_shape.get(j), by_name.get(j)
            owner[(k, j)] = a if b is None else b if a is None or a == b else None
        if any(owner[(k, j)] is None for j in range(len(f.loops))):
            notes[k] = f"the loops of {f.name} do not nest as the TensorIR's"
    return _AsmMap(funcs, owner, notes, group_of)


def asm_loops(text: str) -> list[tuple[int, int]]:
    """(first line, last line) of each loop of the kernel body's assembly (the entry's too when
    the body was inlined into it), in the order their code comes."""
    funcs = asm_functions(text)
    inlined = not any(f.name.endswith("_compute_") for f in funcs)
    return sorted((lp.lines[0], lp.lines[-1]) for f in funcs
                  if inlined or not f.name.startswith("__tvm_ffi_") for lp in f.loops)


def loop_to_code(nest: list[dict], index: int, code: dict, fmt: str) -> Link:
    """Where TensorIR loop `index` of the kernel is in its code ({"asm", "ll"}) of format `fmt`."""
    if not 0 <= index < len(nest):
        return Link((), False, "no such loop")
    why = _why_not(nest[index])
    if why:
        return Link((), False, why)
    if fmt == "ll":
        lines = tuple(n for n, i in ll_loop_blocks(nest, code.get("ll", "")) if i == index)
        return Link(lines, True, "" if lines else
                    f"no for_body_{nest[index].get('var')} block: LLVM unrolled or removed the loop")
    if fmt != "asm":
        return Link((), False, "")
    m = _asm_map(nest, code)
    if not any(f.loops for f in m.functions):
        return Link((), True, "the kernel's assembly has no loops: LLVM unrolled them all")
    mine = [(k, j) for (k, j), i in m.owner.items() if i == index]
    if not mine:
        k = m.group_of.get(index)
        if k is not None and all(m.owner[(k, j)] is not None for j in range(len(m.functions[k].loops))):
            return Link((), True, "LLVM unrolled or removed this loop")
        why = m.notes.get(k) or m.notes.get(None) or "no assembly loop is known to be it"
        return Link((), False, f"unknown: {why}", unknown=True)
    # the outermost copies: an inner loop of a copy is that copy's, not another of this loop's
    loops = [m.functions[k].loops[j] for k, j in mine]
    first, rest = loops[0], [lp for lp in loops[1:] if not set(lp.lines) <= set(loops[0].lines)]
    copies = tuple(lp.lines[0] for lp in rest)
    note = f"{len(rest) + 1} copies of it in the code (LLVM unrolled or versioned a loop)" if rest else ""
    return Link(tuple(sorted(set(first.lines) | set(copies))), True, note, copies=copies)


def code_to_loop(nest: list[dict], line: int, code: dict, fmt: str) -> int | None:
    """The TensorIR loop (index in `nest`) whose code holds `line`, innermost first, or None."""
    if fmt == "ll":
        body = _body_lines(code.get("ll", ""), "ll")
        if line > len(body):
            return None
        inside = None
        for n, i in ll_loop_blocks(nest, code.get("ll", "")):
            if n > line:
                break
            end = re.compile(rf"^for_end_{re.escape(str(nest[i].get('var')) if i is not None else '')}")
            closed = i is None or any(end.match(body[m - 1]) for m in range(n + 1, line + 1))
            inside = i if not closed else inside
        return inside
    if fmt != "asm":
        return None
    m = _asm_map(nest, code)
    best = None
    for k, f in enumerate(m.functions):
        for j, lp in enumerate(f.loops):
            owner = m.owner[(k, j)]
            if owner is not None and line in lp.lines and (best is None or lp.depth > best[0]):
                best = (lp.depth, owner)
    return best[1] if best else None
