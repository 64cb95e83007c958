"""The course's own ``from_fx`` ("Integration with ML frameworks"), over a symbolic_trace graph.

A BlockBuilder walk over ``captured.fx_module.graph`` exactly as the course writes it: placeholders
become ``main`` parameters, ``get_attr`` nodes become ``relax.const``, and every other node is
handed to a map function with the course's signatures::

    call_function_map[fn](bb, node_map, node)              # keyed by torch.matmul, operator.add, ...
    call_module_map[type](bb, node_map, node, nn_mod)      # keyed by nn.Linear, nn.ReLU, ...

``node_map`` is the fx.Node -> relax.Expr dict being filled; what a map function returns is stored
for its node (and is the node's provenance). A ``call_method`` node (``x.view(...)``) is looked up
in call_function_map under its method name ("view"), since the course has no third map.

Map files (``--importer course --importer-map FILE.py``) define ``call_function_map`` and/or
``call_module_map`` dicts; they extend the built-in maps (``irviz.core.frontend.course_maps``) and
override them for the same key, later files on top. A model file may define the same dicts.
"""
from __future__ import annotations

import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from irviz.core.errors import IRImportError, LoadError, tvm_error_text
from irviz.core.frontend.converters import converter_error_location
from irviz.core.user_code import exception_line, exec_file

if TYPE_CHECKING:  # imported.py loads TVM: model files read MAP_NAMES without paying for it
    from irviz.core.frontend.imported import Imported

MAP_NAMES = ("call_function_map", "call_module_map")
_COUNTER = [0]


# ---------------------------------------------------------------------------------------------
# map files


def load_map_file(path) -> tuple[dict, dict]:
    """Execute a map file afresh; (call_function_map, call_module_map). LoadError saying what is
    wrong with it (no maps, a key or value of the wrong kind, an exception while it runs)."""
    p = Path(path).expanduser()
    shown = p.name
    if not p.is_file():
        raise LoadError(f"No such importer map file: {path}",
                        hint="give a .py file defining call_function_map and/or call_module_map dicts")
    _COUNTER[0] += 1
    try:
        module = exec_file(p.resolve(), f"_irviz_course_map_{_COUNTER[0]}")
    except Exception as e:  # the user's code can raise anything
        raise LoadError(f"importer map file {shown} raised {exception_line(e)}",
                        hint="run the file in plain Python to see the full error",
                        detail=traceback.format_exc()) from None
    return maps_of(module, shown, required=True)


def maps_of(module, shown: str, required: bool = False) -> tuple[dict, dict]:
    """The call_function_map / call_module_map dicts a loaded file defines (checked)."""
    import torch

    found = {name: getattr(module, name, None) for name in MAP_NAMES}
    if required and all(v is None for v in found.values()):
        raise LoadError(f"importer map file {shown} defines neither call_function_map nor call_module_map",
                        hint="define call_function_map = {torch.matmul: fn} (fn(bb, node_map, node)) "
                             "and/or call_module_map = {nn.Linear: fn} (fn(bb, node_map, node, nn_mod))")
    out = []
    for name, table in found.items():
        if table is None:
            out.append({})
            continue
        if not isinstance(table, dict):
            raise LoadError(f"{name} in {shown} is a {type(table).__name__}, not a dict",
                            hint=f"{name} maps each key to a function")
        for key, fn in table.items():
            if name == "call_module_map" and not (isinstance(key, type) and issubclass(key, torch.nn.Module)):
                raise LoadError(f"call_module_map in {shown} has the key {key!r}, not an nn.Module class",
                                hint="key call_module_map by module classes: {torch.nn.Linear: fn}")
            if name == "call_function_map" and not (callable(key) or isinstance(key, str)):
                raise LoadError(f"call_function_map in {shown} has the key {key!r}, not a function",
                                hint="key call_function_map by functions ({torch.matmul: fn}) or, for "
                                     "x.method(...) calls, by the method name ({'view': fn})")
            if not callable(fn):
                raise LoadError(f"{name}[{_key_name(key)}] in {shown} is not callable",
                                hint="values are functions fn(bb, node_map, node"
                                     + (", nn_mod)" if name == "call_module_map" else ")"))
        out.append(dict(table))
    return out[0], out[1]


def combined_maps(layers) -> tuple[dict, dict]:
    """The built-in maps with each (call_function_map, call_module_map, origin) layer on top."""
    # lazy: course_maps loads torch and TVM; reading a model file's own maps needs neither
    from irviz.core.frontend.course_maps import CALL_FUNCTION_MAP, CALL_MODULE_MAP

    fmap = {k: (v, "irviz's built-in map") for k, v in CALL_FUNCTION_MAP.items()}
    mmap = {k: (v, "irviz's built-in map") for k, v in CALL_MODULE_MAP.items()}
    for f, m, origin in layers:
        fmap.update({k: (v, origin) for k, v in f.items()})
        mmap.update({k: (v, origin) for k, v in m.items()})
    return fmap, mmap


def _key_name(key) -> str:
    if isinstance(key, str):
        return repr(key)
    if isinstance(key, type):
        return _module_key_name(key)
    from torch.fx.node import _get_qualified_name

    try:
        name = _get_qualified_name(key)
    except Exception:
        return getattr(key, "__name__", repr(key))
    return "operator." + name[len("_operator."):] if name.startswith("_operator.") else name


