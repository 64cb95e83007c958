"""Links between a kernel's TensorIR loops and the code it becomes, as far as the lowering keeps
them.  LLVM IR keeps each serial loop as blocks named after its variable (``for_body_ax1:``; a
copy made by unrolling an outer loop is ``for_body_ax1.1:``), so that link is exact.  Assembly
keeps no names: its loops are found by their back-edges (a jump up to a label).  When the kernel
body has as many of them as the LLVM IR has loop blocks, the k-th assembly loop is the k-th block's
loop; otherwise they are matched to the TensorIR loops that can still be loops in program order,
and the link says it is by order.  Line numbers are 1-based; only the kernel's body is linked (the
FFI entry after it checks arguments)."""
from __future__ import annotations

import re
from dataclasses import dataclass

_ASM_LABEL = re.compile(r"^(\.?[A-Za-z_$][\w.$]*):")
_ASM_JUMP = re.compile(r"^\s+(j\w+|b(?:\.\w+)?|cbn?z|tbn?z)\s+(?:[^,]*,\s*)*(\.?[A-Za-z_$][\w.$]*)\s*$")
_ENTRY = {"asm": re.compile(r"^__tvm_ffi_\w*:"), "ll": re.compile(r"^define .*@__tvm_ffi_")}
_LL_BODY = re.compile(r"^for_body_(\w+?)(\.\d+)?:")


@dataclass(frozen=True)
class Link:
    lines: tuple[int, ...]  # the code lines to mark (empty: not found); the first is scrolled to
    exact: bool
    note: str = ""


def looping(nest: list[dict]) -> list[int]:
    """Indices (in the loop nest) of the loops that can still be loops in machine code."""
    return [i for i, lp in enumerate(nest)
            if (lp.get("kind") or "serial") in ("serial", "parallel") and str(lp.get("extent")) != "1"]


def _body_lines(text: str, fmt: str) -> list[str]:
    lines = text.splitlines()
    entry = _ENTRY.get(fmt)
    end = next((n for n, ln in enumerate(lines) if entry and entry.match(ln)), len(lines))
    return lines[:end]


def asm_loops(text: str) -> list[tuple[int, int]]:
    """(header line, back-edge line) of each loop of the kernel body's assembly, by header."""
    labels: dict[str, int] = {}
    edges: dict[str, int] = {}
    for n, line in enumerate(_body_lines(text, "asm"), 1):
        m = _ASM_LABEL.match(line)
        if m:
            labels[m.group(1)] = n
            continue
        j = _ASM_JUMP.match(line)
        if j and j.group(2) in labels:
            edges[j.group(2)] = n
    return sorted((labels[k], end) for k, end in edges.items())


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


def _asm_owner(nest: list[dict], code: dict) -> tuple[list[int | None], bool]:
    """The TensorIR loop of each assembly loop, and whether that came through the LLVM IR."""
    loops = asm_loops(code.get("asm", ""))
    blocks = ll_loop_blocks(nest, code.get("ll", "")) if code.get("ll") else []
    if blocks and len(blocks) == len(loops):
        return [i for _n, i in blocks], True
    order = looping(nest)
    return [order[min(j, len(order) - 1)] if order else None for j in range(len(loops))], False


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
    loops = asm_loops(code.get("asm", ""))
    if not loops:
        return Link((), False, "the kernel's assembly has no loops: LLVM unrolled them all")
    owners, exact = _asm_owner(nest, code)
    mine = [loops[j] for j, i in enumerate(owners) if i == index]
    note = "" if exact else (f"the assembly has {len(loops)} loops for {len(looping(nest))} TensorIR "
                             "loops: linked by order")
    if not mine:
        return Link((), exact, "LLVM unrolled or removed this loop" if exact else note)
    first = mine[0]
    lines = tuple(range(first[0], first[1] + 1)) + tuple(s for s, _e in mine[1:])
    if len(mine) > 1:
        note = (note + "; " if note else "") + f"{len(mine)} copies (an outer loop was unrolled)"
    return Link(lines, exact, note)


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
    loops = asm_loops(code.get("asm", ""))
    owners, _exact = _asm_owner(nest, code)
    inside = [j for j, (s, e) in enumerate(loops) if s <= line <= e]
    if not inside:
        return None
    return owners[max(inside, key=lambda j: loops[j][0])]
