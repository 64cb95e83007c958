"""Which FX convolution each of Inductor's library convolution calls computes, read from the
wrapper's data flow and shapes rather than from its provenance.

With freezing, Inductor's pattern rewrites name their replacement nodes ``fn``, ``fn_1``, ... and
its provenance can give one of those names to two mkldnn calls, or to the wrong one (on ResNet-18 a
downsampling 1x1 convolution was given the 3x3 convolution beside it, 9x the work, so its time read
as 8x the CPU's peak). The wrapper itself cannot be wrong about what it runs, so a call is paired
with the FX convolution that
  * has the call's weight shape (the frozen constant's shape, from the wrapper's header, or the
    argument's asserted shape), its input's shape, and an output shape that its stride, padding,
    dilation and groups give;
  * is followed in the FX graph by the ops the call fuses (a folded batch norm, the binary op,
    the unary op), as the call's attributes name them;
  * reads what the call reads: the call's input (and a binary call's other operand) were written
    by earlier calls, whose convolutions are already paired (the wrapper runs in a topological
    order); the FX convolution's input must come from the same convolutions (or the graph input).
Where several convolutions still fit (identical branches of one input), the first unpaired in FX
order is taken and the note says so. A call no convolution fits is left to the provenance.

    paired = pair_conv_calls(output_code, calls, graph)   # {call index: Pairing}
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from irviz.core.peer.output_code import KernelCall, call_body
from irviz.core.peer.provenance_fix import written_buffers

__all__ = ["CONV_TARGETS", "Pairing", "pair_conv_calls"]

CONV_TARGETS = ("aten.convolution.default", "aten._convolution.default", "aten.conv2d.default",
                "aten.conv1d.default", "aten.conv3d.default")
_NORMS = ("aten._native_batch_norm_legit_no_training.default", "aten.batch_norm.default",
          "aten._native_batch_norm_legit.no_stats", "aten.native_batch_norm.default")
_BINARY = {"add": ("aten.add.Tensor",), "sum": ("aten.add.Tensor",), "sub": ("aten.sub.Tensor",),
           "mul": ("aten.mul.Tensor",)}
_UNARY = {"relu": ("aten.relu.default",), "gelu": ("aten.gelu.default",),
          "hardtanh": ("aten.hardtanh.default", "aten.clamp.default"), "swish": ("aten.silu.default",),
          "silu": ("aten.silu.default",), "sigmoid": ("aten.sigmoid.default",), "tanh": ("aten.tanh.default",),
          "hardswish": ("aten.hardswish.default",), "hardsigmoid": ("aten.hardsigmoid.default",),
          "leaky_relu": ("aten.leaky_relu.default",)}
_INPUT = "<input>"  # a graph input, on both sides
_CONST_SHAPE = re.compile(r"^(\w+) = None\s+# device\([^)]*\) torch\.\w+ \(([\d, ]*)\)", re.M)
_ASSERT = re.compile(r"^assert_size_stride\((\w+), \(([\d, ]*)\)")
_EMPTY = re.compile(r"^(buf\d+) = empty_strided\w*\(\(([\d, ]*)\)")
_ALIAS = re.compile(r"^(buf\d+) = (buf\d+|arg\d+_\d+)\s*(;.*)?$")
_ARGS = re.compile(r"^([\w, ]+)= args\s*$")
_NAME = re.compile(r"^(buf\d+|arg\d+_\d+)$")


@dataclass
class Pairing:
    conv: str                 # the FX convolution
    fx_nodes: list[str]       # it and the ops the call fuses after it, in FX order
    note: str                 # how it was found


@dataclass
class _Conv:
    """A library convolution call's operands, as the wrapper passes them."""
    x: str | None
    other: str | None
    weight: str | None
    stride: list
    padding: list
    dilation: list
    groups: int
    binary: str | None
    unary: str | None
    writes: str | None
    folds: bool = True        # freezing folded the batch norm and bias after it into the call


def _shape(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.replace(" ", "").split(",") if x)


