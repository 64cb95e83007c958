"""The last capture fallback: the model cut at torch.compile's graph breaks, one model per piece.

When neither torch.export nor irviz's other fallbacks capture the whole model, TorchDynamo
(``torch.compile``) still can in pieces: where it meets code it cannot trace (a data-dependent
branch, a ``.tolist()``, a call into NumPy) it ends the graph, runs that code in Python, and
starts a new graph after it.  ``split_at_graph_breaks`` runs the model once in eager torch under
``torch.compile`` with a backend that keeps each graph it is given and the real tensors it was
first called with, and returns every graph as a LoadedModel of its own: the graph's parameters
become the module's buffers (weights, as in a whole model), its other inputs its example inputs.
Each is then captured, imported, built and compared with torch like any model (the code between
the graphs is not: it runs in Python, not in TVM).
"""
from __future__ import annotations

import torch

from irviz.core.errors import CaptureError
from irviz.core.frontend.model_file import LoadedModel

FALLBACK = "graph breaks as separate subgraphs"


RECOMPILE_LIMIT = 256


class GraphPiece(torch.nn.Module):
    """One graph of torch.compile's: its fixed inputs (parameters) held as buffers, named after
    the model's own ("a_weight" for self.a.weight), the rest passed in."""

    def __init__(self, gm: torch.fx.GraphModule, fixed: dict[int, torch.Tensor], arity: int):
        super().__init__()
        self.gm, self.arity = gm, arity
        placeholders = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
        self.fixed_names: dict[int, str] = {}
        for i, t in sorted(fixed.items()):
            name = _weight_name(placeholders[i]) if i < len(placeholders) else ""
            if not name.isidentifier() or hasattr(self, name) or name in self.fixed_names.values():
                name = f"fixed_{i}"
            self.fixed_names[i] = name
            self.register_buffer(name, t)

    def forward(self, *inputs):
        it = iter(inputs)
        args = [getattr(self, self.fixed_names[i]) if i in self.fixed_names else next(it)
                for i in range(self.arity)]
        return self.gm(*args)


def _weight_name(placeholder: str) -> str:
    """'a_weight' for TorchDynamo's 'l_self_modules_a_parameters_weight_'."""
    name = placeholder.removeprefix("l_self_").removeprefix("L_self_").rstrip("_")
    for part in ("modules_", "parameters_", "buffers_"):
        name = name.replace(part, "")
    return name


def split_at_graph_breaks(loaded: LoadedModel) -> list[LoadedModel]:
    """Every graph torch.compile makes of `loaded` on its example inputs, in the order they ran,
    as LoadedModels; CaptureError when torch.compile fails or makes none with an op."""
    import torch._dynamo

    pieces: list[dict] = []

    def keep(gm, example_inputs):
        rec = {"gm": gm, "args": None}
        pieces.append(rec)

        def first_call(*args):
            if rec["args"] is None:
                rec["args"] = [(isinstance(a, torch.nn.Parameter),
                                a.detach().clone() if isinstance(a, torch.Tensor) else a) for a in args]
            return gm(*args)

        return first_call

    torch._dynamo.reset()
    try:
        compiled = torch.compile(loaded.module, backend=keep, dynamic=False, fullgraph=False)
        # a frame met with a new shape is compiled again, and past torch's recompile limit (8)
        # it runs eagerly, in no graph: Encodec's convolution runs at a dozen lengths
        with torch.no_grad(), torch._dynamo.config.patch(recompile_limit=RECOMPILE_LIMIT,
                                                          accumulated_recompile_limit=RECOMPILE_LIMIT * 8):
            compiled(*loaded.example_inputs)
    except Exception as e:  # torch raises many kinds
        raise CaptureError(f"torch.compile could not run the model: {type(e).__name__}: "
                           f"{str(e).splitlines()[0] if str(e) else ''}") from None
    finally:
        torch._dynamo.reset()
    out = []
    ran = [p for p in pieces if p["args"] is not None and _has_ops(p["gm"])]
    for k, p in enumerate(ran, 1):
        fixed = {i: t for i, (is_param, t) in enumerate(p["args"]) if is_param}
        inputs = tuple(t for i, (_, t) in enumerate(p["args"]) if i not in fixed)
        if not all(isinstance(t, torch.Tensor) for t in inputs):
            raise CaptureError(f"graph {k} of {len(ran)} takes a non-tensor input "
                               f"({', '.join(type(t).__name__ for t in inputs if not isinstance(t, torch.Tensor))})")
        module = GraphPiece(p["gm"], fixed, len(p["args"])).eval()
        out.append(LoadedModel(module=module, example_inputs=inputs, spec=f"{loaded.spec} graph {k}",
                               name=f"{loaded.name} graph {k} of {len(ran)}"))
    if not out:
        raise CaptureError("torch.compile made no graph with an op of the model")
    return out


def split_quietly(loaded: LoadedModel) -> list[LoadedModel]:
    """split_at_graph_breaks without torch._dynamo's graph-break warnings (what this is about)."""
    import logging

    dynamo_log = logging.getLogger("torch._dynamo")
    level = dynamo_log.level
    dynamo_log.setLevel(logging.ERROR)
    try:
        return split_at_graph_breaks(loaded)
    finally:
        dynamo_log.setLevel(level)


def tried_before(error: CaptureError | str) -> list[str]:
    """The numbered lines of a capture error that lists the fallbacks it tried ("1. torch.export
    (non-strict): ..."), without their numbers; [] when it lists none."""
    text = error.message if isinstance(error, CaptureError) else str(error or "")
    out = []
    for ln in text.splitlines()[1:]:
        head, dot, rest = ln.strip().partition(". ")
        if dot and head.isdigit():
            out.append(rest)
    return out


def used_note(error: CaptureError | str, count: int) -> str:
    """What the log and the state say when the graph breaks are what captured the model."""
    text = error.message if isinstance(error, CaptureError) else str(error or "")
    why = "; ".join(tried_before(text)) or text.splitlines()[0]
    return f"captured with {FALLBACK} ({count} graphs; nothing captured the whole model: {why})"


def with_tried_line(message: str, split_error: BaseException) -> str:
    """`message` (what the whole-model captures said, their tries numbered) with the graph breaks
    as its last try, and why they failed too."""
    why = split_error.message if isinstance(split_error, CaptureError) else \
        f"{type(split_error).__name__}: {split_error}"
    n = len(tried_before(message))
    return f"{message}\n  {f'{n + 1}.' if n else 'then tried'} {FALLBACK}: {why.splitlines()[0]}"


def nothing_captured(error: CaptureError, split_error: BaseException) -> CaptureError:
    """One CaptureError for everything that was tried, the graph breaks last."""
    hint = error.hint or ("change the model so that torch.export can capture it (the data-dependent "
                          "line named above), or capture its parts in a model file of their own")
    return CaptureError(with_tried_line(error.message, split_error), hint=hint, detail=error.detail)


def ops_of(piece: LoadedModel) -> int:
    """How many ops a piece's graph holds (its size as torch.compile gave it)."""
    gm = getattr(piece.module, "gm", None)
    return sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")) \
        if gm is not None else 0


def _has_ops(gm) -> bool:
    return any(n.op in ("call_function", "call_method", "call_module") for n in gm.graph.nodes)
