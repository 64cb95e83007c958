"""BindParams: weights that a function takes as parameters become constants, in a step of its own.

A model opened with ``--keep-params`` has ``main(x, p_linear0_weight, ...)`` and a params file
(``.npz``) holding those weights; the session fills that file in as ``params`` when BindParams is
planned without one. An ordinary import has already bound the weights, so there is nothing to bind
and the check says how to get a module that has them as parameters.
"""
from __future__ import annotations

from tvm import relax

from irviz.core.errors import PassError
from irviz.core.passes.user_files import load_params_file
from irviz.core.tvm_compat import var_name

KEEP_PARAMS_HINT = ("open the model with --keep-params (in the app: Open with 'Weights as inputs'): "
                    "main then takes the weights as parameters and BindParams binds them from the "
                    "params file the import writes; an IR file gives its weights with get_params()")


def make(func_name="main", params=""):
    if not params:
        raise PassError("BindParams has nothing to bind: weights are already bound; open with "
                        "--keep-params (an ordinary import makes the weights constants)",
                        hint=KEEP_PARAMS_HINT)
    arrays = load_params_file(params)
    if not arrays:
        raise PassError(f"parameter file {params} holds no arrays")
    return relax.transform.BindParams(func_name or "main", arrays)


def check(mod, func_name="main", params=""):
    """Every array in the file names a parameter of the function (TVM's own message only says
    'Function does not have parameter with name w0')."""
    if not params:
        make(func_name, params)  # the "already bound" error
    name = func_name or "main"
    names = [gv.name_hint for gv in mod.get_global_vars()]
    if name not in names:
        raise PassError(f"BindParams: the module has no function {name!r}",
                        hint="set func_name to one of " + ", ".join(sorted(names)))
    fn = mod[name]
    if not isinstance(fn, relax.Function):
        raise PassError(f"BindParams: {name} is not a Relax function", hint="bind a Relax function's parameters")
    have = [var_name(p) for p in fn.params]
    keys = list(load_params_file(params))
    missing = [k for k in keys if k not in have]
    if not missing:
        return
    shown = ", ".join(missing[:6]) + (", ..." if len(missing) > 6 else "")
    listed = ", ".join(f'"{h}"' for h in have)
    if len(missing) == len(keys) and (fn.attrs is None or "num_input" not in fn.attrs):
        raise PassError(f"BindParams: {name} has no parameter named {shown} (its parameters are "
                        f"{listed}): weights are already bound; open with --keep-params",
                        hint=KEEP_PARAMS_HINT)
    raise PassError(f"BindParams: {name} has no parameter named {shown}; its parameters are {listed}",
                    hint=f"the keys of {params} must be parameter names of {name} (already bound "
                         "weights are constants now: step back before the first BindParams)")