def _module_key_name(cls) -> str:
    mod = cls.__module__
    return f"torch.nn.{cls.__name__}" if mod.startswith("torch.nn.") else f"{mod}.{cls.__qualname__}"


# ---------------------------------------------------------------------------------------------
# the importer


def _lookup_module(mmap: dict, cls):
    if cls in mmap:
        return mmap[cls]
    for base in cls.__mro__[1:]:  # e.g. NonDynamicallyQuantizableLinear is an nn.Linear
        if base in mmap:
            return mmap[base]
    return None


def _fetch_attr(fx_mod, target: str):
    obj = fx_mod
    for atom in target.split("."):
        if not hasattr(obj, atom):
            raise AttributeError(f"the graph refers to {target!r}, which the module does not have")
        obj = getattr(obj, atom)
    return obj


def _flatten(x):
    if isinstance(x, (list, tuple)):
        for y in x:
            yield from _flatten(y)
    elif x is not None:
        yield x


def _placeholder_type(node):
    from tvm import relax  # lazy: see import_fx

    from irviz.core.frontend.imported import node_message

    tm = node.meta.get("tensor_meta")
    if tm is None or not hasattr(tm, "shape"):
        raise IRImportError(node_message(None, node, "the input has no tensor shape"),
                            hint="the course importer takes tensor inputs; get_model() must give a "
                                 "tensor for every forward() argument")
    return relax.TensorType([int(d) for d in tm.shape], str(tm.dtype).replace("torch.", ""))


def import_fx(captured, layers=()) -> Imported:
    """The course's from_fx over captured.fx_module with the built-in maps + `layers`
    [(call_function_map, call_module_map, origin)]; provenance for every FX node."""
    # lazy, here and in the helpers below: TVM (and course_maps' torch) load only when the course
    # importer runs; model files import this module for MAP_NAMES
    from tvm import relax

    from irviz.core.frontend.course_maps import map_param
    from irviz.core.frontend.imported import Imported, compute_provenance

    t0 = time.perf_counter()
    gm = captured.fx_module
    fmap, mmap = combined_maps(layers)
    named = dict(gm.named_modules())
    nodes = list(gm.graph.nodes)
    node_map: dict = {}
    const_names = []
    inputs = []
    bb = relax.BlockBuilder()
    with bb.function("main"):
        with bb.dataflow():
            out = None
            for node in nodes:
                if node.op == "placeholder":
                    var = relax.Var(node.target, _placeholder_type(node))
                    inputs.append(var)
                    node_map[node] = var
                elif node.op == "get_attr":
                    c = map_param(_fetch_attr(gm, node.target))
                    node_map[node] = c
                    const_names.append((node.name, c))
                elif node.op in ("call_function", "call_method", "call_module"):
                    node_map[node] = _convert(captured, bb, node_map, node, fmap, mmap, named)
                elif node.op == "output":
                    results = [node_map[r] for r in _flatten(node.args[0])]
                    ret = results[0] if len(results) == 1 else relax.Tuple(results)
                    out = bb.emit_output(ret)
        bb.emit_func_output(out, inputs)
    mod = bb.get()
    prov = compute_provenance(mod, node_map, nodes, const_names)
    return Imported(mod=mod, provenance=prov, importer="course", seconds=time.perf_counter() - t0)


def _convert(captured, bb, node_map, node, fmap, mmap, named):
    from tvm import relax  # lazy: see import_fx

    from irviz.core.frontend.imported import node_message

    if node.op == "call_module":
        nn_mod = named[node.target]
        cls = type(nn_mod)
        entry = _lookup_module(mmap, cls)
        key, which, args = _module_key_name(cls), "call_module_map", (bb, node_map, node, nn_mod)
    else:
        entry = fmap.get(node.target)
        key, which, args = _key_name(node.target), "call_function_map", (bb, node_map, node)
    if entry is None:
        example = ("def my_fn(bb, node_map, node, nn_mod): ...\ncall_module_map = {" + key + ": my_fn}"
                   if which == "call_module_map" else
                   "def my_fn(bb, node_map, node): ...\ncall_function_map = {" + key + ": my_fn}")
        raise IRImportError(
            node_message(captured, node, f"no entry for {key} in {which}"),
            hint=f"extend {which} in a map file and pass it with --importer-map FILE.py "
                 f"(in the app: Open… ▸ Load map…), e.g.\n{example}",
            node=node.name, op=key)
    fn, origin = entry
    try:
        value = fn(*args)
    except Exception as exc:  # a map function can raise anything
        where = converter_error_location(exc, fn)
        reason = tvm_error_text(exc, head=0, tail=6, with_type=True)
        raise IRImportError(
            node_message(captured, node, f"{which}[{key}] ({origin}) raised {reason}"
                                         + (f" at {where}" if where else "")),
            hint=f"fix the function {getattr(fn, '__name__', 'given')} for {key} in {origin}, "
                 "or give your own in a map file (--importer-map)",
            detail=traceback.format_exc(), node=node.name, op=key) from exc
    if not isinstance(value, relax.Expr):
        raise IRImportError(
            node_message(captured, node, f"{which}[{key}] ({origin}) returned "
                                         f"{type(value).__name__}, not a Relax expression"),
            hint="a map function returns what it emitted, e.g. `return bb.emit_te(te_relu, x)`",
            node=node.name, op=key)
    return value
