"""Find chains of ops in the Relax graph with a small pattern text, compiled to ``tvm.relax.dpl``.

    conv2d -> batch_norm -> relu
    matmul(dtype=float32) -> * -> softmax
    conv2d(shape=[1,64,56,56]) -> add -> relu

A name is a Relax op (``conv2d`` finds ``relax.nn.conv2d``; full names work too) or a function of
the step: ``R.call_tir`` of a PrimFunc called NAME or NAME1, NAME2, ... (what LegalizeOps names
its kernels), or a call of a Relax function of that name (``fused_conv2d_add_relu`` after
FuseOps). ``*`` is any call. ``A -> B`` means A's result is one of B's arguments (or an element
of B's tuple of arguments for ``call_tir``); a tuple element taken from A counts as A's result, so
``conv2d -> batch_norm -> relu`` sees through the ``[0]`` the importer puts after batch_norm.
Constraints in parentheses apply to the op's own result: ``dtype=`` and ``shape=`` (exact sizes).

A match is anchored at the binding of the last op; its bindings are listed first op first. Every
Relax function of the step is searched (main, and fused functions until FuseTIR turns them
into TensorIR); a binding outside main is named ``function:var``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import tvm
from tvm import relax
from tvm.relax import dpl

from irviz.core.errors import RequestError
from irviz.core.tvm_compat import var_name

__all__ = ["QueryError", "Node", "parse", "compile_pattern", "find_matches", "query_steps"]

# an argument fed by the previous op may sit at any of these positions (binary ops, conv with bias)
_MAX_ARG_POSITION = 3
_OP_PREFIXES = ("", "relax.", "relax.nn.", "relax.image.", "relax.memory.", "relax.builtin.")
_CONSTRAINTS = ("dtype", "shape")


class QueryError(RequestError):
    """A pattern text that does not parse; `column` is 1-based, `caret` points at it."""

    stage = "query"

    def __init__(self, message: str, pattern: str, column: int, hint: str | None = None):
        caret = f"{pattern}\n{' ' * (column - 1)}^"
        super().__init__(f"{message} at column {column}\n{caret}",
                         hint or "a pattern is op names joined by '->', '*' for any op, constraints "
                                 "in parentheses: matmul(dtype=float32) -> * -> softmax")
        self.column = column
        self.caret = caret


@dataclass
class Node:
    name: str  # an op or function name, or "*"
    column: int  # 1-based, for errors about this node
    constraints: dict = field(default_factory=dict)  # dtype: str, shape: tuple[int, ...]


# ---------------------------------------------------------------------------------------------
# parsing

_TOKEN = re.compile(r"\s*(?:(?P<arrow>->)|(?P<name>[A-Za-z_][\w.]*)|(?P<int>-?\d+)|(?P<punct>[*()=,\[\]x])|(?P<bad>\S))")


def _tokens(text: str) -> list[tuple[str, str, int]]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:  # only trailing spaces are left
            break
        kind = m.lastgroup
        col = m.start(kind) + 1
        if kind == "bad":
            raise QueryError(f"unexpected character {m.group(kind)!r}", text, col)
        out.append((kind, m.group(kind), col))
        pos = m.end()
    out.append(("end", "", len(text) + 1))
    return out


def parse(text: str) -> list[Node]:
    """The chain of nodes of a pattern text; QueryError with the column where it went wrong."""
    if not isinstance(text, str) or not text.strip():
        raise QueryError("the pattern is empty", text or "", 1)
    toks = _tokens(text)
    i = 0

    def peek():
        return toks[i]

    def take(kind=None, value=None, what=""):
        nonlocal i
        k, v, col = toks[i]
        if (kind and k != kind) or (value is not None and v != value):
            found = "the end of the pattern" if k == "end" else repr(v)
            raise QueryError(f"expected {what}, found {found}", text, col)
        i += 1
        return k, v, col

    def shape_value():
        k, v, col = peek()
        close = {"[": "]", "(": ")"}.get(v) if k == "punct" else None
        dims = []
        if close:
            take()
            while True:
                dims.append(int(take("int", what="a size (an integer)")[1]))
                if peek()[1] == ",":
                    take()
                    continue
                take("punct", close, what=f"',' or '{close}'")
                return tuple(dims)
        # 1x64x56x56: the tokenizer reads "x56" as a name, so split it here
        dims.append(int(take("int", what="a shape like [1,64,56,56]")[1]))
        while peek()[0] == "name" and re.fullmatch(r"x\d+(?:x\d+)*", peek()[1]):
            dims.extend(int(d) for d in take()[1][1:].split("x"))
        return tuple(dims)

    def node() -> Node:
        k, v, col = peek()
        if k == "punct" and v == "*":
            take()
            n = Node("*", col)
        elif k == "name":
            take()
            n = Node(v, col)
        else:
            found = "the end of the pattern" if k == "end" else repr(v)
            raise QueryError(f"expected an op name or '*', found {found}", text, col)
        if peek()[1] == "(":
            take()
            while True:
                _, key, kcol = take("name", what="a constraint (dtype=... or shape=...)")
                if key not in _CONSTRAINTS:
                    raise QueryError(f"unknown constraint {key!r} (known: {', '.join(_CONSTRAINTS)})",
                                     text, kcol)
                take("punct", "=", what="'='")
                if key == "dtype":
                    n.constraints["dtype"] = take("name", what="a dtype such as float32")[1]
                else:
                    n.constraints["shape"] = shape_value()
                if peek()[1] == ",":
                    take()
                    continue
                take("punct", ")", what="',' or ')'")
                break
        return n

    chain = [node()]
    while peek()[0] == "arrow":
        take()
        chain.append(node())
    k, v, col = peek()
    if k != "end":
        raise QueryError(f"expected '->' or the end of the pattern, found {v!r}", text, col)
    return chain


# ---------------------------------------------------------------------------------------------
# compiling to relax.dpl


def resolve_op(name: str) -> str | None:
    """The registered Relax op a short name stands for (conv2d -> relax.nn.conv2d), or None."""
    for prefix in _OP_PREFIXES:
        full = prefix + name
        if not full.startswith("relax."):
            continue
        try:
            tvm.ir.Op.get(full)
        except Exception:  # TVM raises for an unregistered op
            continue
        return full
    return None


def _functions_named(mod, name: str) -> list[tuple[str, bool]]:
    """(global name, is a PrimFunc) of the module's functions called `name` or `name` + digits."""
    rx = re.compile(re.escape(name) + r"\d*")
    return [(gv.name_hint, isinstance(f, tvm.tirx.PrimFunc))
            for gv, f in mod.functions.items() if rx.fullmatch(gv.name_hint)]


