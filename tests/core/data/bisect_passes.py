"""Deliberately broken passes for the bisect tests: each one changes a single binding of main."""
import tvm
from tvm import relax

from irviz.core.passes import irviz_pass


def _rewrite_first(mod, op_name, make):
    """main with the first call of `op_name` replaced by make(call); the rest untouched."""
    op = tvm.ir.Op.get(op_name)
    done = [False]

    @relax.expr_functor.mutator
    class Rewrite(relax.PyExprMutator):
        def visit_call_(self, call):
            call = super().visit_call_(call)
            if not done[0] and isinstance(call.op, tvm.ir.Op) and call.op.same_as(op):
                done[0] = True
                return make(call)
            return call

    func = Rewrite(mod).visit_expr(mod["main"])
    out = tvm.IRModule(dict(mod.functions), attrs=mod.attrs)
    out["main"] = func
    return out


@irviz_pass(name="WrongAddToSubtract")
def wrong_add_to_subtract(mod):
    """Rewrite the first R.add of main into R.subtract (wrong numbers, builds fine)."""
    return _rewrite_first(mod, "relax.add", lambda c: relax.op.subtract(c.args[0], c.args[1]))


@irviz_pass(name="UnbuildableHint")
def unbuildable_hint(mod):
    """Wrap the first R.add of main in R.hint_on_device, which the VM's code generator rejects."""
    return _rewrite_first(mod, "relax.add", lambda c: relax.op.hint_on_device(c, tvm.cpu()))