def _operand(node) -> str | None:
    """A buffer or input named by an argument (through reinterpret_tensor and the like)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call) and node.args:
        return _operand(node.args[0])
    return None


def _lit(node, default=None):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        return default


def _conv_call(call: KernelCall) -> _Conv | None:
    """The operands of a library convolution call; None for any other call (or a transposed one)."""
    try:
        tree = ast.parse(call.line.strip())
    except SyntaxError:
        return None
    stmt = tree.body[0] if tree.body else None
    value = stmt.value if isinstance(stmt, (ast.Assign, ast.Expr)) else None
    if not isinstance(value, ast.Call):
        return None
    result = stmt.targets[0].id if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name) else None
    a, kw = value.args, {k.arg: k.value for k in value.keywords}
    name = call.kernel
    if name.endswith("_convolution_pointwise.default") and len(a) >= 8:
        return _Conv(_operand(a[0]), None, _operand(a[1]), _lit(a[4], []), _lit(a[3], []), _lit(a[5], []),
                     _lit(a[6], 1), None, _lit(a[7]), result)
    if (name.endswith("_convolution_pointwise.binary") or name.endswith("_convolution_pointwise_.binary")) \
            and len(a) >= 11:
        inplace = name.endswith("_.binary")
        x, other = (a[1], a[0]) if inplace else (a[0], a[1])
        return _Conv(_operand(x), _operand(other), _operand(a[2]), _lit(a[5], []), _lit(a[4], []), _lit(a[6], []),
                     _lit(a[7], 1), _lit(a[8]), _lit(a[10]), _operand(a[0]) if inplace else result)
    if name in ("extern_kernels.convolution", "aten.convolution") and len(a) >= 2:
        if _lit(kw.get("transposed"), False):
            return None
        return _Conv(_operand(a[0]), None, _operand(a[1]), list(_lit(kw.get("stride"), []) or []),
                     list(_lit(kw.get("padding"), []) or []), list(_lit(kw.get("dilation"), []) or []),
                     _lit(kw.get("groups"), 1) or 1, None, None, result, folds=False)
    return None


class _Fx:
    """The FX side: convolutions, what feeds them, and the ops a call fuses after one."""

    def __init__(self, graph):
        self.by = {n.name: n for n in graph.nodes}
        self.order = {n.name: i for i, n in enumerate(graph.nodes)}
        self.convs = [n.name for n in graph.nodes if n.op == "call_function" and n.target in CONV_TARGETS]
        self.runtime: set[str] = set()
        for n in graph.nodes:  # FX order is topological
            if n.kind == "input" or any(a in self.runtime for a in n.args):
                self.runtime.add(n.name)
        self.made_by: dict[str, str] = {}  # FX node -> the paired convolution whose call computes it

    def shape(self, name: str | None):
        n = self.by.get(name or "")
        return tuple(n.shapes[0]) if n is not None and n.shapes and n.shapes[0] is not None else None

    def sources(self, name: str) -> frozenset:
        """The convolutions (or the graph input) a value comes from, through the ops between."""
        out: set[str] = set()
        stack, seen = [name], set()
        while stack:
            v = stack.pop()
            if v in seen or v not in self.by:
                continue
            seen.add(v)
            n = self.by[v]
            if v in self.made_by:
                out.add(self.made_by[v])
            elif n.target in CONV_TARGETS:
                out.add(v)
            elif n.kind == "input":
                out.add(_INPUT)
            elif v in self.runtime:
                stack.extend(n.args)
        return frozenset(out)

    def _only_user(self, name: str):
        users = [u for u in self.by[name].users if u in self.by and self.by[u].op != "output"]
        return self.by[users[0]] if len(users) == 1 and len(self.by[name].users) == 1 else None

    def chain(self, conv: str, binary: str | None, unary: str | None, folds: bool = True
              ) -> tuple[list[str], str | None] | None:
        """(the FX nodes the call computes from `conv` on, the binary op's other operand), or None
        where the FX graph does not go on as the call's attributes say."""
        nodes, cur = [conv], conv
        while folds and (u := self._only_user(cur)) is not None:
            weights_only = [a for a in u.args if a != cur and a in self.runtime] == []
            if u.target in _NORMS or (u.target == "getitem" and self.by[cur].target in _NORMS) \
                    or (u.target in ("aten.add.Tensor", "aten.mul.Tensor") and weights_only and len(u.args) > 1):
                nodes.append(u.name)
                cur = u.name
                continue
            break
        other = None
        if binary:
            u = self._only_user(cur) if len(self.by[cur].users) == 1 else None
            rest = [a for a in (u.args if u is not None else ()) if a != cur]
            if u is None or u.target not in _BINARY.get(binary, ()) or len(rest) != 1:
                return None
            nodes.append(u.name)
            cur, other = u.name, rest[0]
        if unary and unary != "none":
            u = self._only_user(cur)
            if u is not None and u.target in _UNARY.get(unary, (u.target,)):
                nodes.append(u.name)
            elif unary in _UNARY:
                return None
        return nodes, other


def _agree(call_side: frozenset | None, fx_side: frozenset) -> bool | None:
    """True where both come from the same convolutions (or both from the graph input alone);
    None where the call side is not known."""
    if call_side is None:
        return None
    a, b = call_side - {_INPUT}, fx_side - {_INPUT}
    return a == b and (bool(a) or (_INPUT in call_side) == (_INPUT in fx_side))


def pair_conv_calls(output_code: str, calls: list[KernelCall], graph, sources: dict[str, str] | None = None
                    ) -> dict[int, Pairing]:
    """{index in `calls`: its FX convolution} for each library convolution call that one fits."""
    fx = _Fx(graph)
    if not fx.convs:
        return {}
    shapes = {m.group(1): _shape(m.group(2)) for m in _CONST_SHAPE.finditer(output_code)}
    store: dict[str, str] = {}                  # name -> the storage it holds
    value: dict[str, frozenset | None] = {}     # storage -> where its value comes from
    inputs: set[str] = set()
    out: dict[int, Pairing] = {}
    k = 0

    def st(name):
        return store.get(name, name)

    def val(name: str | None):
        if name is None:
            return None
        if name in inputs and st(name) == name and name not in value:
            return frozenset({_INPUT})
        return value.get(st(name), frozenset())

    for line in call_body(output_code):
        s = line.strip()
        if k < len(calls) and s == calls[k].line:
            c = calls[k]
            conv = None if c.generated else _conv_call(c)
            if conv is not None:
                p = _pair(fx, conv, shapes, val, shapes.get(st(conv.x or "")) or shapes.get(conv.x or ""))
                if p is not None:
                    out[k] = p
                    fx.made_by.update({n: p.conv for n in p.fx_nodes})
                if conv.writes:
                    store[conv.writes] = st(conv.writes)
                    value[st(conv.writes)] = frozenset({p.conv}) if p else None
            else:
                reads = [r for r in re.findall(r"\b(buf\d+|arg\d+_\d+)\b", s[s.find("(") + 1:])]
                got = [val(r) for r in reads]
                merged = None if any(v is None for v in got) else frozenset().union(*got)
                if c.generated:
                    targets = written_buffers(c, (sources or {}).get(c.kernel, ""))
                else:
                    m = re.match(r"(buf\d+)\s*=", s)
                    targets = {m.group(1)} if m else set()
                    merged = None  # a library call other than a convolution: not followed
                for t in targets:
                    value[st(t)] = merged
            k += 1
            continue
        if m := _ARGS.match(s):
            inputs.update(x.strip() for x in m.group(1).split(",") if x.strip())
        elif m := _EMPTY.match(s):
            store[m.group(1)] = m.group(1)
            shapes[m.group(1)] = _shape(m.group(2))
            value[m.group(1)] = frozenset()
        elif m := _ALIAS.match(s):
            store[m.group(1)] = st(m.group(2))
            if m.group(2) in shapes:
                shapes[m.group(1)] = shapes[m.group(2)]
        elif m := _ASSERT.match(s):
            shapes[m.group(1)] = _shape(m.group(2))
    return out


def _fits(fx: _Fx, name: str, conv: _Conv, shapes: dict, x_shape) -> bool:
    n = fx.by[name]
    w, xin, y = fx.shape(n.args[1] if len(n.args) > 1 else None), fx.shape(n.args[0] if n.args else None), fx.shape(name)
    cw = shapes.get(conv.weight or "")
    if cw is not None and w is not None and tuple(cw) != w:
        return False
    if x_shape is not None and xin is not None and tuple(x_shape) != xin:
        return False
    if w is None or xin is None or y is None or len(xin) != len(w) or len(y) != len(w):
        return cw is not None and w is not None
    dims = len(w) - 2
    stride, pad, dil = (list(v) * dims if len(v) == 1 else list(v) for v in (conv.stride or [1], conv.padding or [0],
                                                                               conv.dilation or [1]))
    if len(stride) != dims or len(pad) != dims or len(dil) != dims or y[1] != w[0]:
        return False
    if w[1] * int(conv.groups or 1) != xin[1]:
        return False
    return all(y[2 + i] == (xin[2 + i] + 2 * pad[i] - dil[i] * (w[2 + i] - 1) - 1) // stride[i] + 1
               for i in range(dims))


def _pair(fx: _Fx, conv: _Conv, shapes: dict, val, x_shape) -> Pairing | None:
    ranked = []
    for name in fx.convs:
        if name in fx.made_by or not _fits(fx, name, conv, shapes, x_shape):
            continue
        chain = fx.chain(name, conv.binary, conv.unary, conv.folds)
        if chain is None:
            continue
        nodes, other = chain
        n = fx.by[name]
        checks = [_agree(val(conv.x), fx.sources(n.args[0]))] if n.args else []
        if conv.binary and other is not None:
            checks.append(_agree(val(conv.other), fx.sources(other)))
        if False in checks:
            continue
        ranked.append((0 if checks and all(checks) else 1, fx.order[name], name, nodes))
    if not ranked:
        return None
    ranked.sort()
    best = [r for r in ranked if r[0] == ranked[0][0]]
    _, _, name, nodes = best[0]
    w = shapes.get(conv.weight or "")
    how = (f"paired by the wrapper's data flow and shapes with {name} (weight {conv.weight}"
           f"{' ' + str(tuple(w)) if w else ''}, stride {conv.stride}"
           f"{'' if best[0][0] == 0 else ', its input not followed'})")
    if len(best) > 1:
        how += f"; {len(best)} convolutions fit as well, the first unpaired in FX order taken"
    return Pairing(name, sorted(nodes, key=fx.order.get), how)
