"""Outputs that cannot match PyTorch by nature, told apart from a compiler's wrong numbers.

When a compiled module's outputs differ from torch, three causes are no fault of the compiler:

* a **random op** (``aten.rand``, ``normal``, ``bernoulli``, dropout in train mode, ...): TVM and
  torch draw from different generators.  Found in the captured graph, or seen as torch's own two
  runs on the same inputs giving different outputs.
* a **write whose result depends on order**: ``index_put`` / ``scatter`` with duplicate indices
  and no accumulation keep whichever write lands last, and the two runtimes need not agree on
  which.  The indices are only known at run time, so the captured graph is interpreted on the
  actual inputs and every such write's indices are counted.
* a **top-k among equal values**: which of several tied elements ``topk`` picks (and in what
  order) is each library's own choice; a mixture-of-experts router whose weights start at zero
  (AFMoE's) scores every expert the same, and torch and TVM route tokens to different experts.
  Counted, like the writes, on the actual inputs: the rows whose k+1 largest (or smallest) values
  hold a tie.
* **uninitialized memory** returned as an output (``aten.empty`` and the like): whatever the
  allocator handed out.
* an op that **mutates its input**: compared on fresh copies of the inputs (``fresh``), so neither
  side sees what an earlier run left behind.  That one is prevented, not explained.

``explain(module, inputs, program)`` returns the reason ("random op aten.rand",
"order-dependent: 3 duplicate indices (aten.index_put)") or None when the difference is genuine:
a genuine mismatch stays a mismatch.  It is called only after a comparison failed.
"""
from __future__ import annotations

from irviz.core.backend.outputs import flatten as _flatten

__all__ = ["explain", "fresh", "random_ops", "duplicate_writes", "torch_runs_differ"]

# ops whose outputs are random whatever their arguments
_RANDOM = frozenset({
    "bernoulli", "bernoulli_", "cauchy", "cauchy_", "exponential", "exponential_", "geometric",
    "geometric_", "log_normal", "log_normal_", "multinomial", "normal", "normal_", "poisson",
    "rand", "rand_like", "randint", "randint_like", "randn", "randn_like", "randperm", "random",
    "random_", "uniform", "uniform_", "_standard_gamma", "rrelu_with_noise", "rrelu_with_noise_",
    "rrelu_with_noise_functional", "_fused_dropout",
})
# random only with a dropout probability above zero (and, for dropout, in train mode)
_DROPOUT = frozenset({"dropout", "native_dropout", "alpha_dropout", "feature_dropout",
                      "feature_alpha_dropout"})
# allocate without initializing: returned as they are, their contents are whatever memory held
_UNINITIALIZED = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided",
                            "empty_permuted"})


def fresh(values):
    """A copy of every tensor in `values` (a tuple/list), so a run that mutates its inputs leaves
    the caller's tensors as they were."""
    import torch

    def copy(v):
        if isinstance(v, torch.Tensor):
            return v.detach().clone()
        if isinstance(v, (list, tuple)):
            return type(v)(copy(x) for x in v)
        if isinstance(v, dict):
            return {k: copy(x) for k, x in v.items()}
        return v

    return tuple(copy(v) for v in values)


def _op_name(node) -> str | None:
    target = getattr(node, "target", None)
    schema = getattr(target, "_schema", None)
    if schema is None:
        return None
    return schema.name.split("::")[-1]


def _arg(node, index: int, name: str, default=None):
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def _is_random(node) -> bool:
    name = _op_name(node)
    if name is None:
        return False
    if name in _RANDOM:
        return True
    if name in _DROPOUT:
        p, train = _arg(node, 1, "p", 0.0), _arg(node, 2, "train", True)
        return bool(train) and isinstance(p, (int, float)) and p > 0
    if name.startswith("_scaled_dot_product") or name == "scaled_dot_product_attention":
        p = _arg(node, 4, "dropout_p", 0.0)
        return isinstance(p, (int, float)) and p > 0
    return False


def random_ops(program) -> list[str]:
    """The random ops in an ExportedProgram's (or GraphModule's) graph, as "aten.NAME", in order."""
    graph = getattr(program, "graph", None)
    if graph is None:
        return []
    out: list[str] = []
    for node in graph.nodes:
        if node.op == "call_function" and _is_random(node):
            name = f"aten.{_op_name(node)}"
            if name not in out:
                out.append(name)
    return out


def uninitialized_outputs(program) -> list[str]:
    """Ops like aten.empty whose uninitialized result is returned as an output as it is."""
    graph = getattr(program, "graph", None)
    out: list[str] = []
    for node in graph.nodes if graph is not None else ():
        if node.op == "call_function" and _op_name(node) in _UNINITIALIZED \
                and any(u.op == "output" for u in node.users):
            name = f"aten.{_op_name(node)}"
            if name not in out:
                out.append(name)
    return out


def torch_runs_differ(module, inputs) -> bool:
    """Whether torch's own two runs on fresh copies of the same inputs give different outputs."""
    import torch

    with torch.no_grad():
        a = [x for x in _flatten(module(*fresh(inputs))) if isinstance(x, torch.Tensor)]
        b = [x for x in _flatten(module(*fresh(inputs))) if isinstance(x, torch.Tensor)]
    if len(a) != len(b):
        return True
    return any(x.shape != y.shape or not torch.equal(torch.nan_to_num(x), torch.nan_to_num(y))
               for x, y in zip(a, b))


# -- order-dependent writes -------------------------------------------------------------------

