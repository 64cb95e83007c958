"""Capture the loaded model as an FX graph, and build the FX graph view-model.

Two captures:

* ``"export"`` (default): torch.export, then ``run_decompositions()``. The program kept in
  `Captured.exported` is the decomposed one: the importer converts exactly that graph, so FX node
  names here are the keys of the importer's provenance.
  When torch.export fails, ``capture_fallbacks.fall_back`` tries the next captures in order
  (`Captured.fallback` names the one used, `Captured.notes` what it assumed).
* ``"symbolic_trace"``: ``torch.fx.symbolic_trace`` of the nn.Module, as the course's from_fx
  does: a module-level graph of call_module / call_function / call_method nodes
  (`Captured.fx_module`). Such graphs carry no shapes, so ShapeProp runs the example inputs
  through it to give every node its shape and dtype.
"""
from __future__ import annotations

import operator
import re
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

import networkx as nx
import torch

from irviz.core.errors import CaptureError
from irviz.core.frontend.model_file import LoadedModel

ARG_REPR_MAX = 240


@dataclass
class FxNode:
    name: str
    op: str  # placeholder / call_function / get_attr / output
    target: str  # "aten.conv2d.default", placeholder name, ...
    kind: str  # "input" | "parameter" | "buffer" | "constant" | "op" | "output"
    args: list[str] = field(default_factory=list)  # names of input nodes in order
    arg_repr: str = ""  # short printable form of all args/kwargs
    users: list[str] = field(default_factory=list)
    shapes: list[tuple] = field(default_factory=list)  # one per output tensor; symbolic dims as str
    dtypes: list[str] = field(default_factory=list)
    module_path: str = ""  # "layer1.0.conv1" ("" for top level)
    module_type: str = ""  # "Conv2d"
    source: str = ""  # "file.py:LINE code"


@dataclass
class FxGraph:
    nodes: list[FxNode]

    def __post_init__(self):
        self._index = {n.name: n for n in self.nodes}

    def node(self, name: str) -> FxNode:
        try:
            return self._index[name]
        except KeyError:
            raise KeyError(f"no FX node named {name!r}") from None

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self):
        return iter(self.nodes)

    def to_networkx(self) -> nx.DiGraph:
        """Nodes keyed by name with attrs = asdict(FxNode); edge u->v carries u's first "shape"."""
        g = nx.DiGraph()
        for n in self.nodes:
            g.add_node(n.name, **asdict(n))
        for n in self.nodes:
            for a in n.args:
                if a in self._index and not g.has_edge(a, n.name):
                    src = self._index[a]
                    g.add_edge(a, n.name, shape=src.shapes[0] if src.shapes else None,
                               dtype=src.dtypes[0] if src.dtypes else None)
        return g


@dataclass
class Captured:
    loaded: LoadedModel
    exported: torch.export.ExportedProgram | None  # already run_decompositions(); None for symbolic_trace
    graph: FxGraph
    seconds: float
    method: str = "export"  # one of CAPTURES
    fx_module: torch.fx.GraphModule | None = None  # the symbolic_trace graph module
    fallback: str = ""  # "" or the fallback that captured it when torch.export could not
    notes: tuple = ()  # what that fallback tried and assumed, for the log


CAPTURES = ("export", "symbolic_trace")


# ---------------------------------------------------------------------------------------------


def capture(loaded: LoadedModel, method: str = "export") -> Captured:
    """torch.export (non-strict) + run_decompositions(), then the FxGraph of that program; or,
    with method="symbolic_trace", the course's torch.fx.symbolic_trace graph."""
    if method == "symbolic_trace":
        return capture_symbolic_trace(loaded)
    if method != "export":
        raise CaptureError(f"unknown capture {method!r}", hint=f"choose one of {', '.join(CAPTURES)}")
    t0 = time.perf_counter()
    user_files = _user_files(loaded)
    if loaded.exported is not None:
        ep = loaded.exported
    else:
        try:
            ep = torch.export.export(loaded.module, tuple(loaded.example_inputs),
                                     dynamic_shapes=loaded.dynamic_shapes, strict=False)
        except Exception as e:  # torch raises many kinds
            from irviz.core.frontend.capture_fallbacks import fall_back

            return fall_back(loaded, _capture_error("torch.export failed", e, user_files), e, user_files,
                             finish=lambda ep, edit: _finish(loaded, ep, user_files, t0, edit),
                             symbolic_trace=capture_symbolic_trace)
    return _finish(loaded, ep, user_files, t0)


