"""A deliberately wrong pass, for trying out irviz's numeric debugging: it rewrites one R.add of
main into R.subtract (the `index`-th add, counting from 0), so the compiled model gives wrong
numbers from that binding on.

    irviz check sample:small_cnn --passes examples/subtract_one_add.py \\
        --pipeline "SubtractOneAdd,LegalizeOps,FuseOps,FuseTIR" --intermediates
"""
import tvm
from tvm import relax

from irviz.core.passes import irviz_pass


@relax.expr_functor.mutator
class _AddToSubtract(relax.PyExprMutator):
    def __init__(self, mod, index):
        super().__init__(mod)
        self.add_op = tvm.ir.Op.get("relax.add")
        self.index = index
        self.seen = 0
        self.rewritten = None  # name of the binding that now subtracts

    def visit_var_binding_(self, binding):
        value = binding.value
        if isinstance(value, relax.Call) and value.op == self.add_op:
            if self.seen == self.index:
                self.rewritten = binding.var.name
                new = self.builder_.normalize(
                    relax.op.subtract(self.visit_expr(value.args[0]), self.visit_expr(value.args[1])))
                self.seen += 1
                self.builder_.emit_normalized(relax.VarBinding(binding.var, new))
                return
            self.seen += 1
        super().visit_var_binding_(binding)


@irviz_pass(name="SubtractOneAdd", description="Wrong on purpose: one R.add of main becomes R.subtract")
def subtract_one_add(mod, index: int = 0):
    """The index-th R.add binding of main (program order) subtracts instead."""
    mutator = _AddToSubtract(mod, index)
    gv = mod.get_global_var("main")
    mutator.builder_.update_func(gv, mutator.visit_expr(mod["main"]))
    if mutator.rewritten is None:
        raise ValueError(f"main has no R.add number {index} (it has {mutator.seen})")
    return mutator.builder_.get()
