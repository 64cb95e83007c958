"""Library dispatch: the course's `call_dps_packed` into registered functions, done as a pass.

High-level Relax ops that torch runs well (conv2d, matmul — which covers linear and batched matmul)
become `R.call_dps_packed("irviz.torch.<op>.<attrs>", ...)` (named as ``library_names`` says);
everything else is left for LegalizeOps to lower to TensorIR (the course's "mixture"). The build
registers the torch functions those names stand for (``backend.library_functions``).
"""
from __future__ import annotations

import tvm
from tvm import relax

from irviz.core.library_names import MATMUL, conv2d_name
from irviz.core.tuning.library_or_tir import library_or_tir, mixture_or_tir, with_decisions
from irviz.core.tvm_compat import static_shape as _shape
from irviz.core.views.decisions import describe_decision


def _ints(arr) -> list[int]:
    return [int(x) for x in arr]


def _static_float32(ty) -> bool:
    return (isinstance(ty, relax.TensorType) and ty.dtype == "float32" and ty.shape is not None
            and all(isinstance(d, tvm.tirx.IntImm) for d in ty.shape.values))


def conv2d_reason(call) -> str | None:
    """Why a conv2d call cannot go to torch (None when it can)."""
    a = call.attrs
    if (a.data_layout, a.kernel_layout, a.out_layout or a.data_layout) != ("NCHW", "OIHW", "NCHW"):
        return f"layout {a.data_layout}/{a.kernel_layout} (torch takes NCHW/OIHW)"
    pad = _ints(a.padding)
    if len(pad) == 4 and (pad[0] != pad[2] or pad[1] != pad[3]):
        return f"asymmetric padding {pad}"
    if a.out_dtype is not None and str(a.out_dtype) not in ("", "float32", "void"):
        return f"out_dtype {a.out_dtype}"
    if not all(_static_float32(x.ty) for x in (*call.args, call)):
        return "needs static float32 shapes"
    return None


@relax.expr_functor.mutator
class _Dispatcher(relax.PyExprMutator):
    def __init__(self, mod, ops, min_macs=0, keep_tileable_conv=False, measure=False):
        super().__init__(mod)
        self.measure = measure
        self.decisions: list[dict] = []  # measured choices, kept on the module for the views
        self.mod_ = mod
        self.ops = set(ops)
        self.min_macs = int(min_macs)
        self.keep_tileable_conv = keep_tileable_conv
        self.conv2d = tvm.ir.Op.get("relax.nn.conv2d")
        self.matmul = tvm.ir.Op.get("relax.matmul")
        self.skipped: list[str] = []  # "op: reason", so the user sees why an op stayed in TensorIR

    def transform(self):
        for gv, func in self.mod_.functions.items():
            if isinstance(func, relax.Function) and not _is_primitive(func):
                self.builder_.update_func(gv, self.visit_expr(func))
        out = self.builder_.get()
        if self.decisions:
            out, whole = mixture_or_tir(self.mod_, out, self.decisions)
            out = with_decisions(out, self.decisions + ([whole] if whole else []))
        return out

    def _measured_tir(self, call) -> bool:
        """Measure this call as a torch call and as TensorIR on this machine; True to keep TensorIR."""
        if not self._dispatchable(call):
            return False
        rec = library_or_tir(call, lambda m: library_dispatch((call.op.name.split(".")[-1],))(m))
        self.decisions.append(rec)
        if rec["choice"] == "tir":
            self.skipped.append(f"{call.op.name}: measured {describe_decision(rec)}")
            return True
        return False

    def _dispatchable(self, call) -> bool:
        if call.op == self.conv2d:
            return "conv2d" in self.ops and conv2d_reason(call) is None
        return "matmul" in self.ops and _matmul_ok(call)

    def visit_call_(self, call):
        call = self.visit_expr_post_order(call)
        if call.op in (self.conv2d, self.matmul) and self.measure:
            if self._measured_tir(call):
                return call
        elif call.op in (self.conv2d, self.matmul) and self.min_macs > 0:
            macs = _macs(call)
            if macs is not None and macs < self.min_macs:
                self.skipped.append(f"{call.op.name}: {macs} multiply-adds < min_macs {self.min_macs}")
                return call
        if call.op == self.conv2d and "conv2d" in self.ops:
            if self.keep_tileable_conv and not self.measure and tileable_conv2d(call):
                self.skipped.append("conv2d: CPUTileConv2d schedules it faster than the library call")
                return call
            reason = conv2d_reason(call)
            if reason is None:
                return relax.call_dps_packed(conv2d_name(call), relax.Tuple(list(call.args)), out_ty=call.ty)
            self.skipped.append(f"conv2d: {reason}")
        elif call.op == self.matmul and "matmul" in self.ops:
            if _matmul_ok(call):
                return relax.call_dps_packed(MATMUL, relax.Tuple(list(call.args)), out_ty=call.ty)
            self.skipped.append("matmul: needs static float32 operands of rank >= 2")
        return call


