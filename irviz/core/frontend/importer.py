"""Import a captured (already decomposed) torch.export program into a Relax IRModule.

Two importers:

* ``"exported_program"`` (default): TVM's ``ExportedProgramImporter``, instantiated here so that its
  ``env`` (fx.Node -> relax.Expr) survives and gives the provenance map.  The program in
  ``captured.exported`` is already ``run_decompositions()``-ed, and the importer *class* does not
  decompose again (only the public ``from_exported_program`` function does), so the FX nodes the
  user sees are exactly the nodes the importer converted.
* ``"course"``: the course's teaching importer (``irviz.core.frontend.course_importer``): a BlockBuilder walk
  with ``bb.emit_te`` + TOPI.

Both return an ``Imported`` (``irviz.core.frontend.imported``, which also computes provenance:
fx node name -> the Relax bindings it became).
"""
from __future__ import annotations

import time
import traceback
from collections.abc import Callable

import tvm

from irviz.core.errors import IRImportError, tvm_error_text
from irviz.core.frontend.converters import (
    builtin_converters,
    converter_error_location,
    normalize_key,
)
from irviz.core.frontend.complex_converters import unsupported_complex_node
from irviz.core.frontend import structure_only as no_weights
from irviz.core.frontend.course_fx import import_fx
from irviz.core.frontend.course_importer import import_course
from irviz.core.frontend.imported import (
    Imported,
    compute_provenance,
    node_message,
    op_name,
)
from irviz.core.tvm_compat import var_name

IMPORTERS = ("exported_program", "course")

CUSTOM_CONVERT_MAP_HINT = (
    "supply a converter with import_model(..., custom_convert_map={{'{key}': fn}}), where "
    "fn(node: torch.fx.Node, importer: ExportedProgramImporter) -> relax.Var emits Relax for the "
    "node, e.g. `lambda node, imp: imp.block_builder.emit(relax.op.exp(imp.env[node.args[0]]))` "
    "(imp.env maps the node's fx inputs to Relax values; keys are the op's overload name, "
    "node.target.__name__, e.g. 'erfinv.default'; 'aten.erfinv.default' and OpOverload objects are "
    "accepted too); from the command line, put CONVERTERS = {{'aten.{key}': fn}} in a Python file "
    "and pass --converters FILE (example: irviz/samples/example_converter.py); or change the model "
    "to avoid this op"
)


def import_model(captured, importer: str = "exported_program", custom_convert_map=None,
                 course_maps=(), keep_params: bool = False, structure_only: bool = False) -> Imported:
    """captured: irviz.core.frontend.capture.Captured (uses .exported and .graph). A symbolic_trace
    capture goes to the course's from_fx (course_fx) with the built-in maps and `course_maps`
    [(call_function_map, call_module_map, origin)] on top.

    keep_params: the model's parameters stay parameters of main after the user inputs
    (``main(x, p_linear0_weight, ...)``) and their values come back in ``Imported.params``;
    buffers and constants are bound as usual. The course importers make the weights constants
    first and lift them into parameters (lift_params).

    structure_only: the weights have no data (meta tensors): every weight, buffer and constant
    stays a parameter of main, typed and never read (see structure_only)."""
    if structure_only:
        no_weights.check_frontend(getattr(captured, "method", "export"), importer)
    if keep_params and importer == "course":
        return _with_kept_params(import_model(captured, importer, custom_convert_map, course_maps),
                                 captured)
    if getattr(captured, "method", "export") == "symbolic_trace":
        if importer != "course":
            raise IRImportError(
                f"the {importer} importer reads torch.export graphs; this model was captured with "
                "symbolic_trace",
                hint="import a symbolic_trace graph with the course importer (--importer course, or "
                     "leave --importer out), or capture with --capture export")
        return import_fx(captured, course_maps)
    if course_maps:
        raise IRImportError(
            "importer map files (call_function_map / call_module_map) apply to symbolic_trace graphs; "
            "this model was captured with torch.export",
            hint="capture with --capture symbolic_trace (or leave --capture out: a map file chooses it)")
    if importer == "course":
        if custom_convert_map:
            raise IRImportError(
                "custom_convert_map is only used by the exported_program importer",
                hint="use importer='exported_program' with custom_convert_map",
            )
        return import_course(captured)
    if importer != "exported_program":
        raise IRImportError(
            f"unknown importer {importer!r}", hint=f"choose one of {', '.join(IMPORTERS)}"
        )
    return _import_exported_program(captured, custom_convert_map, keep_params, structure_only)


