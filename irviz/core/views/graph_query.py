"""Find chains of calls in the Relax graph with a small pattern text, compiled to ``tvm.relax.dpl``.

    conv2d -> batch_norm -> relu
    matmul(dtype=float32) -> * -> softmax
    conv2d(shape=[1,64,56,56]) -> add -> relu
    linear0 -> env.relu
    fused_* -> fused_*

A name is what a binding calls (see query_names): a Relax op (``conv2d`` finds ``relax.nn.conv2d``;
full names work too), a function of the step (a PrimFunc called NAME or NAME1, NAME2, ..., what
LegalizeOps names its kernels; a Relax function such as ``fused_conv2d_add_relu`` after FuseOps),
or an extern function (``env.relu``). Functions are found however they are called: directly,
through ``R.call_tir``, ``R.call_dps_packed`` or ``R.call_pure_packed``. A name may be a glob
(``fused_*``). ``*`` is any call, these included. ``A -> B`` means A's result is one of B's
arguments (or an element of the tuple of arguments of ``call_tir`` / ``call_dps_packed``); a tuple
element taken from A counts as A's result, so ``conv2d -> batch_norm -> relu`` sees through the
``[0]`` the importer puts after batch_norm. Constraints in parentheses apply to the call's own
result: ``dtype=`` and ``shape=`` (exact sizes).

A match is anchored at the binding of the last element; its bindings are listed first element
first. Every Relax function of the step is searched (main, and fused functions until FuseTIR turns
them into TensorIR); a binding outside main is named ``function:var``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import tvm
from tvm import relax
from tvm.relax import dpl

from irviz.core.errors import RequestError
from irviz.core.tvm_compat import var_name
from irviz.core.views.provenance import binding_ids
from irviz.core.views.query_names import ModuleNames, names_in, targets, unknown_name_text

__all__ = ["QueryError", "Node", "parse", "compile_pattern", "find_matches", "query_steps"]

# calls whose first argument is the callee and whose second is the tuple of its arguments
_DPS_OPS = ("relax.call_tir", "relax.call_tir_inplace", "relax.call_dps_packed")
_CONSTRAINTS = ("dtype", "shape")


class QueryError(RequestError):
    """A pattern text that does not parse; `column` is 1-based, `caret` points at it."""

    stage = "query"

    def __init__(self, message: str, pattern: str, column: int, hint: str | None = None):
        caret = f"{pattern}\n{' ' * (column - 1)}^"
        super().__init__(f"{message} at column {column}\n{caret}",
                         hint or "a pattern is op or function names joined by '->', '*' for any "
                                 "call, constraints in parentheses: matmul(dtype=float32) -> * -> softmax, "
                                 "linear0 -> env.relu")
        self.column = column
        self.caret = caret


@dataclass
class Node:
    name: str  # an op, function or extern name, maybe a glob (fused_*), or "*"
    column: int  # 1-based, for errors about this node
    constraints: dict = field(default_factory=dict)  # dtype: str, shape: tuple[int, ...]


# ---------------------------------------------------------------------------------------------
# parsing

_TOKEN = re.compile(r"\s*(?:(?P<arrow>->)|(?P<name>[A-Za-z_*?][\w.*?]*)|(?P<int>-?\d+)|(?P<punct>[()=,\[\]x])|(?P<bad>\S))")


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
        if k == "name":
            take()
            n = Node("*" if set(v) == {"*"} else v, col)
        else:
            found = "the end of the pattern" if k == "end" else repr(v)
            raise QueryError(f"expected an op or function name or '*', found {found}", text, col)
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


def _any_of(patterns):
    out = patterns[0]
    for p in patterns[1:]:
        out = out | p
    return out


def _wild(n: int) -> list:
    # one pattern object per position: dpl binds a pattern object to one expression, so a
    # repeated wildcard would demand the same argument in every place it appears
    return [dpl.wildcard() for _ in range(n)]


@dataclass
class _Arities:
    """How many arguments the module's calls pass: a CallPattern names each position it checks,
    a TuplePattern has a fixed length."""

    call: int  # the most arguments of any call
    dps: list  # the lengths of the argument tuples of call_tir / call_dps_packed


def _arities(mod) -> _Arities:
    dps_ops = [tvm.ir.Op.get(op) for op in _DPS_OPS]
    most, tuples = 1, set()

    def visit(e):
        nonlocal most
        if not isinstance(e, relax.Call):
            return
        most = max(most, len(e.args))
        if any(e.op.same_as(op) for op in dps_ops) and len(e.args) > 1 and isinstance(e.args[1], relax.Tuple):
            tuples.add(len(e.args[1].fields))

    for func in mod.functions.values():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func.body, visit)
    return _Arities(most, sorted(tuples - {0}))


def _fed_call(op, feed, arities: _Arities, first: tuple = ()):
    """A call of `op` (a pattern) whose leading arguments match `first` and with `feed` as one of
    the arguments after them (any arguments when `feed` is None)."""
    first = list(first)
    if feed is None:
        return dpl.CallPattern(op, first, varg_default_wildcard=True)
    if arities.call <= len(first):
        return None
    return _any_of([dpl.CallPattern(op, first + _wild(i) + [feed], varg_default_wildcard=True)
                    for i in range(arities.call - len(first))])


def _dps_call(callee, feed, arities: _Arities):
    """R.call_tir / R.call_dps_packed (callee, (..., feed, ...)); None when `feed` can be in none
    of the module's argument tuples."""
    ops = _any_of([dpl.ExprPattern(tvm.ir.Op.get(op)) for op in _DPS_OPS])
    if feed is None:
        args = dpl.wildcard()
    else:
        if not arities.dps:
            return None
        args = _any_of([dpl.TuplePattern(_wild(i) + [feed] + _wild(n - i - 1))
                        for n in arities.dps for i in range(n)])
    return dpl.CallPattern(ops, [callee, args], varg_default_wildcard=True)