def _matmul_ok(call) -> bool:
    return all(_static_float32(x.ty) for x in (*call.args, call)) and all(
        len(x.ty.shape.values) >= 2 for x in call.args)


def _macs(call) -> int | None:
    """Multiply-adds of a conv2d/matmul call (None when a shape is not static)."""
    out, a = _shape(call.ty), _shape(call.args[0].ty)
    w = _shape(call.args[1].ty)
    if out is None or a is None or w is None:
        return None
    n_out = 1
    for d in out:
        n_out *= d
    if call.op.name == "relax.nn.conv2d":  # OIHW weight: each output sums I/groups × H × W products
        return n_out * w[1] * w[2] * w[3] if len(w) == 4 else None
    return n_out * a[-1]  # matmul: contraction over the last axis of the first operand


def tileable_conv2d(call) -> bool:
    """Whether CPUTileConv2d will block this conv2d (NCHW/OIHW, groups 1, static shapes, output
    channels a multiple of 4). On a 2-core Xeon those ran ResNet-18 in ~0.6× torch's time against
    ~0.8× with the convolutions sent to torch (whose NCHW conv re-lays-out its weight every call)."""
    a = call.attrs
    if (a.data_layout, a.kernel_layout, a.out_layout or a.data_layout) != ("NCHW", "OIHW", "NCHW"):
        return False
    out = _shape(call.ty)
    return int(a.groups) == 1 and out is not None and len(out) == 4 and out[1] % 4 == 0


def _is_primitive(func) -> bool:
    return func.attrs is not None and "Primitive" in func.attrs.keys() and int(func.attrs["Primitive"]) != 0


# Below this many multiply-adds a scheduled TensorIR kernel (a few µs) beats a call into torch,
# which costs ~20 µs (packed-function callback, three DLPack views); measured on the GPT sample:
# 16×64×256 matmuls took 11 µs in TensorIR, 25 µs through torch; ResNet-18's 512×1000 linear
# took 370 µs in TensorIR, ~70 µs through torch.
DEFAULT_MIN_MACS = 300_000


def library_dispatch(ops=("conv2d", "matmul"), min_macs: int = 0, keep_tileable_conv: bool = False,
                     measure: bool = False):
    """Module pass: send `ops` to torch through call_dps_packed; the rest stays for TensorIR.

    `measure`: decide each call by timing it both ways on this machine (``tuning.library_or_tir``; cached per
    machine), instead of `min_macs` / `keep_tileable_conv`.

    `min_macs` > 0: only calls with at least that many multiply-adds go to torch (smaller ones are
    faster as TensorIR than the library call's own overhead).
    `keep_tileable_conv`: leave the conv2d that CPUTileConv2d blocks to TensorIR (they beat torch's
    conv at batch 1); grouped/depthwise convs and odd channel counts still go to torch."""

    @tvm.ir.transform.module_pass(opt_level=0, name="LibraryDispatch")
    def _pass(mod, ctx):
        return _Dispatcher(mod, ops, min_macs, keep_tileable_conv, measure).transform()

    return _pass

