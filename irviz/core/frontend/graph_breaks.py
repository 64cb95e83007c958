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


RECOMPILE_LIMIT = 256


class GraphPiece(torch.nn.Module):
    """One graph of torch.compile's: its fixed inputs (parameters) held as buffers, the rest
    passed in."""

    def __init__(self, gm: torch.fx.GraphModule, fixed: dict[int, torch.Tensor], arity: int):
        super().__init__()
        self.gm, self.arity = gm, arity
        self.fixed_at = sorted(fixed)
        for i, t in fixed.items():
            self.register_buffer(f"fixed_{i}", t)

    def forward(self, *inputs):
        it = iter(inputs)
        args = [getattr(self, f"fixed_{i}") if i in self.fixed_at else next(it) for i in range(self.arity)]
        return self.gm(*args)


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


def _has_ops(gm) -> bool:
    return any(n.op in ("call_function", "call_method", "call_module") for n in gm.graph.nodes)
