"""Course "Integration with ML frameworks": fx.symbolic_trace of the MLP + from_fx with the course's maps."""
# IRVIZ_CAPTURE makes irviz capture this model as the course does, with torch.fx.symbolic_trace:
# the FX pane shows call_module nodes (linear0, relu, linear1). The course importer then walks the
# graph with call_module_map, as the chapter writes it: nn.Linear -> topi.nn.dense + topi.add
# through bb.emit_te, nn.ReLU -> a TE relu. The maps below are the course's own; they replace
# irviz's built-in ones for the same keys (the same as passing this file with --importer-map).
import torch
from torch import nn
from tvm import te, topi
from tvm import relax

IRVIZ_CAPTURE = "symbolic_trace"
IRVIZ_IMPORTER = "course"


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear0 = nn.Linear(784, 128, bias=True)
        self.relu = nn.ReLU()
        self.linear1 = nn.Linear(128, 10, bias=True)

    def forward(self, x):
        x = self.linear0(x)
        x = self.relu(x)
        x = self.linear1(x)
        return x


def map_param(param: nn.Parameter):
    return relax.const(param.data.cpu().numpy(), "float32")


def te_relu(A: te.Tensor) -> te.Tensor:
    return te.compute(A.shape, lambda *i: te.max(A(*i), 0), name="relu")


def map_nn_linear(bb, node_map, node, nn_mod):
    x = node_map[node.args[0]]
    w = map_param(nn_mod.weight)
    y = bb.emit_te(topi.nn.dense, x, w)
    if nn_mod.bias is not None:
        y = bb.emit_te(topi.add, y, map_param(nn_mod.bias))
    return y


def map_nn_relu(bb, node_map, node, nn_mod):
    return bb.emit_te(te_relu, node_map[node.args[0]])


call_function_map = {}
call_module_map = {
    torch.nn.Linear: map_nn_linear,
    torch.nn.ReLU: map_nn_relu,
}


def get_model():
    torch.manual_seed(0)
    return MLP().eval(), (torch.rand(1, 784),)
