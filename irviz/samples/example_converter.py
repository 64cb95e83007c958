"""Example converter file (not a model): teaches irviz to import aten.erfinv, which TVM 0.27 lacks.

Use it with the sample that needs it:

    irviz check sample:unsupported_op --converters irviz/samples/example_converter.py

or, in the app, load this file as a converter file and re-import (no restart needed).

How a converter file works
--------------------------
The file defines ``CONVERTERS``, a dict from an op to a function.  The key is the op as the FX
graph shows it (``aten.erfinv.default``; ``erfinv.default`` works too).  When the importer reaches
an FX node with that op it calls ``fn(node, importer)``:

* ``node`` is the ``torch.fx.Node``: ``node.args`` / ``node.kwargs`` are its arguments (FX nodes
  for tensors, plain Python values for the rest); ``node.meta["val"]`` is a fake tensor with the
  output's shape and dtype.
* ``importer`` is TVM's ``ExportedProgramImporter``: ``importer.env[fx_node]`` is the Relax value
  already emitted for an input, and ``importer.block_builder.emit(expr)`` adds a binding and
  returns its ``relax.Var``.

Return the Relax var holding the node's result.  Anything the Relax op set (``tvm.relax.op``)
can express is fine; each ``emit`` shows up as one binding in the Relax view, grouped under the FX
node.  A converter for an op TVM *does* support replaces TVM's own.

The converter below is M. Giles' single-precision approximation of erfinv ("Approximating the
erfinv function", GPU Computing Gems, 2011): a polynomial in w = -log(1 - x^2), one for the
centre (w < 5) and one for the tails, exact to a few float32 ulps on (-1, 1).
"""
from tvm import relax

# Coefficients, highest degree first (Giles 2011, single precision).
CENTRAL = [2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
           -0.00125372503, -0.00417768164, 0.246640727, 1.50140941]
TAIL = [-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
        -0.0076224613, 0.00943887047, 1.00167406, 2.83297682]


def convert_erfinv(node, importer):
    emit = importer.block_builder.emit
    op = relax.op
    x = importer.env[node.args[0]]  # the input's Relax value
    dtype = str(node.meta["val"].dtype).replace("torch.", "")  # "float32"

    def const(v):
        return relax.const(v, dtype)

    def horner(coeffs, w):
        p = const(coeffs[0])
        for c in coeffs[1:]:
            p = emit(op.add(emit(op.multiply(p, w)), const(c)))
        return p

    one = const(1.0)
    # w = -log((1 - x) * (1 + x)); one emit per op, so each is a binding of its own
    one_minus_x2 = emit(op.multiply(emit(op.subtract(one, x)), emit(op.add(one, x))))
    w = emit(op.negative(emit(op.log(one_minus_x2))))
    central = horner(CENTRAL, emit(op.subtract(w, const(2.5))))
    tail = horner(TAIL, emit(op.subtract(emit(op.sqrt(w)), const(3.0))))
    p = emit(op.where(emit(op.less(w, const(5.0))), central, tail))
    return emit(op.multiply(p, x))


CONVERTERS = {
    "aten.erfinv.default": convert_erfinv,
}