def _finish(loaded, ep, user_files, t0, edit=None) -> Captured:
    """run_decompositions(), then `edit` on the decomposed program, then its FxGraph."""
    try:
        ep = ep.run_decompositions()
    except Exception as e:
        raise _capture_error("Decomposing the exported program (run_decompositions) failed", e,
                             user_files) from None
    if edit is not None:
        ep = edit(ep)
    try:
        graph = build_fx_graph(ep, user_files)
    except Exception as e:  # a bug here should still reach the user as a stage error
        raise CaptureError(f"Could not read the exported graph: {type(e).__name__}: {e}",
                           hint="This is an irviz bug; please report it with the model file.",
                           detail=traceback.format_exc()) from None
    return Captured(loaded=loaded, exported=ep, graph=graph, seconds=time.perf_counter() - t0)


def build_fx_graph(ep, user_files: list[str] | None = None) -> FxGraph:
    """FxGraph view-model of an ExportedProgram's graph (decompose first to match the importer)."""
    kinds = _placeholder_kinds(ep)
    nodes = []
    for n in ep.graph.nodes:
        if n.op == "placeholder":
            kind = kinds.get(n.name, "input")
        elif n.op == "output":
            kind = "output"
        elif n.op == "get_attr":
            kind = "constant"
        else:
            kind = "op"
        inputs = [a.name for a in n.all_input_nodes]
        if n.op == "output":
            shapes, dtypes = [], []
            for a in n.all_input_nodes:
                s, d = _shapes_dtypes(a.meta.get("val"))
                shapes += s
                dtypes += d
        else:
            shapes, dtypes = _shapes_dtypes(n.meta.get("val"))
        mpath, mtype = _module_info(n.meta.get("nn_module_stack"))
        nodes.append(FxNode(
            name=n.name, op=n.op, target=_target_str(n), kind=kind,
            args=_ordered_arg_names(n) or inputs, arg_repr=_arg_repr(n),
            users=[u.name for u in n.users], shapes=shapes, dtypes=dtypes,
            module_path=mpath, module_type=mtype,
            source=_source(n.meta.get("stack_trace"), user_files or []),
        ))
    return FxGraph(nodes)


