"""The loops of compiled code, found from its control flow: each function of x86-64 or AArch64
assembly (or of LLVM IR) is cut into basic blocks, and a loop is a natural loop, a block (the
header) that dominates a block jumping back to it, with every block that reaches that jump without
passing the header.  A jump up the page is not enough: LLVM lays argument checks and loop exits out
in any order, and puts a loop's latch after the function's epilogue and `ret`, which lie outside
every loop here.  Code whose control flow cannot be read (an indirect jump, a cycle with two ways
in) says so instead of guessing.  Pure text work: no TVM, so the GUI's panes use it too.

    for f in asm_functions(text):          # FunctionLoops, in file order
        f.name, f.loops[0].header, f.loops[0].lines, f.loops[0].parent, f.certain
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

# a label on its own line; basic-block, constant-pool, jump-table and temporary labels are local
# to a function, any other label (`k_compute_:`, `.L__tvm_parallel_lambda.5:`) starts one
_ASM_LABEL = re.compile(r"^\s*(\.?[A-Za-z_$][\w.$]*):")
_LOCAL_LABEL = re.compile(r"^\.L([A-Za-z]+\d+(_\d+)?|tmp\d+|func_end\d+)$")
_ASM_TYPE = re.compile(r"^\s*\.type\s+([\w.$]+),\s*[@%]function")
_ASM_COMMENT = re.compile(r"(^|\s)#(\s|$).*|//.*")
_RET = re.compile(r"^(retq?|retl|ud2|hlt|brk|udf)$")
_X86_JUMP = re.compile(r"^j(?!mp)[a-z]+$")
_ARM_COND = re.compile(r"^(b\.[a-z]+|cbn?z|tbn?z)$")
UNCONDITIONAL_JUMP = re.compile(r"^(jmpq?|b)$")
_INDIRECT = re.compile(r"^(br|braa\w*|brab\w*)$")
_FALLS = "\0falls through"
_RAISE = re.compile(r"^(\.L)?__tvm_set_raised\w*(@PLT)?$")

_LL_DEFINE = re.compile(r"^define\b[^@\n]*@\"?([\w.$-]+)\"?\(")
_LL_LABEL = re.compile(r"^([\w.$-]+):")
_LL_TARGETS = re.compile(r"label %([\w.$-]+)")
_LL_TERMINATOR = re.compile(r"^\s*(br|switch|ret|unreachable|indirectbr|resume|callbr)\b")


@dataclass
class Block:
    name: str
    first: int  # 1-based line of its label (or first instruction)
    last: int  # 1-based line of its last instruction
    succ: list[str] = field(default_factory=list)
    raises: bool = False  # calls TVM's error raising: the failure path of a check
    returns: bool = False  # leaves the function normally (a return or a tail call)


@dataclass(frozen=True)
class Loop:
    header: str  # the header block's label
    blocks: frozenset[str]
    lines: tuple[int, ...]  # every line of its blocks, in order; never a line outside them
    parent: int | None  # index (in its function's loops) of the innermost loop around it
    depth: int  # 0 for an outermost loop


@dataclass
class FunctionLoops:
    name: str
    first: int  # 1-based line of its label
    last: int
    loops: list[Loop]  # outer before inner, siblings in the order their code comes
    certain: bool = True  # False: its control flow could not be read (the loops may be incomplete)
    why: str = ""
    succ: dict[str, list[str]] = field(default_factory=dict)  # block -> the blocks it may go to next
    failure_lines: frozenset[int] = frozenset()  # lines only a failed check runs (assembly)

    def exits(self, loop: int) -> set[str]:
        """The blocks outside loop `loop` that its blocks go to."""
        blocks = self.loops[loop].blocks
        return {s for b in blocks for s in self.succ.get(b, ()) if s not in blocks}

    def children(self, parent: int | None) -> list[int]:
        return [i for i, lp in enumerate(self.loops) if lp.parent == parent]


# ---------------------------------------------------------------------------------------------
# assembly


def instruction(raw: str) -> tuple[str, str] | None:
    """(mnemonic, operands) of an assembly line; None for a label, a directive or a comment."""
    # x86 comments start "# " (AArch64 immediates are "#16"); AArch64 comments start "//"
    line = _ASM_COMMENT.sub("", raw).strip()
    if not line or line.startswith(".") or line.endswith(":"):
        return None
    if ":" in line.split()[0]:  # "label: insn" on one line
        line = line.split(":", 1)[1].strip()
        if not line:
            return None
    mnemonic, *rest = line.split(None, 1)
    return mnemonic.lower(), (rest[0].strip() if rest else "")


def _asm_function_spans(lines: list[str]) -> list[tuple[str, int, int]]:
    """(name, first line index, end index) of each function of the text."""
    starts: list[tuple[str, int]] = []
    # where `.type` says which labels are functions (LLVM's output), only those are
    typed = {t.group(1) for line in lines if (t := _ASM_TYPE.match(line))}
    for n, line in enumerate(lines):
        m = _ASM_LABEL.match(line)
        if m and not _LOCAL_LABEL.match(m.group(1)) and (not typed or m.group(1) in typed):
            starts.append((m.group(1), n))
    return [(name, n, starts[i + 1][1] if i + 1 < len(starts) else len(lines))
            for i, (name, n) in enumerate(starts)]


def _asm_blocks(lines: list[str], begin: int, end: int) -> tuple[list[Block], str]:
    """The basic blocks of one function's lines [begin, end), and why its flow cannot be read
    ("" when it can)."""
    blocks: list[Block] = []
    why = ""
    open_block: Block | None = None
    ended = False  # the open block ended with a jump or return
    pending: list[tuple[Block, str]] = []  # (block, its jump target) resolved once labels are known

    def start(name: str, n: int) -> Block:
        b = Block(name, n + 1, n + 1)
        if open_block is not None and not ended:
            open_block.succ.append(name)
        blocks.append(b)
        return b

    for n in range(begin, end):
        m = _ASM_LABEL.match(lines[n])
        if m:
            open_block, ended = start(m.group(1), n), False
            continue
        ins = instruction(lines[n])
        if ins is None:
            continue
        mnemonic, operands = ins
        if open_block is None or ended:
            open_block, ended = start(f"@{n + 1}", n), False
        open_block.last = n + 1
        target = operands.split(",")[-1].strip()
        if _RAISE.match(target) and (UNCONDITIONAL_JUMP.match(mnemonic) or re.match(r"^(callq?|bl)$", mnemonic)):
            open_block.raises = True
        if _RET.match(mnemonic):
            open_block.returns = not mnemonic.startswith(("ud2", "hlt", "brk", "udf"))
            ended = True
        elif UNCONDITIONAL_JUMP.match(mnemonic):
            if target.startswith(("*", "%")) or re.fullmatch(r"[xw]\d+", target):
                why = why or f"an indirect jump (line {n + 1})"
            else:
                pending.append((open_block, target))
            ended = True
        elif _INDIRECT.match(mnemonic):
            why = why or f"an indirect jump (line {n + 1})"
            ended = True
        elif _X86_JUMP.match(mnemonic) or _ARM_COND.match(mnemonic):
            pending.append((open_block, target))
            open_block.succ.append(_FALLS)  # to whichever block comes next in the text
            open_block = None
    names = {b.name for b in blocks}
    for b, target in pending:
        if target in names:
            b.succ.append(target)
        else:  # a tail call: it leaves the function
            b.returns = True
    for i, b in enumerate(blocks):
        if _FALLS in b.succ:
            b.succ = [s for s in b.succ if s != _FALLS] + ([blocks[i + 1].name] if i + 1 < len(blocks) else [])
    return blocks, why


def asm_functions(text: str) -> list[FunctionLoops]:
    """Each function of x86-64 or AArch64 assembly text with its loops."""
    lines = text.splitlines()
    out = []
    for name, begin, end in _asm_function_spans(lines):
        blocks, why = _asm_blocks(lines, begin + 1, end)
        entry = Block(name, begin + 1, begin + 1, [blocks[0].name] if blocks else [])
        f = _with_loops(name, begin + 1, end, [entry, *blocks], why)
        f.failure_lines = _failure_lines(blocks)
        out.append(f)
    return out


def _failure_lines(blocks: list[Block]) -> frozenset[int]:
    """The lines of an argument check's failure path, when there is one: the blocks that are not on
    a way from the function's start to its normal exit that raises no TVM error."""
    if not any(b.raises for b in blocks):
        return frozenset()
    by_name = {b.name: b for b in blocks}
    preds: dict[str, list[str]] = {}
    for b in blocks:
        for s in b.succ:
            preds.setdefault(s, []).append(b.name)

    def spread(start: list[str], step) -> set[str]:
        seen, todo = set(start), list(start)
        while todo:
            for n in step(todo.pop()):
                if n in by_name and n not in seen and not by_name[n].raises:
                    seen.add(n)
                    todo.append(n)
        return seen

    ahead = spread([blocks[0].name] if not blocks[0].raises else [], lambda n: by_name[n].succ)
    behind = spread([b.name for b in blocks if b.returns and not b.raises], lambda n: preds.get(n, ()))
    fine = ahead & behind
    return frozenset(n for b in blocks if b.name not in fine for n in range(b.first, b.last + 1))


