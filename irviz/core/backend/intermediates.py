"""Compare intermediates at any step: every FX node's torch value against the Relax binding that
provenance maps it to, and the first node (in FX order) whose error exceeds the tolerance.

    res = compare_intermediates(step, captured, params=kept_params)
    res.first_divergence          # FX node name, or None
    [n.as_dict() for n in res.nodes]

Torch side: an FX Interpreter over the captured graph module (lifted weights passed as inputs in
the graph signature's order), keeping every node's value.

TVM side, two ways, chosen by how far the step got through default_build:

* "outputs" (before CallTIRRewrite): a copy of ``main`` that returns ``(result, v1, v2, ...)``
  (a DataflowVar gets a non-dataflow alias in its block, since only those may leave it), built
  and run once. Memory planning then keeps each returned value alive.
* "instrument" (CallTIRRewrite and later): the step is built as it is and run once with a VM
  instrument that copies each kernel's output buffers right after the call; the memory plan
  reuses those buffers later, so the copy has to be taken then. Kernel calls are matched to
  bindings in program order; aliases, tuples, ``t[i]`` and reshapes are then evaluated in numpy.

Values are keyed by binding id (``views.provenance.binding_ids``: ``lv#1`` for a second ``lv``),
as provenance is, never by var name: FuseOps binds its fused call to a new ``lv`` beside a
surviving ``lv``. Which binding holds which FX node's value is ``intermediates_match``'s answer:
the latest binding provenance gives the node, of the node's shape where one is. When several FX
nodes share that binding (fused into one kernel), only the one whose value the kernel returns is
compared; the others are "fused away", with the kernel's name and the verdict at its output, their
nearest materialised value (``compared_as``), unless torch gives them that very value (a Dropout in
eval, an Identity): those are compared with the binding too. Weights, inputs and the output node
are not compared.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from irviz.core.backend import build as build_mod
from irviz.core.backend.outputs import compare as _compare
from irviz.core.backend.outputs import flatten as _flatten
from irviz.core.backend.outputs import to_numpy as _to_numpy
from irviz.core.backend.outputs import to_tvm as _to_tvm
from irviz.core.errors import RequestError, RunError
from irviz.core.tvm_compat import callee_name, var_name
from irviz.core.backend.intermediates_match import ValueMatch, main_bindings, match_values
from irviz.core.views.provenance import binding_ids

__all__ = ["IntermediatesResult", "NodeError", "compare_intermediates", "torch_values"]

_SKIP_KINDS = {"parameter": "a weight", "buffer": "a buffer", "constant": "a constant",
               "input": "a model input", "output": "the output node"}


@dataclass
class NodeError:
    fx_node: str
    relax_var: str | None
    status: str                  # "ok" | "diverges" | "unmatched"
    max_abs: float | None = None
    max_rel: float | None = None
    reason: str = ""             # why unmatched, or what exceeded the tolerance
    order: int = 0               # position in the FX graph (topological)
    shape: list | None = None
    dtype: str = ""
    atol: float | None = None
    rtol: float | None = None
    kernel: str | None = None        # the function computing relax_var (fused, PrimFunc, library)
    compared_as: str | None = None   # fused away: the FX node compared at its kernel's output

    def as_dict(self) -> dict:
        d = asdict(self)
        for k in ("max_abs", "max_rel", "atol", "rtol"):
            if isinstance(d[k], float) and not math.isfinite(d[k]):
                d[k] = None if math.isnan(d[k]) else 1e300
        return d


@dataclass
class IntermediatesResult:
    step: int
    pass_name: str
    method: str                              # "outputs" | "instrument"
    nodes: list[NodeError]                   # FX order
    first_divergence: str | None
    rtol: float | None = None                # the override given, None: per dtype
    atol: float | None = None
    seconds: dict = field(default_factory=dict)

    def worst(self, n: int = 10) -> list[NodeError]:
        matched = [x for x in self.nodes if x.status != "unmatched"]
        return sorted(matched, key=lambda x: -(x.max_abs or 0.0))[:n]

    def as_dict(self) -> dict:
        return {"step": self.step, "pass": self.pass_name, "method": self.method,
                "first_divergence": self.first_divergence, "rtol": self.rtol, "atol": self.atol,
                "seconds": {k: round(v, 4) for k, v in self.seconds.items()},
                "nodes": [n.as_dict() for n in self.nodes]}


# ---------------------------------------------------------------------------------------------
# torch side


def torch_values(captured) -> dict[str, object]:
    """FX node name -> the node's value from one run of the captured graph on the example inputs."""
    import torch

    loaded = captured.loaded
    example = list(loaded.example_inputs)
    if captured.exported is not None:
        from torch.export.graph_signature import InputKind

        ep = captured.exported
        gm = ep.graph_module
        state, consts = ep.state_dict, ep.constants
        users = iter(example)
        args = []
        for spec in ep.graph_signature.input_specs:
            if spec.kind == InputKind.USER_INPUT:
                args.append(next(users))
            elif spec.target in state:
                args.append(state[spec.target])
            elif spec.target in consts:
                args.append(consts[spec.target])
            else:
                raise KeyError(f"no value for the lifted input {spec.target!r}")
    else:
        gm, args = captured.fx_module, example
    interp = torch.fx.Interpreter(gm, garbage_collect_values=False)
    with torch.no_grad():
        interp.run(*args)
    return {n.name: v for n, v in interp.env.items()}


