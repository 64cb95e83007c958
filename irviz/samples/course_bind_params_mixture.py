"""Course "Bind Parameters to IRModule" step by step: MyModuleMixture takes the weights, BindParams binds them."""
# The chapter binds nd_params into MyModuleMixture with relax.transform.BindParams("main",
# nd_params). Here the module keeps its weight parameters and get_params() hands irviz the same
# nd_params: `irviz check sample:course_bind_params_mixture --pipeline BindParams,zero` binds them
# in a step of its own. get_inputs() gives all of main's parameters, as the chapter calls
# vm["main"](data, w0, b0, w1, b1); after BindParams main takes only x, and irviz drops the bound
# ones by name, so every step runs and is compared with reference().
import tvm

from _course_mlp import mlp_inputs, mlp_params, numpy_mlp
from course_mixture import MyModuleMixture

nd_params = {k: tvm.runtime.tensor(v) for k, v in mlp_params.items()}


def get_irmodule():
    return MyModuleMixture  # main(x, w0, b0, w1, b1): the weights are still parameters


def get_inputs():
    return mlp_inputs()  # (data, w0, b0, w1, b1): main's parameters in order


def get_params():
    return nd_params


def reference(data, w0, b0, w1, b1):
    return numpy_mlp(data, w0, b0, w1, b1)
