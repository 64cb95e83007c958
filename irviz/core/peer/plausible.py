"""Whether a group's time can be true: the FLOPs its FX nodes must do, from their shapes, over the
time a side gives the group, held against the CPU's measured FMA peak. A rate above the peak (by
more than the peak's own noise, MARGIN) cannot be: the kernels timed for the group are not the ones
that computed it (a provenance that paired a call with the wrong FX nodes), so the group is marked
unsure and left out of who is faster.

The count is a lower bound, so that a group is never marked for work it may not do: a convolution
2·|out|·(C_in/groups)·|kernel| (a transposed one 2·|in|·(C_out/groups)·|kernel|), a
matrix product 2·|out|·K (mm, bmm, addmm, baddbmm, linear, matmul), an arithmetic op that computes
each element of its result (softmax, layer norm, GELU, add, multiply...) one per element, as if an
element cost one FLOP of the FMA peak (it costs more); views, copies and the rest count nothing. The
last catches a group whose provenance gave, say, BERT's softmax to a permute kernel of µs: 196,608
elements in 0.4 µs cannot be.
"""
from __future__ import annotations

import math

__all__ = ["MARGIN", "group_flop", "implausible", "node_flop"]

# Over the peak by more than this: mkldnn's convolutions run at up to 97% of the measured peak on
# ResNet-18 (2 threads, quiet), and the peak itself reads a few % lower on a busy machine, so a
# true figure can pass it a little; a call paired with the wrong FX nodes passes it 2-8x.
MARGIN = 1.25

_CONV = ("convolution", "_convolution", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
         "conv_transpose3d")
_MATMUL = {"mm": 0, "bmm": 0, "matmul": 0, "addmm": 1, "baddbmm": 1, "linear": 0, "addbmm": 1}
_PER_ELEMENT = {"_softmax", "softmax", "_log_softmax", "log_softmax", "native_layer_norm", "layer_norm",
                "gelu", "silu", "sigmoid", "tanh", "exp", "add", "sub", "mul", "div", "rsqrt", "pow",
                "_safe_softmax", "native_group_norm", "group_norm"}


def _op(target: str) -> str:
    parts = str(target).split(".")
    return parts[1] if len(parts) >= 2 and parts[0] in ("aten", "torch") else parts[-1]


def _ints(shape) -> tuple[int, ...] | None:
    if shape is None or not all(isinstance(d, int) for d in shape):
        return None  # symbolic sizes: no count rather than a guess
    return tuple(shape)


def node_flop(graph, name: str) -> float | None:
    """A lower bound on the FLOPs of FX node `name` (0 for an op not counted); None where the shapes
    are not known."""
    by = graph if isinstance(graph, dict) else {n.name: n for n in graph.nodes}
    n = by[name]
    op = _op(n.target)

    def shape(i):
        if i >= len(n.args) or n.args[i] not in by or not by[n.args[i]].shapes:
            return None
        return _ints(by[n.args[i]].shapes[0])

    out = _ints(n.shapes[0]) if n.shapes else None
    if op in _CONV:
        x, w = shape(0), shape(1)
        if out is None or w is None or len(w) < 3:
            return None
        # a convolution's weight is (out, in/groups, k...), a transposed one's (in, out/groups, k...):
        # the channels tell which, and where both fit the smaller count is taken
        forms = []
        if out[1] == w[0] and not op.startswith("conv_transpose"):
            forms.append(2.0 * math.prod(out) * math.prod(w[1:]))
        if x is not None and x[1] == w[0] and out[1] % w[1] == 0:
            forms.append(2.0 * math.prod(x) * math.prod(w[1:]))
        return min(forms) if forms else None
    if op in _MATMUL:
        a = shape(_MATMUL[op])
        if out is None or a is None or not a:
            return None
        return 2.0 * math.prod(out) * a[-1]
    if op in _PER_ELEMENT and out is not None and n.dtypes and str(n.dtypes[0]).startswith(("float", "torch.float")):
        return float(math.prod(out))
    return 0.0


def group_flop(graph, nodes: list[str]) -> float | None:
    """The group's FLOPs (lower bound); None where a counted op's shapes are not known."""
    by = {n.name: n for n in graph.nodes}
    flops = [node_flop(by, n) for n in nodes if n in by]
    return None if any(f is None for f in flops) else float(sum(flops))


def implausible(group: dict, peak_gflops: float | None) -> str | None:
    """Why a side's time for `group` (with "flop", "tvm_ms", "inductor_ms") cannot be true (its rate over
    MARGIN times `peak_gflops`), or None."""
    flop = group.get("flop")
    if not flop or not peak_gflops or peak_gflops <= 0:
        return None
    why = []
    for side, label in (("tvm", "TVM"), ("inductor", "Inductor")):
        ms = group.get(f"{side}_ms")
        if not ms or ms < 0:  # a time under the profiler's resolution says nothing of the rate
            continue
        rate = flop / (ms * 1e-3) / 1e9
        if rate > peak_gflops * MARGIN:
            why.append(f"{label}'s {ms:.3f} ms for {flop / 1e9:.3g} GFLOP is {_rate(rate)}, "
                       f"{rate / peak_gflops:.1f}x the measured peak ({peak_gflops:.0f} GFLOP/s): the kernels "
                       "timed for it are not the ones that computed it")
    return "; ".join(why) or None


def _rate(gflops: float) -> str:
    return f"{gflops / 1000:.1f} TFLOP/s" if gflops >= 1000 else f"{gflops:.0f} GFLOP/s"