def _flat_arrays(value) -> list[np.ndarray] | None:
    """Tensors of a value (a tensor, or a tuple/list of them) as numpy; None if any is not one."""
    if isinstance(value, (list, tuple)):
        out = []
        for v in value:
            sub = _flat_arrays(v)
            if sub is None:
                return None
            out += sub
        return out
    if value is None or isinstance(value, (int, float, bool, str)):
        return None
    try:
        return [np.asarray(_to_numpy(value))]
    except Exception:  # symbolic ints, opaque objects
        return None


# ---------------------------------------------------------------------------------------------
# TVM side: values are keyed by binding id (views.provenance.binding_ids), as provenance is


def _with_extra_outputs(mod, wanted_ids: list[str]):
    """(copy of mod whose main returns (result, *values of the bindings wanted_ids name), the
    ids it could return)."""
    import tvm
    from tvm import relax

    main = mod["main"]
    body = main.body
    ids = binding_ids(main)
    wanted = set(wanted_ids)
    outs: dict[str, object] = {ids[p.__chandle__()]: p for p in main.params
                               if ids[p.__chandle__()] in wanted}
    blocks = []
    for blk in body.blocks:
        bindings = list(blk.bindings)
        extra = []
        for b in bindings:
            bid = ids[b.var.__chandle__()]
            if bid not in wanted or bid in outs:
                continue
            if isinstance(b.var, relax.DataflowVar):
                alias = relax.Var(f"{var_name(b.var)}_irviz_out", b.var.ty)
                extra.append(relax.VarBinding(alias, b.var))
                outs[bid] = alias
            else:
                outs[bid] = b.var
        if extra:
            blk = relax.DataflowBlock(bindings + extra) if isinstance(blk, relax.DataflowBlock) \
                else relax.BindingBlock(bindings + extra)
        blocks.append(blk)
    order = [n for n in wanted_ids if n in outs]
    new_body = relax.SeqExpr(blocks, relax.Tuple([body.body] + [outs[n] for n in order]))
    ret_ty = relax.TupleType([body.body.ty] + [outs[n].ty for n in order])
    new_main = relax.Function(main.params, new_body, ret_ty, main.is_pure, main.attrs)
    funcs = {gv: f for gv, f in mod.functions.items()}
    gv_main = next(gv for gv in funcs if gv.name_hint == "main")
    funcs[gv_main] = new_main
    new_mod = tvm.IRModule(funcs, attrs=mod.attrs)
    return relax.transform.Normalize()(new_mod), order


def _tvm_inputs(mod, loaded, params):
    """main's arguments: the example inputs (python scalars dropped: torch.export specialised
    them), then the kept weights main still takes."""
    import tvm

    dev = tvm.cpu()
    inputs = [x for x in loaded.example_inputs if not isinstance(x, (int, float, bool, str))]
    names = [var_name(p) for p in mod["main"].params]
    if len(names) > len(inputs):
        missing = [n for n in names[len(inputs):] if not params or n not in params]
        if missing:
            raise RunError(f"main takes {len(names)} parameters but the model has {len(inputs)} "
                           f"example inputs; no value for {', '.join(missing[:5])}",
                           "the weights main keeps as parameters must come from the import")
        inputs = inputs + [params[n] for n in names[len(inputs):]]
    return [_to_tvm(x, dev) for x in inputs]