def _calls_of(callee, feed, arities: _Arities) -> list:
    """Every way a binding calls `callee`: directly (a Relax function, R.call_packed), through
    call_tir / call_dps_packed, or through call_pure_packed (callee first, then the arguments)."""
    packed = dpl.ExprPattern(tvm.ir.Op.get("relax.call_pure_packed"))
    return [_fed_call(callee, feed, arities), _dps_call(callee, feed, arities),
            _fed_call(packed, feed, arities, first=(callee,))]


def _op_calls(op: str, feed, arities: _Arities) -> list:
    if op in _DPS_OPS:  # `call_dps_packed -> *`: the op itself, its arguments in the tuple
        return [_dps_call(dpl.wildcard(), feed, arities)]
    return [_fed_call(dpl.ExprPattern(tvm.ir.Op.get(op)), feed, arities)]


def compile_pattern(chain: list[Node], mod, text: str = "") -> tuple[object, list[object]]:
    """(the whole pattern, the pattern of each node) for the functions of `mod`. A name that
    stands for nothing in `mod` matches nothing here (None for the whole)."""
    prev = None
    nodes = []
    arities = _arities(mod)
    names = names_in(mod)
    for n in chain:
        # a tuple element of the previous result (batch_norm(...)[0]) feeds as the result itself
        feed = None if prev is None else prev | dpl.is_tuple_get_item(prev)
        alts = []
        if n.name == "*":
            alts += _calls_of(dpl.wildcard(), feed, arities)
        else:
            found = targets(n.name, names)
            for op in found.ops:
                alts += _op_calls(op, feed, arities)
            for gname, _ in found.functions:
                # the GlobalVar itself: a GlobalVarPattern matches every name containing its own
                alts += _calls_of(dpl.ExprPattern(mod.get_global_var(gname)), feed, arities)
            for symbol in found.externs:
                alts += _calls_of(dpl.ExternFuncPattern(symbol), feed, arities)
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
    """Raise QueryError for a name that stands for nothing in any of `modules`, listing the ops,
    functions and extern functions they do have."""
    names = None
    for n in chain:
        if n.name == "*":
            continue
        if names is None:
            names = ModuleNames()
            for m in modules:
                names.update(names_in(m))
        if not targets(n.name, names):
            message, hint = unknown_name_text(n.name, names)
            raise QueryError(message, text, n.column, hint)


# ---------------------------------------------------------------------------------------------
# matching


def _bindings(func):
    for block in func.body.blocks:
        for b in block.bindings:
            if isinstance(b, relax.VarBinding):
                yield b


def find_matches(mod, chain: list[Node], text: str = "") -> list[list[str]]:
    """The matches in every Relax function of `mod`: per match, the binding names of its nodes
    in chain order (first op first); main's bindings by their graph node id (the var's name, or
    name#k for the k-th repeat of a name), others as function:id."""
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
        # the graph's node ids: a pass may give two bindings one name (lv, lv#1)
        ids = binding_ids(func)
        name_of = {}
        for b in bound:
            name_of.setdefault(b.value, prefix + ids.get(b.var.__chandle__(), var_name(b.var)))
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
