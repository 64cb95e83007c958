"""What StaticPlanBlockMemory decided: storage tokens, the tensors sharing each, their lifetimes.

Read from the ``alloc_storage`` / ``alloc_tensor`` calls of a Relax function, in either form
the build leaves them: ``R.memory.*`` (StaticPlanBlockMemory .. KillAfterLastUse) or ``R.vm.*``
(after LowerRuntimeBuiltin). A step before memory planning is planned first: the remaining
default_build passes up to StaticPlanBlockMemory are applied to a copy (no compile).

Lifetimes are binding indexes of the function (its bindings in order, all blocks): a tensor lives
from its alloc_tensor to the last binding that uses it or a var bound to it (``lv = alloc``);
kill calls are not uses. One returned lives to the end.

    planned_bytes  the storage the plan allocates (sum of alloc_storage sizes)
    tensor_bytes   what the same tensors need without sharing (sum of their sizes)
    peak_bytes     the most tensor bytes alive at one binding: what any plan needs at least
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import tvm
from tvm import relax

from irviz.core.backend.build import DEFAULT_BUILD_PASSES, _make_pass, default_build_progress, lower_until
from irviz.core.errors import BuildError
from irviz.core.frontend.inputs import bind_sizes, symbolic_sizes
from irviz.core.tvm_compat import GenericConst, host_target, structural_hash, var_name

__all__ = ["LENGTHS", "MemoryPlan", "memory_by_length", "memory_plan", "memory_of_step", "plan_module",
           "step_memory_summaries"]

_STORAGE = ("relax.memory.alloc_storage", "relax.vm.alloc_storage")
_TENSOR = ("relax.memory.alloc_tensor", "relax.vm.alloc_tensor")
_UNPLANNED = ("relax.builtin.alloc_tensor",)
_KILLS = ("relax.memory.kill_storage", "relax.memory.kill_tensor", "relax.vm.kill_object")


@dataclass
class Tensor:
    name: str  # the alloc_tensor binding
    aliases: list[str]  # vars bound to it later (lv = alloc): the names a reader of the IR knows
    token: str | None  # its storage token (None: allocated on its own, not planned)
    offset: int
    shape: list[int]
    dtype: str
    bytes: int
    start: int  # binding index of the allocation
    end: int  # binding index of the last use


@dataclass
class Token:
    name: str
    bytes: int
    binding: int
    tensors: list[str] = field(default_factory=list)


@dataclass
class MemoryPlan:
    func: str
    bindings: int  # how many bindings the timeline has
    tokens: list[Token]
    tensors: list[Tensor]

    @property
    def planned_bytes(self) -> int:
        return sum(t.bytes for t in self.tokens)

    @property
    def tensor_bytes(self) -> int:
        return sum(t.bytes for t in self.tensors if t.token is not None)

    @property
    def peak_bytes(self) -> int:
        planned = [t for t in self.tensors if t.token is not None]
        return max((sum(t.bytes for t in planned if t.start <= i <= t.end) for i in range(self.bindings)),
                   default=0)

    def summary(self) -> dict:
        """The figures `irviz check --json` reports."""
        return {"tokens": len(self.tokens), "planned_bytes": self.planned_bytes,
                "tensor_bytes": self.tensor_bytes, "peak_bytes": self.peak_bytes}

    def as_dict(self) -> dict:
        return {"func": self.func, "bindings": self.bindings, **self.summary(),
                "token_list": [asdict(t) for t in self.tokens],
                "tensors": [asdict(t) for t in self.tensors]}


def _op_name(call) -> str | None:
    return call.op.name if isinstance(call, relax.Call) and isinstance(call.op, tvm.ir.Op) else None


def _ints(shape_expr, func: str = "main") -> list[int]:
    values = shape_expr.values if isinstance(shape_expr, relax.ShapeExpr) else shape_expr
    symbolic = [v for v in values if not isinstance(v, (int, tvm.tirx.IntImm))]
    if symbolic:
        # a size known only at run time (n * 4 bytes): there are no bytes to draw
        raise BuildError(
            f"Cannot show the memory plan of {func}: its sizes are symbolic ({symbolic[0]}), "
            "so StaticPlanBlockMemory leaves them to run time and there are no bytes to lay out.",
            "Plan a function whose inputs have fixed shapes, or bind the symbolic sizes first "
            "(relax.transform.BindSymbolicVars in a pass) and plan that step.")
    return [int(v) for v in values]


def _dtype(expr) -> str:
    return str(getattr(expr, "value", expr))


def _nbytes(shape: list[int], dtype: str) -> int:
    n = 1
    for d in shape:
        n *= d
    t = tvm.runtime.DataType(dtype)
    return n * ((t.bits * t.lanes + 7) // 8)


def _used_vars(expr) -> list:
    out = []
    relax.analysis.post_order_visit(expr, lambda e: out.append(e) if isinstance(e, relax.Var) else None)
    return out


def memory_plan(mod, func: str = "main") -> MemoryPlan:
    """The storage tokens and tensors of `func` in a module that has been through memory planning
    (no alloc_storage calls: empty lists)."""
    f = mod[func]
    bindings = [b for block in f.body.blocks for b in block.bindings]
    tokens: dict = {}
    tensors: dict = {}  # var -> Tensor, aliases included
    order: list[Tensor] = []
    taken: set[str] = set()

    def unique(var) -> str:
        # LowerAllocTensor names every new storage "storage"; the printer shows storage_1, ...
        base = name = var_name(var)
        k = 0
        while name in taken:
            k += 1
            name = f"{base}_{k}"
        taken.add(name)
        return name

    for i, b in enumerate(bindings):
        v = b.value if isinstance(b, relax.VarBinding) else None
        name = _op_name(v)
        if name in _STORAGE:
            tokens[b.var] = Token(unique(b.var), _ints(v.args[0], func)[0], i)
        elif name in _TENSOR and v.args[0] in tokens:
            tok = tokens[v.args[0]]
            shape, dtype = _ints(v.args[2], func), _dtype(v.args[3])
            t = Tensor(unique(b.var), [], tok.name, int(getattr(v.args[1], "value", 0)), shape, dtype,
                       _nbytes(shape, dtype), i, i)
            tok.tensors.append(t.name)
            tensors[b.var] = t
            order.append(t)
        elif name in _UNPLANNED:
            shape, dtype = _ints(v.args[0], func), _dtype(v.args[1])
            t = Tensor(unique(b.var), [], None, 0, shape, dtype, _nbytes(shape, dtype), i, i)
            tensors[b.var] = t
            order.append(t)
        elif isinstance(v, relax.Var) and v in tensors:
            tensors[b.var] = tensors[v]
            tensors[v].aliases.append(var_name(b.var))
            tensors[v].end = i
        elif name not in _KILLS:
            for u in _used_vars(b.value):
                if u in tensors:
                    tensors[u].end = i
    for u in _used_vars(f.body.body):  # returned: alive past the last binding
        if u in tensors:
            tensors[u].end = len(bindings) - 1
    return MemoryPlan(func, len(bindings), list(tokens.values()), order)


def weights_of(mod, func: str = "main") -> dict:
    """What `func` holds besides its inputs, from shapes and dtypes alone (no data is read):
    the parameters after its ``num_input`` user inputs (weights kept as inputs, or a model opened
    without weights) and the constants bound into it. {"count", "bytes", "dtypes": {dtype: bytes},
    "symbolic": parameters whose size is known only at run time}."""
    f = mod[func]
    out = {"count": 0, "bytes": 0, "dtypes": {}, "symbolic": 0}

    def add(shape, dtype):
        try:
            n = _nbytes(_ints(shape, func), dtype)
        except BuildError:
            out["symbolic"] += 1
            return
        out["count"] += 1
        out["bytes"] += n
        out["dtypes"][dtype] = out["dtypes"].get(dtype, 0) + n

    num_input = (f.attrs or {}).get("num_input") if f.attrs is not None else None
    if num_input is not None:
        for p in list(f.params)[int(num_input):]:
            ty = p.ty
            if isinstance(ty, relax.TensorType) and ty.shape is not None:
                add(ty.shape, str(ty.dtype))

    def visit(e):
        value = getattr(e, "value", None) if isinstance(e, GenericConst) else None
        if hasattr(value, "shape"):  # each constant node once (the visit does not repeat nodes)
            add(list(value.shape), str(value.dtype))

    relax.analysis.post_order_visit(f.body, visit)
    return out


def _has_plan(mod, func: str) -> bool:
    found = []
    relax.analysis.post_order_visit(mod[func].body,
                                    lambda e: found.append(1) if _op_name(e) in _STORAGE else None)
    return bool(found)


def plan_module(mod):
    """`mod` itself when it has been through StaticPlanBlockMemory, else a copy planned by the
    default_build passes it still lacks up to StaticPlanBlockMemory."""
    if _has_plan(mod, "main"):
        return mod
    return lower_until(mod, "StaticPlanBlockMemory", including=True)


def memory_of_step(mod, func: str = "main", dims: dict | None = None) -> tuple[MemoryPlan, bool]:
    """(the plan of `func`, whether the step had been planned itself or was planned here).
    `dims`: values for symbolic sizes (the example inputs', --dim): a step with symbolic sizes
    that has not been planned yet is planned at those values."""
    sizes = symbolic_sizes(mod, func)
    if sizes and dims and all(d in dims for d in sizes) and not _has_plan(mod, func):
        return memory_plan(plan_module(bind_sizes(mod, dims, func)), func), False
    planned = plan_module(mod)
    return memory_plan(planned, func), planned is mod


# the sequence lengths a symbolic size is shown at
LENGTHS = (128, 512, 2048, 8192)
_PLAN_INDEX = DEFAULT_BUILD_PASSES.index("StaticPlanBlockMemory")


def memory_by_length(mod, dims: dict, func: str = "main", vary: str | None = None,
                     lengths=LENGTHS) -> dict | None:
    """The plan's figures as a function of one symbolic size (`vary`, default the last of
    `func`'s, a sequence length as a rule) at each of `lengths`, the other sizes at `dims`.
    None when `func` has no symbolic size. BuildError when the step has been through
    StaticPlanBlockMemory (its allocations are fixed: plan an earlier step) or a size has no value.
    {"dim", "fixed": {size: value}, "drawn": dims[vary], "rows": [{"value", "planned_bytes",
    "peak_bytes", "tensor_bytes", "tokens"}]}."""
    sizes = symbolic_sizes(mod, func)
    if not sizes:
        return None
    vary = vary or sizes[-1]
    if vary not in sizes:
        raise BuildError(f"{func} has no symbolic size {vary}; its sizes: {', '.join(sizes)}")
    fixed = {s: dims[s] for s in sizes if s != vary and s in dims}
    if default_build_progress(mod) > _PLAN_INDEX:
        raise BuildError("this step has been through StaticPlanBlockMemory: its allocations are "
                         "fixed, so it cannot be planned at other sizes", "plan an earlier step")
    bind_sizes(mod, {**fixed, vary: 1}, func)  # a size without a value: said before any lowering
    base = lower_until(mod, "StaticPlanBlockMemory")  # legalized once; each length binds and plans
    with host_target():
        rows = []
        for n in lengths:
            bound = bind_sizes(base, {**fixed, vary: n}, func)
            try:
                rows.append({"value": int(n), **memory_plan(_make_pass("StaticPlanBlockMemory")(bound),
                                                            func).summary()})
            except Exception as exc:  # one length that does not plan is said, the rest stand
                rows.append({"value": int(n), "error": (str(exc).strip().splitlines() or ["?"])[-1][:200]})
    return {"dim": vary, "fixed": {k: int(v) for k, v in fixed.items()}, "drawn": dims.get(vary),
            "rows": rows}


def step_memory_summaries(steps, func: str = "main") -> dict[int, dict]:
    """{step index: summary() + "planned_by_step"} for each step, or {"error": why} where it could
    not be planned (no `func`, or a pass on the way failed). Steps with the same module (a pass
    that changed nothing) are planned once."""
    out: dict[int, dict] = {}
    seen: dict[int, dict] = {}
    for st in steps:
        mod = st.mod
        if func not in [gv.name_hint for gv, f in mod.functions.items() if isinstance(f, relax.Function)]:
            out[st.index] = {"error": f"no Relax function {func} to plan"}
            continue
        key = structural_hash(mod)
        if key not in seen:
            try:
                plan, own = memory_of_step(mod, func)
                seen[key] = dict(plan.summary(), planned_by_step=own)
            except Exception as exc:  # a module the build passes reject is reported, not fatal
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
                seen[key] = {"error": f"could not plan memory: {first[:300]}"}
        out[st.index] = dict(seen[key])
    return out