def _with_kept_params(imported: Imported, captured) -> Imported:
    """The course importers make every weight a constant (the chapter's map_param): lift the ones
    that hold the model's parameters into main's parameters (see lift_params)."""
    from irviz.core.frontend.lift_params import lift_params

    named = list(captured.loaded.module.named_parameters())
    if not named:
        return imported
    imported.mod, imported.params = lift_params(imported.mod, named)
    if not imported.params:
        raise IRImportError("--keep-params found none of the model's weights in main: the map "
                            "functions computed new constants from them",
                            hint="open without --keep-params, or make the weights constants with "
                                 "map_param(nn_mod.weight) as the course does")
    for name in imported.params:  # the weight is the parameter of the same name, as with TVM's importer
        imported.provenance.setdefault(name, [name])
    return imported


# --------------------------------------------------------------------------------------------
# exported_program importer


def normalize_convert_map(custom_convert_map) -> dict[str, Callable]:
    """Keys as the importer looks them up: ``node.target.__name__`` ("erfinv.default")."""
    out = {}
    for key, fn in (custom_convert_map or {}).items():
        try:
            keys = normalize_key(key)  # "aten.x.y" / OpOverload -> "x.y"; "x" -> every overload
        except ValueError as e:
            raise IRImportError(
                f"custom_convert_map: {e}",
                hint="keys are op overload names as in the FX graph, e.g. 'aten.erfinv.default'",
            ) from None
        if not callable(fn):
            raise IRImportError(
                f"custom_convert_map[{key!r}] is not callable",
                hint="values are functions fn(node, importer) -> relax.Var",
            )
        for k in keys:
            out[k] = fn
    return out


def _target_key(node) -> str:
    t = node.target
    return t if isinstance(t, str) else getattr(t, "__name__", str(t))


def _make_importer_class():
    from tvm.relax.frontend.torch.exported_program_translator import (
        ExportedProgramImporter,
    )

    class _TrackingImporter(ExportedProgramImporter):
        """Records the node being converted and the tensors bound as constants."""

        def __init__(self):
            super().__init__()
            self.current_node = None
            self.bound_tensors = []  # (torch.Tensor, tvm.runtime.Tensor)

        def _convert_pytorch_tensor_to_tvm(self, tensor_value):
            out = ExportedProgramImporter._convert_pytorch_tensor_to_tvm(tensor_value)
            self.bound_tensors.append((tensor_value, out))
            return out

    return _TrackingImporter


def _wrap(fn, imp):
    def tracked(node, *rest, **kw):
        imp.current_node = node
        return fn(node, *rest, **kw)

    tracked.__wrapped__ = fn
    return tracked


def _wrap_custom(fn, imp):
    # TVM 0.27 converts the branches of torch.cond (_import_branch_subgraph) without its list of
    # custom ops and calls their converters as fn(node), without the importer: supply it
    def tracked(node, importer=None):
        imp.current_node = node
        return fn(node, imp if importer is None else importer)

    tracked.__wrapped__ = fn
    return tracked