def _run_outputs(mod, wanted_ids, loaded, params):
    import tvm
    from tvm import relax

    new_mod, order = _with_extra_outputs(mod, wanted_ids)
    t = time.perf_counter()
    built = build_mod.build(new_mod)
    build_s = time.perf_counter() - t
    vm = relax.VirtualMachine(built.executable, tvm.cpu())
    out = vm["main"](*_tvm_inputs(mod, loaded, params))
    values = {}
    for n, v in zip(order, list(out)[1:]):
        values[n] = [_to_numpy(x) for x in _flatten(v)]
    return values, build_s


def _dps_calls(mod, ids: dict[int, str]) -> tuple[list[tuple[str, list[int], list[str]]], list]:
    """Kernel calls of main in program order: (callee, positions of output args, their binding
    ids); plus main's bindings (for the numpy evaluation of aliases, tuples and reshapes)."""
    import tvm
    from tvm import relax

    bindings = main_bindings(mod)
    fresh: set[int] = set()
    calls = []
    prims = {gv.name_hint for gv, f in mod.functions.items() if isinstance(f, tvm.tirx.PrimFunc)}
    for b in bindings:
        value = b.value
        if not isinstance(value, relax.Call):
            continue
        op = value.op
        if isinstance(op, tvm.ir.Op):
            if op.name.endswith("alloc_tensor"):
                fresh.add(b.var.__chandle__())
            continue
        name = callee_name(op)
        if name is None or name.startswith("vm.builtin.") or (
                isinstance(op, relax.GlobalVar) and name not in prims):
            continue
        pos, outs = [], []
        for i, a in enumerate(value.args):
            if isinstance(a, relax.Var) and a.__chandle__() in fresh:
                fresh.discard(a.__chandle__())
                pos.append(i)
                outs.append(ids[a.__chandle__()])
        if pos:
            calls.append((name, pos, outs))
    return calls, bindings


def _run_instrumented(step_mod, built, loaded, params):
    import tvm
    import tvm_ffi
    from tvm import relax

    main = step_mod["main"]
    ids = binding_ids(main)
    calls, bindings = _dps_calls(step_mod, ids)
    values: dict[str, list[np.ndarray]] = {}
    k = [0]

    def instrument(func, func_symbol, before_run, ret_value, *args):
        if before_run:
            return relax.VMInstrumentReturnKind.NO_OP
        sym = str(func_symbol)
        if sym.startswith("vm.builtin."):
            return relax.VMInstrumentReturnKind.NO_OP
        # the next expected call of this kernel (a call the step did not list is skipped)
        j = k[0]
        while j < len(calls) and calls[j][0] != sym:
            j += 1
        if j < len(calls):
            _, pos, outs = calls[j]
            for p, n in zip(pos, outs):
                if p < len(args):
                    values[n] = [np.array(args[p].numpy(), copy=True)]
            k[0] = j + 1
        return relax.VMInstrumentReturnKind.NO_OP

    vm = relax.VirtualMachine(built.executable, tvm.cpu())
    vm.set_instrument(tvm_ffi.convert(instrument))
    inputs = _tvm_inputs(step_mod, loaded, params)
    vm["main"](*inputs)
    for p, x in zip(main.params, inputs):  # a node whose value is an input (an elided reshape)
        values.setdefault(ids[p.__chandle__()], [np.array(x.numpy(), copy=True)])
    # values that are no kernel's output: aliases, tuples, t[i], reshapes (views at run time)
    for b in bindings:
        n, value = ids[b.var.__chandle__()], b.value
        if n in values:
            continue
        got = _derived(value, values, ids)
        if got is not None:
            shape = _shape_of(b.var)
            if shape is not None and len(got) == 1 and got[0].size == math.prod(shape):
                got = [got[0].reshape(shape)]
            values[n] = got
    return values


