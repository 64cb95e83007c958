"""FoldConstant with the small injective calls evaluated by numpy instead of LLVM builds.

TVM's FoldConstant compiles and JIT-loads every PrimFunc it folds (about 0.1 s each here, even for
sixteen elements). A small Longformer or LED after LegalizeOps has 250-350 distinct such functions
on its constant masks and window indices, so the step took 24-45 s. This pass first replaces the
`call_tir`s whose arguments are all constants (directly or through calls folded before them) by
their values: computed by `tir_numpy` where it reproduces the compiled code bit for bit, else by
building and running that one function as TVM's pass does (cached by structure), so a refused
call in the middle of a chain does not hand the rest of the chain to LLVM. TVM's FoldConstant then
inlines those constants, folds what is left (calls that are not call_tir) and removes the dead
bindings. The result is the module TVM's pass gives, constant for constant.
"""
from __future__ import annotations

import tvm
from tvm import relax, tirx

from irviz.core.passes.registry import pass_note
from irviz.core.passes.tir_numpy import Unsupported, run_prim_func
from irviz.core.tvm_compat import GenericConst, RuntimeTensor, structural_equal, structural_hash

_CALL_TIR = tvm.ir.Op.get("relax.call_tir")


class FoldStats:
    """What the last run did: calls folded with numpy, calls folded by an LLVM build."""

    numpy_folds = 0
    llvm_folds = 0


def _static_tensor_shape(ty):
    shape = getattr(ty, "shape", None)
    values = getattr(shape, "values", None)
    if values is None or not all(isinstance(v, tirx.IntImm) for v in values):
        return None
    return tuple(int(v.value) for v in values)


class _Prefold:
    def __init__(self, mod):
        self.mod = mod
        self.known: dict = {}  # relax Var -> numpy value, or the constant it is bound to
        self.folded = 0
        self.refused = 0
        self.builds: dict = {}  # structural hash -> [(PrimFunc, runtime function or None)]

    def _is_const(self, a) -> bool:
        if isinstance(a, GenericConst):
            return isinstance(a.value, RuntimeTensor)
        return isinstance(a, relax.Var) and a in self.known

    def _arg(self, a):
        value = self.known.get(a) if isinstance(a, relax.Var) else a
        return value.value.numpy() if isinstance(value, GenericConst) else value

    def _try(self, call):
        if not (isinstance(call, relax.Call) and call.op.same_as(_CALL_TIR) and len(call.args) == 2):
            return None
        callee, args = call.args
        func = self.mod.functions.get(callee) if isinstance(callee, tvm.ir.GlobalVar) else None
        if not isinstance(func, tirx.PrimFunc) or not isinstance(args, relax.Tuple):
            return None
        # checked before any constant is copied out: a matmul on a bound weight is no candidate
        if not all(self._is_const(a) for a in args.fields) or _static_tensor_shape(call.ty) is None:
            return None
        values = [self._arg(a) for a in args.fields]
        try:
            out = run_prim_func(func, values)
        except Unsupported:
            out = self._llvm(func, values, call.ty)
            if out is not None:
                self.refused += 1
            return out
        self.folded += 1
        return out

    def _llvm(self, func, values, ty):
        """What TVM's FoldConstant does for one call: build the function for plain "llvm", run
        it on the constants into an uninitialised output; None when it does not build."""
        func = func.with_attr("global_symbol", "tir_function")
        entries = self.builds.setdefault(structural_hash(func), [])
        fn = next((f for g, f in entries if structural_equal(g, func)), False)
        if fn is False:
            try:
                fn = tvm.tirx.build(func, target=tvm.target.Target("llvm"))["tir_function"]
            except Exception:  # TVM's pass skips what does not build, so do we
                fn = None
            entries.append((func, fn))
        if fn is None:
            return None
        out = tvm.runtime.empty(_static_tensor_shape(ty), str(ty.dtype), tvm.cpu())
        fn(*[tvm.runtime.tensor(v) for v in values], out)
        return out.numpy()

    def block(self, block):
        bindings = []
        changed = False
        for b in block.bindings:
            if isinstance(b, relax.VarBinding):
                if self._is_const(b.value):  # a constant or an alias of one, bound as it was
                    # a constant is copied out only when a call folds on it
                    v = b.value
                    self.known[b.var] = self.known[v] if isinstance(v, relax.Var) else v
                    bindings.append(b)
                    continue
                out = self._try(b.value)
                if out is not None:
                    self.known[b.var] = out
                    b = relax.VarBinding(b.var, relax.const(out, str(out.dtype)))
                    changed = True
            bindings.append(b)
        if not changed:
            return block
        if isinstance(block, relax.DataflowBlock):
            return relax.DataflowBlock(bindings)
        return relax.BindingBlock(bindings)

    def function(self, func):
        body = func.body
        if not isinstance(body, relax.SeqExpr):
            return func
        blocks = [self.block(b) for b in body.blocks]
        if all(new.same_as(old) for new, old in zip(blocks, body.blocks)):
            return func
        new_body = relax.SeqExpr(blocks, body.body)
        return relax.Function(func.params, new_body, func.ret_ty, func.is_pure, func.attrs)


def prefold(mod) -> tuple:
    """`mod` with its constant call_tirs bound to their values; the number numpy evaluated and
    the number built with LLVM."""
    folder = _Prefold(mod)
    updates = {}
    for gv, func in mod.functions.items():
        if isinstance(func, relax.Function):
            new = folder.function(func)
            if not new.same_as(func):
                updates[gv] = new
    if updates:
        mod = tvm.IRModule({**dict(mod.functions), **updates}, attrs=mod.attrs)
    return mod, folder.folded, folder.refused


def _fold(mod, _ctx=None):
    mod, folded, refused = prefold(mod)
    FoldStats.numpy_folds, FoldStats.llvm_folds = folded, refused
    if folded:
        pass_note(f"{folded} calls on constants evaluated with numpy (bit-identical to their "
                  f"compiled code), {refused} run by LLVM builds of their functions")
    return relax.transform.FoldConstant()(mod)


def fold_constant():
    """The FoldConstant step: numpy for what it reproduces exactly, TVM's pass for the rest."""
    return tvm.ir.transform.module_pass(_fold, opt_level=0, name="FoldConstant")