def _index_put_duplicates(target, indices) -> int:
    import torch

    idx = [i for i in indices if i is not None]
    if not idx or any(i.dtype == torch.bool for i in idx):
        return 0  # a mask names each position once
    try:
        idx = torch.broadcast_tensors(*idx)
    except RuntimeError:
        return 0
    dims = [d for d, i in enumerate(indices) if i is not None]
    cols = []
    for d, i in zip(dims, idx):
        size = target.shape[d] if d < target.dim() else 0
        cols.append(torch.remainder(i.reshape(-1).long(), max(1, size)))  # -1 is the last one
    rows = torch.stack(cols, dim=1)
    return int(rows.shape[0] - torch.unique(rows, dim=0).shape[0])


def _scatter_duplicates(dim: int, index) -> int:
    import torch

    if index.numel() == 0:
        return 0
    dim = dim % max(1, index.dim())
    grids = torch.meshgrid(*[torch.arange(s) for s in index.shape], indexing="ij")
    coords = [index.long() if d == dim else g for d, g in enumerate(grids)]
    rows = torch.stack([c.reshape(-1) for c in coords], dim=1)
    return int(rows.shape[0] - torch.unique(rows, dim=0).shape[0])


def _write_duplicates(node, args, kwargs) -> tuple[str, int] | None:
    """(op, duplicates) for a write that keeps one of several values for a position."""
    name = _op_name(node)
    if name in ("index_put", "index_put_", "_unsafe_index_put", "_index_put_impl", "_index_put_impl_"):
        accumulate = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
        if accumulate:
            return None
        return f"aten.{name}", _index_put_duplicates(args[0], list(args[1]))
    if name in ("scatter", "scatter_"):
        src = args[3] if len(args) > 3 else kwargs.get("src", kwargs.get("value"))
        reduce = args[4] if len(args) > 4 else kwargs.get("reduce")
        if reduce is not None or not hasattr(src, "shape"):
            return None  # a reduction, or one scalar written everywhere: order does not matter
        return f"aten.{name}", _scatter_duplicates(int(args[1]), args[2])
    if name in ("index_copy", "index_copy_"):
        index = args[2]
        return f"aten.{name}", int(index.numel() - _unique_count(index))
    return None


def _topk_ties(args, kwargs) -> int:
    """Rows of a topk's input whose k+1 best values hold two equal ones (with k+1 past the end:
    the k best), so which element is picked, or in which order, is the library's choice."""
    import torch

    x = args[0]
    k = int(args[1] if len(args) > 1 else kwargs["k"])
    dim = int(args[2] if len(args) > 2 else kwargs.get("dim", -1))
    largest = bool(args[3] if len(args) > 3 else kwargs.get("largest", True))
    if not isinstance(x, torch.Tensor) or x.dim() == 0 or x.numel() == 0 or k <= 0:
        return 0
    best = torch.sort(x.movedim(dim, -1), dim=-1, descending=largest).values[..., : k + 1]
    if best.shape[-1] < 2:
        return 0
    return int((best[..., 1:] == best[..., :-1]).any(dim=-1).sum())


def _unique_count(t) -> int:
    import torch

    return int(torch.unique(t).numel())


def duplicate_writes(program, inputs, tied: dict | None = None) -> tuple[str, int] | None:
    """Interpret the program on (fresh copies of) `inputs` and count, at every index_put / scatter
    / index_copy without accumulation, the indices that name a position already written by the
    same op. (op, total) of the ops that have any, or None.  `tied`, when given, gets the rows of
    each topk whose selection holds a tie ({"aten.topk": rows})."""
    import torch
    import torch.fx

    gm = program.module() if hasattr(program, "module") and callable(program.module) else program
    if not isinstance(gm, torch.fx.GraphModule):
        return None
    found: dict[str, int] = {}
    tied = {} if tied is None else tied

    class Counting(torch.fx.Interpreter):
        def run_node(self, n):
            if n.op == "call_function":
                args, kwargs = self.fetch_args_kwargs_from_env(n)
                try:
                    hit = _write_duplicates(n, args, kwargs)
                    if _op_name(n) == "topk":
                        tied["aten.topk"] = tied.get("aten.topk", 0) + _topk_ties(args, kwargs)
                except Exception:  # counting is best effort; the run itself decides
                    hit = None
                if hit and hit[1] > 0:
                    found[hit[0]] = found.get(hit[0], 0) + hit[1]
            return super().run_node(n)

    flat = [x for x in fresh(inputs) if isinstance(x, torch.Tensor)]
    try:
        with torch.no_grad():
            Counting(gm).run(*flat)
    except Exception:  # a graph the interpreter cannot run explains nothing
        return None
    if not found:
        return None
    return ", ".join(found), sum(found.values())


def explain(module, inputs, program=None) -> str | None:
    """Why `module`'s outputs cannot be expected to match a compiled version's, or None.

    `program`: the captured ExportedProgram (exported here, non-strict, when not given)."""
    if program is None:
        try:
            import torch

            program = torch.export.export(module, fresh(inputs), strict=False)
        except Exception:
            program = None
    ops = random_ops(program) if program is not None else []
    try:
        differ = torch_runs_differ(module, inputs)
    except Exception:  # the reference ran once already; this is only a second look
        differ = False
    if ops:
        return f"random op {', '.join(ops)}"
    empty = uninitialized_outputs(program) if program is not None else []
    if empty:
        return f"uninitialized memory returned ({', '.join(empty)})"
    if differ:
        return "random: PyTorch's own two runs on the same inputs differ"
    if program is not None:
        tied: dict[str, int] = {}
        dup = duplicate_writes(program, inputs, tied)
        if dup is not None:
            op, n = dup
            return f"order-dependent: {n} duplicate ind{'ex' if n == 1 else 'ices'} ({op} without accumulation)"
        rows = tied.get("aten.topk", 0)
        if rows:
            return (f"tied top-k: {rows} row{'' if rows == 1 else 's'} of aten.topk's input hold equal "
                    "values among the k+1 best, and which of them is picked is each library's choice")
    return None