def _derived(value, values, ids):
    from tvm import relax

    def of(var):
        return values.get(ids.get(var.__chandle__(), ""))

    if isinstance(value, relax.Var):
        return of(value)
    if isinstance(value, relax.Tuple):
        out = []
        for f in value.fields:
            got = of(f) if isinstance(f, relax.Var) else None
            if got is None:
                return None
            out += got
        return out
    if isinstance(value, relax.TupleGetItem) and isinstance(value.tuple_value, relax.Var):
        tup = of(value.tuple_value)
        return [tup[value.index]] if tup is not None and value.index < len(tup) else None
    if isinstance(value, relax.Call) and value.args and isinstance(value.args[0], relax.Var):
        op = value.op
        name = getattr(op, "name", None) or str(getattr(op, "global_symbol", ""))
        if name in ("relax.reshape", "vm.builtin.reshape") or str(name).endswith("reshape"):
            return of(value.args[0])
    return None


def _shape_of(var):
    from tvm import relax

    ty = var.ty
    if isinstance(ty, relax.TensorType) and ty.shape is not None:
        try:
            return tuple(int(d) for d in ty.shape.values)
        except (TypeError, ValueError):
            return None
    return None


# ---------------------------------------------------------------------------------------------
# matching and comparing


def _compare_one(got: list[np.ndarray], ref: list[np.ndarray], rtol, atol) -> tuple[dict | None, str]:
    if len(got) != len(ref):
        return None, f"shape differs: torch gives {len(ref)} tensors, Relax {len(got)}"
    worst = None
    for g, r in zip(got, ref):
        if g.dtype != r.dtype and not (np.issubdtype(g.dtype, np.floating) and np.issubdtype(r.dtype, np.floating)):
            return None, f"dtype differs: torch {r.dtype}, Relax {g.dtype}"
        if g.shape != r.shape:
            if g.size == r.size == 1:
                g = g.reshape(r.shape)
            else:
                return None, f"shape differs: torch {tuple(r.shape)}, Relax {tuple(g.shape)}"
        rec = _compare(g.astype(r.dtype, copy=False), r)
        if rtol is not None or atol is not None:
            rt = rec["rtol"] if rtol is None else float(rtol)
            at = rec["atol"] if atol is None else float(atol)
            if np.issubdtype(r.dtype, np.floating):
                rec["allclose"] = bool(np.allclose(g.astype(np.float64), r.astype(np.float64),
                                                   rtol=rt, atol=at, equal_nan=True))
            rec.update(rtol=rt, atol=at)
        if worst is None:
            worst = rec
        else:
            worst = {**worst, "max_abs": max(worst["max_abs"], rec["max_abs"]),
                     "max_rel": max(worst["max_rel"], rec["max_rel"]),
                     "allclose": worst["allclose"] and rec["allclose"],
                     "atol": max(worst["atol"], rec["atol"])}
    return worst, ""


def _same_value(a, b) -> bool:
    a, b = _flat_arrays(a), _flat_arrays(b)
    return a is not None and b is not None and len(a) == len(b) and all(
        x.shape == y.shape and x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(a, b))


def _say_fused(nodes: list[NodeError], match: ValueMatch) -> None:
    """Reasons for the nodes computed inside a kernel whose output is another node's value: which
    kernel, and what the comparison at that output (the nearest materialised value) found."""
    by_name = {n.fx_node: n for n in nodes}
    for ne in nodes:
        out = by_name.get(ne.compared_as or "")
        if out is None:
            continue
        if out.status == "unmatched":
            verdict = f"not compared either: {out.reason}"
        else:
            verdict = f"{out.status}, max abs error {out.max_abs:.3g}"
        if ne.kernel:
            ne.reason = (f"fused away: computed inside kernel {ne.kernel} ({ne.relax_var}), no value "
                         f"of its own at this step; nearest materialised value: that output, "
                         f"{out.fx_node}'s ({verdict})")
        else:  # an alias, or an op whose result several FX nodes share before any kernel exists
            ne.reason = (f"no value of its own at this step: {ne.relax_var} holds {out.fx_node}'s "
                         f"({verdict})")
    for ne in nodes:
        inside = match.sharing(ne.fx_node)
        if inside and ne.status == "diverges":
            ne.reason += (f"; {'kernel ' + ne.kernel if ne.kernel else ne.relax_var} also computes "
                          f"{', '.join(inside)}: the error may start in any of them")


