"""The course's own Relax passes, written the course's way (relax.PyExprMutator).

* ``EwiseFMA``        multiply + add  ->  R.ewise_fma, then remove_all_unused (chapter "Pattern
                      Matching and Rewriting").
* ``MatmulAddFuse``   matmul + add  ->  call of a new ``Primitive`` sub-function
                      ``fused_matmul_addN`` (chapter "Fuse Linear and ReLU").
* ``LowerToTensorIR`` high-level ops -> ``call_tir`` of TOPI-generated PrimFuncs via
                      ``bb.call_te`` (chapter "Map to TensorIR Calls"); follow it with FuseTIR.

``R.ewise_fma`` has no legalization in TVM 0.27; ``backend.legalize.CUSTOM_LEGALIZE_MAP`` supplies
one and irviz's LegalizeOps pass always passes it, so ``EwiseFMA -> LegalizeOps`` builds.

Plain TVM + Python: never imports Qt.
"""
from __future__ import annotations

import tvm
import tvm_ffi
from tvm import IRModule, relax, topi

from irviz.core.backend.legalize import te_ewise_fma
from irviz.core.passes.registry import pass_note

__all__ = [
    "EwiseFMA",
    "EwiseFMARewriter",
    "LOWER_OP_MAP",
    "LowerToTensorIR",
    "LowerToTensorIRMutator",
    "MatmulAddFuse",
    "MatmulAddFusor",
]


def _is_primitive(func) -> bool:
    attrs = func.attrs
    return attrs is not None and "Primitive" in attrs.keys() and int(attrs["Primitive"]) != 0


def _tensor_ty(expr):
    ty = getattr(expr, "ty", None)
    return ty if isinstance(ty, relax.TensorType) else None


def _same_shape_dtype(*exprs) -> bool:
    """True when all are tensors of one dtype with the same known shape (what ewise_fma needs)."""
    tys = [_tensor_ty(e) for e in exprs]
    if any(t is None or t.shape is None for t in tys):
        return False
    first = tys[0]
    return all(
        t.dtype == first.dtype and tvm_ffi.structural_equal(t.shape, first.shape) for t in tys[1:]
    )


# ---------------------------------------------------------------------------------------------
# EwiseFMA


@relax.expr_functor.mutator
class EwiseFMARewriter(relax.PyExprMutator):
    """add(multiply(a, b), c) -> ewise_fma(a, b, c), as in the course."""

    def __init__(self, mod: IRModule | None = None) -> None:
        super().__init__(mod)
        self.add_op = tvm.ir.Op.get("relax.add")
        self.multiply_op = tvm.ir.Op.get("relax.multiply")
        self.ewise_fma_op = tvm.ir.Op.get("relax.ewise_fma")

    def visit_call_(self, call):
        call = self.visit_expr_post_order(call)
        if call.op != self.add_op:
            return call
        # the course matches add(multiply(a, b), c); add is commutative, so also accept
        # add(c, multiply(a, b)) (what the PyTorch importer emits for addmm-like code)
        for mul_side in (0, 1):
            value = self._bound_call(call.args[mul_side], self.multiply_op)
            if value is not None:
                break
        else:
            return call
        a, b, c = value.args[0], value.args[1], call.args[1 - mul_side]
        # ewise_fma has no broadcasting: only rewrite when all three agree (else TVM rejects it)
        if not _same_shape_dtype(a, b, c, call):
            return call
        return relax.Call(self.ewise_fma_op, [a, b, c], None, None)

    def _bound_call(self, expr, op):
        if not isinstance(expr, relax.Var):  # lookup_binding only takes a Var
            return None
        value = self.lookup_binding(expr)
        return value if isinstance(value, relax.Call) and value.op == op else None


@tvm.ir.transform.module_pass(opt_level=0, name="EwiseFMA")
class EwiseFMA:
    """Rewrite multiply+add into R.ewise_fma in every non-primitive Relax function."""

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        rewriter = EwiseFMARewriter(mod)
        for global_var, func in mod.functions.items():
            if not isinstance(func, relax.Function) or _is_primitive(func):
                continue
            updated = rewriter.visit_expr(func)
            updated = relax.analysis.remove_all_unused(updated)
            rewriter.builder_.update_func(global_var, updated)
        return rewriter.builder_.get()


# ---------------------------------------------------------------------------------------------
# MatmulAddFuse