def _any_of(patterns):
    out = patterns[0]
    for p in patterns[1:]:
        out = out | p
    return out


def _wild(n: int) -> list:
    # one pattern object per position: dpl binds a pattern object to one expression, so a
    # repeated wildcard would demand the same argument in every place it appears
    return [dpl.wildcard() for _ in range(n)]


def _fed_call(callee, feed):
    """A call of `callee` (a pattern) with `feed` as one of its first arguments (any when None)."""
    if feed is None:
        return dpl.CallPattern(callee, [], varg_default_wildcard=True)
    return _any_of([dpl.CallPattern(callee, _wild(i) + [feed], varg_default_wildcard=True)
                    for i in range(_MAX_ARG_POSITION)])


def _call_tir_arities(mod) -> list[int]:
    """How many arguments the module's R.call_tir calls pass (a TuplePattern has a fixed length)."""
    call_tir = tvm.ir.Op.get("relax.call_tir")
    seen = set()

    def visit(e):
        if isinstance(e, relax.Call) and e.op.same_as(call_tir) and isinstance(e.args[1], relax.Tuple):
            seen.add(len(e.args[1].fields))

    for func in mod.functions.values():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func.body, visit)
    return sorted(seen - {0})


def _fed_call_tir(callee, feed, arities):
    """R.call_tir(callee, (..., feed, ...)) for each argument count the module uses."""
    call_tir = dpl.ExprPattern(tvm.ir.Op.get("relax.call_tir"))
    if feed is None:
        args = dpl.wildcard()
    else:
        if not arities:
            return None
        args = _any_of([dpl.TuplePattern(_wild(i) + [feed] + _wild(n - i - 1))
                        for n in arities for i in range(n)])
    return dpl.CallPattern(call_tir, [callee, args], varg_default_wildcard=True)