def _import_exported_program(captured, custom_convert_map, keep_params=False,
                             structure_only=False) -> Imported:
    ep = captured.exported
    t0 = time.perf_counter()

    user = normalize_convert_map(custom_convert_map)
    custom = {**builtin_converters(), **user}  # irviz's own converters, the user's on top
    cls = _make_importer_class()
    imp = (no_weights.structure_only_importer(cls) if structure_only else cls)()
    imp.exported = ep  # converters that need a buffer's value at import (constant repeats)
    nodes = list(ep.graph.nodes)

    # 1. ops irviz cannot express (complex tensors beyond the few it carries as float pairs), then
    #    ops without a converter: name the first one (TVM would assert with a bare list).
    complex_stop = unsupported_complex_node(nodes, set(user))
    if complex_stop is not None:
        node, reason = complex_stop
        raise IRImportError(
            node_message(captured, node, reason),
            hint="change the model to keep this computation in real tensors (e.g. cos/sin instead "
                 "of complex rotation), or supply a converter with --converters FILE",
            node=node.name,
            op=op_name(node),
        )
    known = set(imp.convert_map) | set(custom)
    missing = [n for n in nodes if n.op == "call_function" and _target_key(n) not in known]
    if missing:
        first = missing[0]
        others = sorted({op_name(n) for n in missing} - {op_name(first)})
        also = f"; also unsupported: {', '.join(others)}" if others else ""
        raise IRImportError(
            node_message(captured, first, f"TVM {tvm.__version__} has no converter for this op")
            + also,
            hint=CUSTOM_CONVERT_MAP_HINT.format(key=_target_key(first)),
            node=first.name,
            op=op_name(first),
        )

    # 2. track which node each converter call is for
    imp.convert_map = {k: _wrap(v, imp) for k, v in imp.convert_map.items()}
    wrapped_custom = {k: _wrap_custom(v, imp) for k, v in custom.items()}
    try:
        if structure_only:
            mod = no_weights.translate(imp, ep, wrapped_custom or None)
        else:
            mod = imp.from_exported_program(ep, bool(keep_params), True, False, wrapped_custom or None)
    except Exception as exc:  # TVM raises many types (TVMError, AssertionError, ...
        # a failing converter's cause is at the end of TVM's text, after what it was converting
        reason = tvm_error_text(exc, head=0, tail=6, with_type=True)
        node = imp.current_node
        detail = traceback.format_exc()
        if node is not None and node not in imp.env:
            key = _target_key(node)
            if key in user:
                where = converter_error_location(exc, user[key])
                what = "your custom converter for this op failed" + (f" at {where}" if where else "")
                hint = f"fix the function given as custom_convert_map[{key!r}], or remove it"
            elif key in custom:
                what = "irviz's converter for this op failed"
                hint = (CUSTOM_CONVERT_MAP_HINT.format(key=key)
                        + " (a custom converter with the same key replaces irviz's)")
            else:
                what = "TVM's converter for this op failed"
                hint = (CUSTOM_CONVERT_MAP_HINT.format(key=key)
                        + " (a custom converter with the same key replaces TVM's)")
            raise IRImportError(
                node_message(captured, node, f"{what}: {reason}"),
                hint=hint,
                detail=detail,
                node=node.name,
                op=op_name(node),
            ) from exc
        raise IRImportError(
            f"TVM's exported-program importer failed: {reason}",
            hint="check the model's outputs and inputs (tensors only); run with --verbose for the "
            "full traceback",
            detail=detail,
        ) from exc

    params = None
    if keep_params and not structure_only:
        mod, params = _take_kept_params(mod, ep)
    const_names = _bound_constant_names(ep, imp.bound_tensors, with_parameters=not keep_params)
    provenance = compute_provenance(mod, imp.env, nodes, const_names)
    mod = rename_symbolic_dims(mod, dim_names(captured))  # after provenance: it rebuilds main
    return Imported(
        mod=mod,
        provenance=provenance,
        importer="exported_program",
        seconds=time.perf_counter() - t0,
        params=params,
        structure_only=structure_only,
    )


def _take_kept_params(mod, ep):
    """main without TVM's "params" attribute (a copy of every weight, printed into the module's
    metadata), and {main's weight parameter name: numpy array} in main's parameter order."""
    from torch.export.graph_signature import InputKind

    by_name = {spec.arg.name: ep.state_dict[spec.target]
               for spec in ep.graph_signature.input_specs if spec.kind == InputKind.PARAMETER}
    main = mod["main"]
    params = {}
    for p in main.params:
        t = by_name.get(var_name(p))
        if t is not None:
            params[var_name(p)] = t.detach().cpu().contiguous().numpy()
    if main.attrs is not None and "params" in main.attrs:
        out = tvm.IRModule(dict(mod.functions), attrs=mod.attrs)
        out["main"] = main.without_attr("params")
        mod = out
    return mod, params


# --------------------------------------------------------------------------------------------
# symbolic dims: torch.export calls them s0, s77, ...; show the names the model file gave


