"""Example irviz pass file: load it with irviz.core.passes.load_pass_file("examples/my_passes.py")
(the GUI's and CLI's "load pass file" do the same); its passes then appear in the pass list.

A pass file is plain Python. irviz collects these kinds of passes from it (category "user"):

1. functions decorated with ``@irviz_pass(name=..., description=...)``.  Either
     * ``def f(mod, **params) -> IRModule``   - gets the module, returns a new one, or
     * ``def f(**params) -> tvm.ir.transform.Pass`` - a factory returning a TVM pass.
   Keyword parameters with defaults become pass parameters (bool / int / str defaults give
   that kind of editor in the GUI).
2. ``IRVIZ_PASSES = [PassSpec(...), ...]``  for full control over parameters and ``make``.
3. TVM's own: classes decorated with ``@tvm.ir.transform.module_pass(opt_level=..., name=...)``,
   ``relax.transform.function_pass`` or ``dataflowblock_pass`` (their ``__init__`` parameters are
   the pass's), and Pass instances / ``tvm.transform.Sequential`` bound to a name in the file.
   A pass may take a built-in's name; the built-in is then ``builtin:NAME``.

Rules of the road: never change the module you are given in place (build a new one; irviz also
hands user passes a shallow copy), and do not print the module with show_meta=True or pickle it
(both crash TVM 0.27).  An exception in your pass is shown with this file's line number.
"""
import tvm
from tvm import relax

from irviz.core.passes import PassParam, PassSpec, irviz_pass


@relax.expr_functor.mutator
class _ReluToMaximum(relax.PyExprMutator):
    """relu(x) -> maximum(x, 0) with a scalar zero of x's dtype."""

    def __init__(self, mod):
        super().__init__(mod)
        self.relu_op = tvm.ir.Op.get("relax.nn.relu")

    def visit_call_(self, call):
        call = self.visit_expr_post_order(call)
        if call.op != self.relu_op:
            return call
        x = call.args[0]
        dtype = x.ty.dtype
        return relax.op.maximum(x, relax.const(0, dtype))


@irviz_pass(name="ReluToMaximum", description="Rewrite relu(x) into maximum(x, 0)")
def relu_to_maximum(mod):
    """Every Relax function: R.nn.relu(x) becomes R.maximum(x, R.const(0, dtype))."""
    mutator = _ReluToMaximum(mod)
    for gvar, func in mod.functions.items():
        if isinstance(func, relax.Function):
            mutator.builder_.update_func(gvar, mutator.visit_expr(func))
    return mutator.builder_.get()


@irviz_pass(name="CleanUp", description="CanonicalizeBindings then DeadCodeElimination")
def clean_up(entry_functions: str = "main"):
    """A factory: returns a TVM Sequential; entry_functions is comma separated."""
    entries = [s.strip() for s in entry_functions.split(",") if s.strip()]
    return tvm.transform.Sequential(
        [relax.transform.CanonicalizeBindings(), relax.transform.DeadCodeElimination(entries)],
        name="CleanUp",
    )


def _fold_then_cse(call_only=False):
    return tvm.transform.Sequential(
        [relax.transform.FoldConstant(), relax.transform.EliminateCommonSubexpr(call_only)],
        name="FoldThenCSE",
    )


IRVIZ_PASSES = [
    PassSpec(
        name="FoldThenCSE",
        description="FoldConstant, then eliminate common subexpressions",
        params=[PassParam("call_only", "bool", False, "only eliminate repeated calls")],
        make=_fold_then_cse,
        category="user",
    ),
]