def capture_symbolic_trace(loaded: LoadedModel) -> Captured:
    """torch.fx.symbolic_trace of the nn.Module (the course's capture) + ShapeProp for shapes."""
    from torch.fx.passes.shape_prop import ShapeProp

    t0 = time.perf_counter()
    if loaded.exported is not None:
        raise CaptureError(f"{loaded.name} is a saved torch.export program (.pt2): symbolic_trace "
                           "needs the nn.Module itself",
                           hint="open the .py model file with --capture symbolic_trace, or use --capture export")
    user_files = _user_files(loaded)
    try:
        # a Tracer that keeps stack traces, so each node can point at its line in the model file
        tracer = torch.fx.Tracer()
        tracer.record_stack_traces = True
        graph = tracer.trace(loaded.module)
        gm = torch.fx.GraphModule(tracer.root, graph, type(loaded.module).__name__)
    except Exception as e:  # tracing raises many kinds (TraceError, TypeError, ...
        err = _capture_error("torch.fx.symbolic_trace failed", e, user_files)
        err.hint = ("symbolic_trace runs forward() on Proxy objects: control flow that depends on "
                    "tensor values, or calls it cannot trace, fail; rewrite that part, or use "
                    "--capture export (torch.export), which handles more models")
        raise err from None
    try:
        with torch.no_grad():
            ShapeProp(gm).propagate(*loaded.example_inputs)
    except Exception as e:
        err = _capture_error("Running the example inputs through the traced graph (ShapeProp) failed",
                             e, user_files)
        err.hint = ("the traced graph must run on get_model()'s example inputs; run "
                    "torch.fx.symbolic_trace(model)(*inputs) in plain Python to see the full error")
        raise err from None
    nodes = []
    named = dict(gm.named_modules())
    params = {n for n, _ in gm.named_parameters()}
    for n in gm.graph.nodes:
        kind = {"placeholder": "input", "output": "output"}.get(n.op, "op")
        mpath = mtype = ""
        if n.op == "get_attr":
            kind = "parameter" if n.target in params else "buffer"
        elif n.op == "call_module":
            mpath, mtype = n.target, type(named.get(n.target)).__name__
        else:
            mpath, mtype = _module_info(n.meta.get("nn_module_stack"))
        shapes, dtypes = _tensor_meta_shapes(n.meta.get("tensor_meta"))
        nodes.append(FxNode(
            name=n.name, op=n.op, target=_fx_target_str(n), kind=kind,
            args=_ordered_arg_names(n), arg_repr=_arg_repr(n), users=[u.name for u in n.users],
            shapes=shapes, dtypes=dtypes, module_path=mpath, module_type=mtype,
            source=_source(n.meta.get("stack_trace"), user_files),
        ))
    return Captured(loaded=loaded, exported=None, graph=FxGraph(nodes),
                    seconds=time.perf_counter() - t0, method="symbolic_trace", fx_module=gm)


def _fx_target_str(n) -> str:
    """What print_tabular shows as the target, spelled as the user wrote it: "linear0",
    "torch.matmul", "operator.add", "view"."""
    if isinstance(n.target, str):
        return n.target
    from torch.fx.node import _get_qualified_name

    try:
        name = _get_qualified_name(n.target)
    except Exception:
        return _target_str(n)
    return "operator." + name[len("_operator."):] if name.startswith("_operator.") else name


def _tensor_meta_shapes(tm) -> tuple[list[tuple], list[str]]:
    """Shapes and dtypes from ShapeProp's TensorMetadata (a NamedTuple) or nests of them."""
    from torch.fx.passes.shape_prop import TensorMetadata

    shapes: list[tuple] = []
    dtypes: list[str] = []

    def walk(v):
        if isinstance(v, TensorMetadata):
            shapes.append(tuple(int(d) for d in v.shape))
            dtypes.append(str(v.dtype).replace("torch.", ""))
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)

    walk(tm)
    return shapes, dtypes


# ---------------------------------------------------------------------------------------------
# node details


def _placeholder_kinds(ep) -> dict[str, str]:
    from torch.export.graph_signature import InputKind

    table = {
        InputKind.USER_INPUT: "input",
        InputKind.PARAMETER: "parameter",
        InputKind.BUFFER: "buffer",
        InputKind.CONSTANT_TENSOR: "constant",
        InputKind.CUSTOM_OBJ: "constant",
        InputKind.TOKEN: "input",
    }
    out = {}
    for spec in ep.graph_signature.input_specs:
        name = getattr(spec.arg, "name", None)
        if name:
            out[name] = table.get(spec.kind, "input")
    return out