def dim_names(captured) -> dict[str, str]:
    """{"s77": "batch", ...}: torch's symbol of each dynamic dim -> the name of its torch.export.Dim.

    Read from the model file's dynamic_shapes (``captured.loaded.dynamic_shapes``: a dict keyed
    by forward()'s argument names, or a tuple/list in argument order; per input a dict
    {dim: Dim} or a tuple/list with a Dim or None per dim) and the user-input placeholders'
    fake tensors.  Only plain symbols are renamed (not derived ones like ``2*s0``), and only to
    unique identifiers.  Empty when nothing is dynamic.
    """
    loaded = getattr(captured, "loaded", None)
    spec = getattr(loaded, "dynamic_shapes", None)
    ep = getattr(captured, "exported", None)
    if not spec or ep is None:
        return {}
    try:
        import inspect

        import torch

        dim_cls = getattr(torch.export.dynamic_shapes, "Dim", None)
        user_names = list(ep.graph_signature.user_inputs)
        placeholders = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
        try:
            params = inspect.signature(loaded.module.forward).parameters
        except (TypeError, ValueError):
            params = {}
        arg_names = list(params)
        if isinstance(spec, dict):
            per_input = [spec.get(a) for a in arg_names[: len(user_names)]]
            if not any(per_input):  # keys that are not forward()'s names: take them in order
                per_input = list(spec.values())
        else:
            per_input = list(spec)
        # a *args parameter's spec is one per argument it takes: those are inputs of their own
        star = [i for i, p in enumerate(params.values()) if p.kind == inspect.Parameter.VAR_POSITIONAL]
        if star and star[0] < len(per_input) and isinstance(per_input[star[0]], (tuple, list)):
            i = star[0]
            per_input = per_input[:i] + list(per_input[i]) + per_input[i + 1:]
        out: dict[str, str] = {}
        for ph_name, dims in zip(user_names, per_input):
            node = placeholders.get(ph_name)
            shape = getattr(node.meta.get("val"), "shape", None) if node is not None else None
            if shape is None or not dims:
                continue
            items = dims.items() if isinstance(dims, dict) else enumerate(dims)
            for axis, d in items:
                if d is None or (dim_cls is not None and not isinstance(d, dim_cls)):
                    continue
                name = getattr(d, "__name__", None)
                if not isinstance(name, str) or not name.isidentifier() or not 0 <= axis < len(shape):
                    continue
                size = shape[axis]
                expr = getattr(getattr(size, "node", None), "expr", None)
                if expr is None or not getattr(expr, "is_Symbol", False):
                    continue
                out.setdefault(str(expr), name)
    except Exception:  # names are a nicety; never fail an import over them
        return {}
    taken = list(out.values())
    return {k: v for k, v in out.items() if taken.count(v) == 1 and k != v}


def rename_symbolic_dims(mod, names: dict[str, str]):
    """main with its symbolic shape vars renamed (bind_symbolic_vars), bounds attrs re-keyed."""
    if not names:
        return mod
    try:
        from tvm import tirx

        main = mod["main"]
        present = set()
        for p in main.params:
            for d in getattr(getattr(p.ty, "shape", None), "values", None) or []:
                if isinstance(d, tirx.Var):
                    present.add(d.name)
        clash = set(names.values()) & (present - set(names))
        names = {k: v for k, v in names.items() if k in present and v not in clash}
        if not names:
            return mod
        new = main.bind_symbolic_vars({k: tirx.Var(v, "int64") for k, v in names.items()})
        for attr in ("tir_var_lower_bound", "tir_var_upper_bound"):
            bounds = (new.attrs or {}).get(attr) if new.attrs is not None else None
            if bounds:
                new = new.with_attr(attr, {names.get(str(k), str(k)): v for k, v in dict(bounds).items()})
        out = tvm.IRModule(dict(mod.functions), attrs=mod.attrs)
        out["main"] = new
        return out
    except Exception:
        return mod


def _bound_constant_names(ep, bound_tensors, with_parameters=True) -> list[tuple[str, object]]:
    """[(placeholder name, tvm.runtime.Tensor)] for the tensors bound as constants (parameters
    kept as main's inputs are not constants: with_parameters=False)."""
    from torch.export.graph_signature import InputKind

    by_name = {}
    state = ep.state_dict
    buffers = dict(ep.named_buffers())
    for spec in ep.graph_signature.input_specs:
        if spec.kind == InputKind.PARAMETER:
            if with_parameters:
                by_name[spec.arg.name] = state.get(spec.target)
        elif spec.kind == InputKind.BUFFER:
            by_name[spec.arg.name] = buffers.get(spec.target, ep.constants.get(spec.target))
        elif spec.kind == InputKind.CONSTANT_TENSOR:
            by_name[spec.arg.name] = ep.constants.get(spec.target)
    out = []
    for tensor, tvm_tensor in bound_tensors:
        for name, t in by_name.items():
            if t is None:
                continue
            if t is tensor or (
                getattr(t, "data_ptr", None)
                and t.data_ptr() == tensor.data_ptr()
                and t.shape == tensor.shape
                and t.dtype == tensor.dtype
            ):
                out.append((name, tvm_tensor))
                break
    return out