def compare_intermediates(step, captured, *, params=None, built=None, rtol=None, atol=None,
                          progress=None) -> IntermediatesResult:
    """Every FX node against its Relax binding at `step` (see the module docstring). `built`: a
    BuildResult of this step to reuse (used by the "instrument" way only). `rtol`/`atol`: one
    tolerance for every node (default: per dtype, as the whole-model comparison does)."""
    say = progress or (lambda *a, **k: None)
    if captured is None or getattr(captured, "loaded", None) is None:
        raise RequestError("comparing intermediates needs a PyTorch model: this session has no FX graph",
                           "open a model file (.py with get_model(), .pt2 or sample:NAME)")
    seconds = {}
    t = time.perf_counter()
    say("Running the FX graph in torch", 0.05)
    ref_values = torch_values(captured)
    seconds["torch"] = time.perf_counter() - t
    graph = captured.graph
    match = match_values(step, graph, _SKIP_KINDS)
    chosen = match.chosen

    late = build_mod.default_build_progress(step.mod) >= build_mod.DEFAULT_BUILD_PASSES.index("CallTIRRewrite") + 1
    t = time.perf_counter()
    if late:
        method = "instrument"
        if built is None:
            say(f"Building step {step.index}", 0.2)
            built = build_mod.build(step.mod)
        seconds["build"] = time.perf_counter() - t
        t = time.perf_counter()
        say("Running with an instrument on every kernel", 0.6)
        values = _run_instrumented(step.mod, built, captured.loaded, params)
    else:
        method = "outputs"
        say(f"Building step {step.index} with {len(set(chosen.values()))} extra outputs", 0.2)
        values, seconds["build"] = _run_outputs(step.mod, sorted(set(chosen.values())),
                                                captured.loaded, params)
        t += seconds["build"]  # what is left is the run
    seconds["run"] = time.perf_counter() - t

    t = time.perf_counter()
    nodes: list[NodeError] = []
    first = None
    for order, node in enumerate(graph.nodes):
        if node.kind in _SKIP_KINDS:
            continue
        shape = list(node.shapes[0]) if node.shapes else None
        dtype = node.dtypes[0] if node.dtypes else ""
        var = chosen.get(node.name)
        out = match.inside.get(node.name)
        if out is not None and _same_value(ref_values.get(node.name), ref_values.get(out)):
            # torch gives it the very value the binding holds (an identity, a Dropout in eval)
            var = match.binding_of[node.name]
            match.inside.pop(node.name)
        ne = NodeError(fx_node=node.name, relax_var=var or match.binding_of.get(node.name),
                       status="unmatched", order=order, shape=shape, dtype=dtype,
                       kernel=match.kernel.get(node.name), compared_as=match.inside.get(node.name))
        nodes.append(ne)
        if var is None:
            ne.reason = match.why.get(node.name, "no mapping")
            continue
        ref = _flat_arrays(ref_values.get(node.name))
        if ref is None:
            ne.reason = "torch value is not a tensor"
            continue
        got = values.get(var)
        if got is None:
            ne.reason = f"{var} has no value at run time (not a kernel's output at this step)"
            continue
        rec, reason = _compare_one(got, ref, rtol, atol)
        if rec is None:
            ne.reason = reason
            continue
        ne.max_abs, ne.max_rel = rec["max_abs"], rec["max_rel"]
        ne.atol, ne.rtol = rec["atol"], rec["rtol"]
        ne.status = "ok" if rec["allclose"] else "diverges"
        if not rec["allclose"]:
            ne.reason = f"max abs error {rec['max_abs']:.3g} > atol {rec['atol']:.3g} + rtol {rec['rtol']:.3g} x |torch|"
            if first is None:
                first = node.name
    _say_fused(nodes, match)
    seconds["compare"] = time.perf_counter() - t
    return IntermediatesResult(step=step.index, pass_name=step.pass_name, method=method, nodes=nodes,
                               first_divergence=first, rtol=rtol, atol=atol, seconds=seconds)