def _static_2d_or_bias(expr) -> bool:
    """A tensor of rank 1 or 2 whose every size is known."""
    ty = _tensor_ty(expr)
    if ty is None or ty.shape is None or ty.ndim not in (1, 2):
        return False
    return all(isinstance(d, tvm.tirx.IntImm) for d in ty.shape.values)


@relax.expr_functor.mutator
class MatmulAddFusor(relax.PyExprMutator):
    """The course's fusor: add(matmul(x, w), b) -> fused_matmul_addN(x, w, b), Primitive=1."""

    def __init__(self, mod: IRModule) -> None:
        super().__init__(mod)
        self.mod_ = mod
        self.add_op = tvm.ir.Op.get("relax.add")
        self.matmul_op = tvm.ir.Op.get("relax.matmul")
        self.counter = 0
        self._taken = {gv.name_hint for gv in mod.get_global_vars()}
        self.fused = 0
        self.skipped: list[str] = []  # why an add(matmul(x, w), b) was left alone

    def transform(self) -> IRModule:
        for global_var, func in self.mod_.functions.items():
            if not isinstance(func, relax.Function) or _is_primitive(func):
                continue
            updated_func = self.visit_expr(func)
            updated_func = relax.analysis.remove_all_unused(updated_func)
            self.builder_.update_func(global_var, updated_func)
        return self.builder_.get()

    def _next_name(self) -> str:
        while f"fused_matmul_add{self.counter}" in self._taken:
            self.counter += 1
        name = f"fused_matmul_add{self.counter}"
        self._taken.add(name)
        self.counter += 1
        return name

    def visit_call_(self, call):
        call = self.visit_expr_post_order(call)

        def match_call(node, op):
            return isinstance(node, relax.Call) and node.op == op

        if not match_call(call, self.add_op):
            return call
        # course: add(matmul(x, w), b); also add(b, matmul(x, w)) as the PyTorch importer
        # writes aten.addmm
        value, b = None, None
        for mm_side, other in ((0, 1), (1, 0)):
            arg = call.args[mm_side]
            if isinstance(arg, relax.Var):  # lookup_binding only takes a Var
                bound = self.lookup_binding(arg)
                if bound is not None and match_call(bound, self.matmul_op):
                    value, b = bound, call.args[other]
                    break
        if value is None:
            return call
        x, w = value.args[0], value.args[1]
        why = _not_fusable(x, w, b)
        if why is not None:
            # the course's dense pattern only: LowerToTensorIR cannot lower a batched matmul inside
            # the sub-function, and a symbolic size loses the result's shape (CallTIRRewrite fails)
            self.skipped.append(why)
            return call
        param_x = relax.Var("x", relax.TensorType(x.ty.shape, x.ty.dtype))
        param_w = relax.Var("w", relax.TensorType(w.ty.shape, w.ty.dtype))
        param_b = relax.Var("b", relax.TensorType(b.ty.shape, b.ty.dtype))
        out_dtype = value.attrs.out_dtype if value.attrs is not None else None
        bb = relax.BlockBuilder()
        fn_name = self._next_name()
        with bb.function(fn_name, [param_x, param_w, param_b]):
            with bb.dataflow():
                lv0 = bb.emit(relax.op.matmul(param_x, param_w, out_dtype=out_dtype))
                gv = bb.emit_output(relax.op.add(lv0, param_b))
            bb.emit_func_output(gv)
        fused_fn = bb.get()[fn_name].with_attr("Primitive", 1)
        global_var = self.builder_.add_func(fused_fn, fn_name)
        self.fused += 1
        return relax.Call(global_var, [x, w, b], None, None)


def _shape_text(expr) -> str:
    ty = _tensor_ty(expr)
    if ty is None or ty.shape is None:
        return "?"
    dims = [str(int(d)) if isinstance(d, tvm.tirx.IntImm) else str(d) for d in ty.shape.values]
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