# ---------------------------------------------------------------------------------------------
# LLVM IR


def ll_functions(text: str) -> list[FunctionLoops]:
    """Each function defined in LLVM IR text with its loops."""
    lines = text.splitlines()
    out = []
    n = 0
    while n < len(lines):
        d = _LL_DEFINE.match(lines[n])
        if not d:
            n += 1
            continue
        begin, blocks, why = n, [], ""
        current: Block | None = None
        in_switch = False
        n += 1
        while n < len(lines) and not lines[n].startswith("}"):
            line = lines[n]
            m = _LL_LABEL.match(line)
            if m:
                current = Block(m.group(1), n + 1, n + 1)
                blocks.append(current)
            elif line.strip() and not line.lstrip().startswith(";"):
                if current is None:  # an entry block without a label
                    current = Block(f"@{n + 1}", n + 1, n + 1)
                    blocks.append(current)
                current.last = n + 1
                if in_switch or _LL_TERMINATOR.match(line):
                    current.succ.extend(_LL_TARGETS.findall(line))
                    in_switch = line.strip().startswith("switch") or (in_switch and "]" not in line)
                    if re.match(r"^\s*(indirectbr|callbr)\b", line):
                        why = why or f"an indirect branch (line {n + 1})"
            n += 1
        out.append(_with_loops(d.group(1), begin + 1, n + 1, blocks, why))
    return out


