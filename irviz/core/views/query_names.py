"""What a name in a query pattern stands for in a module: Relax ops, functions, extern functions.

A pattern element names what a binding calls. That is a Relax op (``conv2d`` for
``relax.nn.conv2d``), a function of the module (a PrimFunc called by ``R.call_tir``, a Relax
function called directly), or an extern function (``R.call_dps_packed("env.relu", ...)``,
``R.call_packed``): the callee is then an ``ExternFunc`` known only by its symbol, which may also
be a PrimFunc of the module (the course's ``call_dps_packed("linear0", ...)``). A name may be a glob
(``fused_*``, ``*relu*``), matched against the names the module has.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

import tvm
from tvm import relax

__all__ = ["OP_PREFIXES", "ModuleNames", "Targets", "names_in", "resolve_op", "targets", "unknown_name_text"]

OP_PREFIXES = ("", "relax.", "relax.nn.", "relax.image.", "relax.memory.", "relax.builtin.")
_SHOWN_PER_KIND = 12


def resolve_op(name: str) -> str | None:
    """The registered Relax op a short name stands for (conv2d -> relax.nn.conv2d), or None."""
    for prefix in OP_PREFIXES:
        full = prefix + name
        if not full.startswith("relax."):
            continue
        try:
            tvm.ir.Op.get(full)
        except Exception:  # TVM raises for an unregistered op
            continue
        return full
    return None


def short_op(full: str) -> str:
    """The shortest name resolve_op takes back to `full` (relax.nn.conv2d -> conv2d)."""
    for prefix in reversed(OP_PREFIXES):
        if prefix and full.startswith(prefix) and resolve_op(full[len(prefix):]) == full:
            return full[len(prefix):]
    return full


def is_glob(name: str) -> bool:
    return "*" in name or "?" in name


@dataclass
class ModuleNames:
    """The names a module's Relax functions can call: ops they call, its functions, extern symbols."""

    ops: set = field(default_factory=set)  # full op names, e.g. relax.nn.relu
    functions: dict = field(default_factory=dict)  # global name -> True for a PrimFunc
    externs: set = field(default_factory=set)  # ExternFunc symbols, e.g. env.relu

    def update(self, other: ModuleNames) -> None:
        self.ops |= other.ops
        self.functions.update(other.functions)
        self.externs |= other.externs


def names_in(mod) -> ModuleNames:
    out = ModuleNames()
    for gv, func in mod.functions.items():
        out.functions[gv.name_hint] = isinstance(func, tvm.tirx.PrimFunc)

    def visit(e):
        if isinstance(e, tvm.ir.Op):
            out.ops.add(e.name)
        elif isinstance(e, relax.ExternFunc):
            out.externs.add(str(e.global_symbol))

    for func in mod.functions.values():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func.body, visit)
    return out


@dataclass
class Targets:
    """What one pattern element stands for in one module."""

    ops: list = field(default_factory=list)  # full op names
    functions: list = field(default_factory=list)  # (global name, is a PrimFunc)
    externs: list = field(default_factory=list)  # extern symbols

    def __bool__(self) -> bool:
        return bool(self.ops or self.functions or self.externs)


def targets(name: str, names: ModuleNames) -> Targets:
    """An exact name: the Relax op it stands for (registered, whether or not the module calls it)
    and the functions and extern symbols called `name` or `name` + digits (LegalizeOps names its
    kernels relu, relu1, ...). A glob: the ops, functions and externs of the module it matches."""
    if is_glob(name):
        return Targets(
            ops=sorted(op for op in names.ops if fnmatchcase(op, name) or fnmatchcase(short_op(op), name)),
            functions=sorted((g, p) for g, p in names.functions.items() if fnmatchcase(g, name)),
            externs=sorted(s for s in names.externs if fnmatchcase(s, name)))
    numbered = re.compile(re.escape(name) + r"\d*")
    op = resolve_op(name)
    return Targets(ops=[op] if op else [],
                   functions=sorted((g, p) for g, p in names.functions.items() if numbered.fullmatch(g)),
                   externs=sorted(s for s in names.externs if numbered.fullmatch(s)))


def _families(names) -> list[str]:
    """Names with LegalizeOps' numbering folded: add, add1, add2, add3 -> add…add3."""
    groups: dict[str, list] = {}
    for n in names:
        base = n.rstrip("0123456789")
        groups.setdefault(base, []).append((int(n[len(base):] or -1), n))
    out = []
    for base in sorted(groups):
        members = [n for _, n in sorted(groups[base])]
        out += [f"{members[0]}…{members[-1]}"] if len(members) > 2 else members
    return out


def _listed(kind: str, names) -> str:
    names = _families(names)
    more = f" (+{len(names) - _SHOWN_PER_KIND} more)" if len(names) > _SHOWN_PER_KIND else ""
    return f"{kind}: {', '.join(names[:_SHOWN_PER_KIND]) or 'none'}{more}"


def unknown_name_text(name: str, names: ModuleNames) -> tuple[str, str]:
    """(message, hint) for a name that stands for nothing in any step: the closest names, and what
    the steps do call, by kind."""
    ops = {short_op(op) for op in names.ops}
    known = sorted(ops | set(names.functions) | names.externs)
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    # the first line is what a narrow query box shows: the name and the likeliest fix first
    message = f"unknown name {name!r}" + (f" (did you mean {' or '.join(map(repr, close))}?)" if close else "")
    what = "matches no Relax op, function or extern function" if is_glob(name) \
        else "is not a Relax op, a function or an extern function"
    hint = (f"{name!r} {what} of any step. The steps have "
            + "; ".join([_listed("ops", ops), _listed("functions", names.functions),
                         _listed("extern functions", names.externs)])
            + ". Any registered op name works too (conv2d, matmul, relu, ...), '*' is any call, "
              "and a name may be a glob (fused_*)")
    return message, hint