def _not_fusable(x, w, b) -> str | None:
    """Why add(matmul(x, w), b) is outside the course's pattern, or None when it fits."""
    shapes = f"matmul {_shape_text(x)} x {_shape_text(w)} + {_shape_text(b)}"
    tys = [_tensor_ty(e) for e in (x, w, b)]
    if any(t is None or t.shape is None for t in tys):
        return f"{shapes}: left alone, its operands' shapes are unknown"
    if tys[0].ndim != 2 or tys[1].ndim != 2:
        return f"{shapes}: left alone, MatmulAddFuse matches 2-D matmul only (x and w of rank 2)"
    if tys[2].ndim not in (1, 2):
        return f"{shapes}: left alone, the bias must be of rank 1 or 2"
    if not all(_static_2d_or_bias(e) for e in (x, w, b)):
        return f"{shapes}: left alone, MatmulAddFuse needs every size known (no symbolic sizes)"
    return None


@tvm.ir.transform.module_pass(opt_level=2, name="MatmulAddFuse")
class MatmulAddFuse:
    """Fuse matmul+add pairs into Primitive sub-functions fused_matmul_add0, 1, ..."""

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        fusor = MatmulAddFusor(mod)
        out = fusor.transform()
        for why in fusor.skipped:
            pass_note(why)
        if not fusor.fused and not fusor.skipped:
            pass_note("no add(matmul(x, w), b) in the module")
        return out


# ---------------------------------------------------------------------------------------------
# LowerToTensorIR


def _ndim(expr) -> int:
    ty = _tensor_ty(expr)
    return -1 if ty is None else ty.ndim


def map_matmul(bb, call):
    x, w = call.args
    if _ndim(x) != 2 or _ndim(w) != 2:
        return None  # topi.nn.matmul is 2-D only; leave it to LegalizeOps
    out_dtype = call.attrs.out_dtype if call.attrs is not None else None
    if out_dtype and str(out_dtype) not in ("", "void", x.ty.dtype):
        return None
    return bb.call_te(topi.nn.matmul, x, w)


def _binary(fn):
    def lower(bb, call):
        a, b = call.args
        if _tensor_ty(a) is None or _tensor_ty(b) is None:
            return None
        return bb.call_te(fn, a, b)

    return lower


def _unary(fn):
    def lower(bb, call):
        if _tensor_ty(call.args[0]) is None:
            return None
        return bb.call_te(fn, call.args[0])

    return lower


def map_permute_dims(bb, call):
    axes = call.attrs.axes if call.attrs is not None else None
    axes = None if axes is None else [int(a) for a in axes]
    return bb.call_te(topi.transpose, call.args[0], axes)


def map_ewise_fma(bb, call):
    if not _same_shape_dtype(*call.args):
        return None
    return bb.call_te(te_ewise_fma, *call.args)


LOWER_OP_MAP = {
    "relax.matmul": map_matmul,
    "relax.add": _binary(topi.add),
    "relax.subtract": _binary(topi.subtract),
    "relax.multiply": _binary(topi.multiply),
    "relax.nn.relu": _unary(topi.nn.relu),
    "relax.permute_dims": map_permute_dims,
    "relax.ewise_fma": map_ewise_fma,
    "relax.exp": _unary(topi.exp),
    "relax.tanh": _unary(topi.tanh),
    "relax.sigmoid": _unary(topi.sigmoid),
}


@relax.expr_functor.mutator
class LowerToTensorIRMutator(relax.PyExprMutator):
    """The course's LowerToTensorIR: op_map[op](bb, call) -> bb.call_te(topi..., args).

    A mapping function may return None to leave a call alone (e.g. a 3-D matmul).
    """

    def __init__(self, mod: IRModule, op_map=None) -> None:
        super().__init__(mod)
        self.mod_ = mod
        op_map = LOWER_OP_MAP if op_map is None else op_map
        self.op_map = {tvm.ir.Op.get(k): v for k, v in op_map.items()}

    def visit_call_(self, call):
        call = self.visit_expr_post_order(call)
        lower = self.op_map.get(call.op) if isinstance(call.op, tvm.ir.Op) else None
        if lower is not None:
            new = lower(self.builder_, call)
            if new is not None:
                return new
        return call

    def transform(self) -> IRModule:
        for global_var, func in self.mod_.functions.items():
            if not isinstance(func, relax.Function):
                continue
            updated_func = self.visit_expr(func)
            self.builder_.update_func(global_var, updated_func)
        return self.builder_.get()


@tvm.ir.transform.module_pass(opt_level=0, name="LowerToTensorIR")
class LowerToTensorIR:
    """Lower matmul/add/relu/permute_dims/... to call_tir of TOPI PrimFuncs (course op map)."""

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        return LowerToTensorIRMutator(mod, LOWER_OP_MAP).transform()