def compile_pattern(chain: list[Node], mod, text: str = "") -> tuple[object, list[object]]:
    """(the whole pattern, the pattern of each node) for the functions of `mod`. A name that is
    neither a Relax op nor a function of `mod` matches nothing here (None for the whole)."""
    prev = None
    nodes = []
    arities = _call_tir_arities(mod)
    for n in chain:
        # a tuple element of the previous result (batch_norm(...)[0]) feeds as the result itself
        feed = None if prev is None else prev | dpl.is_tuple_get_item(prev)
        alts = []
        if n.name == "*":
            alts += [_fed_call(dpl.wildcard(), feed), _fed_call_tir(dpl.wildcard(), feed, arities)]
        else:
            op = resolve_op(n.name)
            if op is not None:
                alts.append(_fed_call(dpl.ExprPattern(tvm.ir.Op.get(op)), feed))
            for gname, is_prim in _functions_named(mod, n.name):
                gv = dpl.GlobalVarPattern(gname)
                alts.append(_fed_call_tir(gv, feed, arities) if is_prim else _fed_call(gv, feed))
        alts = [a for a in alts if a is not None]
        if not alts:
            return None, []
        p = _any_of(alts)
        if "dtype" in n.constraints:
            p = p.has_dtype(n.constraints["dtype"])
        if "shape" in n.constraints:
            p = p.has_shape(list(n.constraints["shape"]))
        nodes.append(p)
        prev = p
    return prev, nodes


def check_names(chain: list[Node], text: str, modules) -> None:
    """Raise QueryError for a name that is no Relax op and no function of any of `modules`."""
    for n in chain:
        if n.name == "*" or resolve_op(n.name) is not None:
            continue
        if any(_functions_named(m, n.name) for m in modules):
            continue
        raise QueryError(f"{n.name!r} is not a Relax op nor a function of any step", text, n.column,
                         "use an op name (conv2d, matmul, add, relu, softmax, batch_norm, ...), '*', "
                         "or the name of a function the steps call")


# ---------------------------------------------------------------------------------------------
# matching


def _bindings(func):
    for block in func.body.blocks:
        for b in block.bindings:
            if isinstance(b, relax.VarBinding):
                yield b


def find_matches(mod, chain: list[Node], text: str = "") -> list[list[str]]:
    """The matches in every Relax function of `mod`: per match, the binding names of its nodes
    in chain order (first op first); main's bindings by var name, others as function:var."""
    whole, nodes = compile_pattern(chain, mod, text)
    if whole is None:
        return []
    out = []
    for gv, func in mod.functions.items():
        if not isinstance(func, relax.Function) or not isinstance(func.body, relax.SeqExpr):
            continue
        prefix = "" if gv.name_hint == "main" else gv.name_hint + ":"
        var2val = relax.analysis.get_var2val(func)
        bound = list(_bindings(func))
        name_of = {}
        for b in bound:
            name_of.setdefault(b.value, prefix + var_name(b.var))
        for b in bound:
            # `gv = lv6` would match again what lv6 matched: dpl looks through the var
            if isinstance(b.value, relax.Var) or not whole.match(b.value, var2val):
                continue
            found = whole.extract_matched_expr(b.value, var2val) or {}
            names = []
            for p in nodes:
                e = found.get(p)
                names.append(name_of.get(e, "?") if e is not None else "?")
            out.append(names)
    return out


def query_steps(steps, text: str) -> dict:
    """The pattern counted at every step: {"pattern", "steps": [{"index", "pass", "matches",
    "bindings"}]}. `steps`: the session's Step objects (index, pass_name, mod)."""
    chain = parse(text)
    steps = list(steps)
    check_names(chain, text, [st.mod for st in steps])
    rows = []
    for st in steps:
        found = find_matches(st.mod, chain, text)
        rows.append({"index": st.index, "pass": st.pass_name, "matches": len(found), "bindings": found})
    return {"pattern": text, "steps": rows}