# ---------------------------------------------------------------------------------------------
# natural loops


def _dominators(blocks: list[Block]) -> dict[str, set[str]]:
    succ = {b.name: b.succ for b in blocks}
    root = blocks[0].name
    order, seen, stack = [], {root}, [root]
    while stack:
        n = stack.pop()
        order.append(n)
        for s in succ.get(n, ()):
            if s not in seen and s in succ:
                seen.add(s)
                stack.append(s)
    preds: dict[str, list[str]] = {n: [] for n in order}
    for n in order:
        for s in succ[n]:
            if s in preds:
                preds[s].append(n)
    dom = {n: set(order) for n in order}
    dom[root] = {root}
    changed = True
    while changed:
        changed = False
        for n in order[1:]:
            ps = [dom[p] for p in preds[n]]
            new = set.intersection(*ps) | {n} if ps else {n}
            if new != dom[n]:
                dom[n], changed = new, True
    return dom


def _retreating(blocks: list[Block], reach: set[str]) -> list[tuple[str, str]]:
    """Edges that close a cycle in a depth-first walk from the entry."""
    succ = {b.name: [s for s in b.succ if s in reach] for b in blocks}
    out, state = [], {}
    stack = [(blocks[0].name, iter(succ[blocks[0].name]))]
    state[blocks[0].name] = 1
    while stack:
        n, it = stack[-1]
        s = next(it, None)
        if s is None:
            state[n] = 2
            stack.pop()
        elif state.get(s) == 1:
            out.append((n, s))
        elif s not in state:
            state[s] = 1
            stack.append((s, iter(succ[s])))
    return out


def _with_loops(name: str, first: int, last: int, blocks: list[Block], why: str) -> FunctionLoops:
    succ = {b.name: list(b.succ) for b in blocks}
    if not blocks:
        return FunctionLoops(name, first, last, [], not why, why)
    dom = _dominators(blocks)
    preds: dict[str, set[str]] = {}
    for b in blocks:
        for s in b.succ:
            preds.setdefault(s, set()).add(b.name)
    bodies: dict[str, set[str]] = {}
    for src, head in _retreating(blocks, set(dom)):
        if head not in dom[src]:
            why = why or f"a cycle with two ways in (at {head})"
            continue
        body, todo = {head}, [src]
        while todo:
            n = todo.pop()
            if n not in body:
                body.add(n)
                todo.extend(p for p in preds.get(n, ()) if p in dom)
        bodies.setdefault(head, set()).update(body)
    spans = {b.name: (b.first, b.last) for b in blocks}
    lines_of = {h: tuple(sorted({ln for blk in body for ln in range(spans[blk][0], spans[blk][1] + 1)}))
                for h, body in bodies.items()}
    # outer before inner; siblings in the order their code comes
    heads = sorted(bodies, key=lambda h: (-len(bodies[h]), lines_of[h][0]))
    parent: dict[str, str | None] = {}
    for h in heads:
        around = [o for o in heads if o != h and bodies[h] < bodies[o]]
        parent[h] = min(around, key=lambda o: len(bodies[o])) if around else None
    depth = {}
    for h in heads:
        d, p = 0, parent[h]
        while p is not None:
            d, p = d + 1, parent[p]
        depth[h] = d

    ordered: list[str] = []

    def visit(p: str | None) -> None:
        for h in sorted((h for h in heads if parent[h] == p), key=lambda h: lines_of[h][0]):
            ordered.append(h)
            visit(h)

    visit(None)
    index = {h: i for i, h in enumerate(ordered)}
    loops = [Loop(h, frozenset(bodies[h]), lines_of[h],
                  index[parent[h]] if parent[h] is not None else None, depth[h]) for h in ordered]
    return FunctionLoops(name, first, last, loops, not why, why, succ)


def shape(f: FunctionLoops, parent: int | None = None) -> tuple:
    """The nesting of a function's loops as nested tuples, for comparing two codes' loops."""
    return tuple(shape(f, i) for i in f.children(parent))