def _target_str(n) -> str:
    t = n.target
    if isinstance(t, str):
        return t
    if isinstance(t, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return str(t)  # "aten.convolution.default"
    if t is operator.getitem:
        return "getitem"
    mod = getattr(t, "__module__", None) or ""
    name = getattr(t, "__qualname__", None) or getattr(t, "__name__", None) or str(t)
    if mod in ("_operator", "operator", "builtins", ""):
        return name
    return f"{mod}.{name}"


def _ordered_arg_names(n) -> list[str]:
    """Input node names in argument order (flattening lists/tuples/kwargs), duplicates kept once."""
    out: list[str] = []

    def walk(a):
        if isinstance(a, torch.fx.Node):
            if a.name not in out:
                out.append(a.name)
        elif isinstance(a, (list, tuple)):
            for x in a:
                walk(x)
        elif isinstance(a, dict):
            for x in a.values():
                walk(x)

    walk(n.args)
    walk(n.kwargs)
    return out


def _short(a) -> str:
    if isinstance(a, torch.fx.Node):
        return a.name
    if isinstance(a, (list, tuple)):
        inner = ", ".join(_short(x) for x in a)
        return f"[{inner}]" if isinstance(a, list) else f"({inner}{',' if len(a) == 1 else ''})"
    if isinstance(a, dict):
        return "{" + ", ".join(f"{k}: {_short(v)}" for k, v in a.items()) + "}"
    if isinstance(a, torch.dtype):
        return str(a).replace("torch.", "")
    if isinstance(a, torch.Tensor):
        return f"tensor{tuple(a.shape)}"
    if isinstance(a, float):
        return repr(a)
    return str(a)


def _arg_repr(n) -> str:
    if n.op == "placeholder":
        return ""
    parts = [_short(a) for a in n.args] + [f"{k}={_short(v)}" for k, v in n.kwargs.items()]
    s = "(" + ", ".join(parts) + ")"
    return s if len(s) <= ARG_REPR_MAX else s[: ARG_REPR_MAX - 4] + " ...)"


def _shapes_dtypes(val) -> tuple[list[tuple], list[str]]:
    shapes: list[tuple] = []
    dtypes: list[str] = []

    def walk(v):
        if v is None:
            return
        if isinstance(v, torch.Tensor):
            shapes.append(tuple(d if isinstance(d, int) else _symdim(d) for d in v.shape))
            dtypes.append(str(v.dtype).replace("torch.", ""))
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
        elif isinstance(v, (torch.SymInt, int)) and not isinstance(v, bool):
            shapes.append(())
            dtypes.append("int64")
        elif isinstance(v, (torch.SymFloat, float)):
            shapes.append(())
            dtypes.append("float32" if isinstance(v, torch.SymFloat) else "float64")
        elif isinstance(v, (torch.SymBool, bool)):
            shapes.append(())
            dtypes.append("bool")

    walk(val)
    return shapes, dtypes


def _symdim(d) -> int | str:
    """A SymInt dim: its expression as str unless it is a plain constant."""
    node = getattr(d, "node", None)
    expr = getattr(node, "expr", None)
    if expr is not None:
        if getattr(expr, "is_number", False):
            return int(expr)
        return str(expr)
    return str(d)


_PREFIXES = (re.compile(r"^L\['self'\]\.?"), re.compile(r"^L__self___?"), re.compile(r"^self\.?"))


def _clean_path(path: str) -> str:
    """'L['self'].layer1[0].conv1' / 'L__self___layer1_0' -> 'layer1.0.conv1'."""
    p = path or ""
    for rx in _PREFIXES:
        p = rx.sub("", p)
    p = re.sub(r"\[['\"]?([^\]'\"]+)['\"]?\]", r".\1", p)  # [0] / ['key'] -> .0 / .key
    p = re.sub(r"\._modules\.", ".", p)
    p = re.sub(r"getattr\(([^,]+),\s*['\"]?([^'\")]+)['\"]?\)", r"\1.\2", p)
    return p.strip(".")


def _module_info(stack) -> tuple[str, str]:
    if not stack:
        return "", ""
    try:
        path, typ = list(stack.values())[-1]
    except (TypeError, ValueError):
        return "", ""
    typ = typ if isinstance(typ, str) else getattr(typ, "__qualname__", str(typ))
    return _clean_path(str(path)), typ.rsplit(".", 1)[-1]


_FRAME = re.compile(r'File "([^"]+)", line (\d+), in [^\n]*\n\s*([^\n]*)')


def _frames(stack_trace: str) -> list[tuple[str, int, str]]:
    return [(f, int(line), code.strip()) for f, line, code in _FRAME.findall(stack_trace or "")]


def _is_library(path: str) -> bool:
    p = path.replace("\\", "/")
    return "/site-packages/" in p or "/dist-packages/" in p or "/lib/python3" in p or p.startswith("<")


def _pick_frame(frames, user_files: list[str]):
    """Deepest frame in one of the user's files, else deepest non-library frame, else deepest."""
    if not frames:
        return None
    for fr in reversed(frames):
        if fr[0] in user_files or str(Path(fr[0]).resolve()) in user_files:
            return fr
    for fr in reversed(frames):
        if not _is_library(fr[0]):
            return fr
    return frames[0]  # outermost: usually the model's own forward


def _source(stack_trace, user_files: list[str]) -> str:
    fr = _pick_frame(_frames(stack_trace or ""), user_files)
    if fr is None:
        return ""
    f, line, code = fr
    return f"{Path(f).name}:{line} {code}".rstrip()


def _user_files(loaded: LoadedModel) -> list[str]:
    """Files that define the model's classes (for picking the user's line out of stack traces)."""
    import inspect

    torch_dir = str(Path(torch.__file__).resolve().parent)
    out = []
    for m in loaded.module.modules():
        try:
            f = inspect.getsourcefile(type(m))
        except (TypeError, OSError):
            continue
        if f and not str(Path(f).resolve()).startswith(torch_dir):
            f = str(Path(f).resolve())
            if f not in out:
                out.append(f)
    return out


# ---------------------------------------------------------------------------------------------
# errors


def _capture_error(what: str, e: BaseException, user_files: list[str]) -> CaptureError:
    text = str(e)
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), type(e).__name__)
    if len(first) > 300:
        first = first[:300] + "..."
    msg = f"{what}: {type(e).__name__}: {first}"
    bullet = next((ln.strip() for ln in text.splitlines() if ln.strip().startswith("- ")), None)
    if bullet:  # torch's constraint errors explain the problem in the first bullet
        msg += "\n    " + (bullet if len(bullet) <= 300 else bullet[:300] + "...")
    # where: a user frame in torch's message (it often embeds the user stack) or in the traceback
    frames = _frames(text)
    frames += [(fr.filename, fr.lineno, (fr.line or "").strip())
               for fr in traceback.extract_tb(e.__traceback__)]
    if user_files:
        user = [fr for fr in frames if fr[0] in user_files or str(Path(fr[0]).resolve()) in user_files]
    else:
        user = [fr for fr in frames if not _is_library(fr[0])]
    if user:
        f, line, code = user[-1]
        msg += f"\n    at {Path(f).name}:{line}" + (f": {code}" if code else "")
    op = re.search(r"\b(aten\.[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)?)", text)
    if op:
        msg += f"\n    op: {op.group(1)}"
    return CaptureError(msg, hint=_capture_hint(e, text), detail=traceback.format_exc())


def _capture_hint(e: BaseException, text: str) -> str:
    low = text.lower()
    if "data-dependent" in low or "data dependent" in low or "guardondatadependent" in type(e).__name__.lower():
        return ("forward() branches or sizes depend on tensor values, which torch.export cannot trace; "
                "use torch.cond / torch._check, or make the branch depend on shapes only.")
    if "dynamic_shapes" in low or "constraint" in low or "dim" in low and "specializ" in low:
        return ("The dynamic shapes from get_dynamic_shapes() do not fit the model; "
                "check the Dim ranges, or drop get_dynamic_shapes() to export static shapes.")
    if "unsupported" in low or "not supported" in low:
        return "The model uses something torch.export does not support; see the details and rewrite that part."
    return ("torch.export.export(model, example_inputs, strict=False) must succeed on the model; "
            "run it in plain Python to see the full error (Details has the traceback).")
