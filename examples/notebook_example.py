# %% [markdown]
# # irviz from a notebook
#
# The course's matmul + relu, built in a notebook and looked at with irviz without writing a file.
# Cells are marked `# %%` (Jupyter, VS Code and jupytext open this file as a notebook); run as a
# script (`python examples/notebook_example.py`) it prints what a notebook would display and, with
# no display, takes a snapshot instead of opening a window.

# %%
import torch
from torch import nn
from tvm import relax, te

import irviz


# %% [markdown]
# An IRModule made with BlockBuilder and `emit_te`, as the integration chapter writes it.

# %%
def te_matmul(A: te.Tensor, B: te.Tensor) -> te.Tensor:
    k = te.reduce_axis((0, A.shape[1]), name="k")
    return te.compute((A.shape[0], B.shape[1]), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="matmul")


def te_relu(A: te.Tensor) -> te.Tensor:
    return te.compute(A.shape, lambda *i: te.max(A(*i), 0), name="relu")


A = relax.Var("A", relax.TensorType((128, 128), "float32"))
B = relax.Var("B", relax.TensorType((128, 128), "float32"))
bb = relax.BlockBuilder()
with bb.function("main"):
    with bb.dataflow():
        C = bb.emit_te(te_matmul, A, B)
        D = bb.emit_te(te_relu, C)
        R = bb.emit_output(D)
    bb.emit_func_output(R, params=[A, B])
MyModule = bb.get()

# %% [markdown]
# The pass trace as an HTML report, inline: each pass of the `zero` pipeline, what it changed,
# its diff, and the last step built and run.

# %%
report = irviz.report(MyModule, pipeline="zero")
report  # noqa: B018 - a cell's last expression is what the notebook displays

# %% [markdown]
# The app on the same module, in a window of its own (the notebook stays free). `F10` steps.
# Without a display (a remote Jupyter), `snapshot=` renders the window offscreen instead and the
# picture shows inline.

# %%
try:
    app = irviz.show(MyModule, pipeline="zero")
except RuntimeError:  # no display here
    app = irviz.show(MyModule, pipeline="zero", steps=4, snapshot="mymodule.png")
app  # noqa: B018 - displayed: the snapshot inline, or the running app

# %% [markdown]
# A PyTorch model with example inputs: irviz exports it (`torch.export`) and shows the FX graph,
# the Relax graph and TensorIR side by side; the report compares the build with PyTorch.

# %%
class MyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(128, 128))

    def forward(self, x):
        x = torch.matmul(x, self.weight)
        x = torch.relu(x)
        return x


model = MyModel()
model_report = irviz.report(model, (torch.randn(1, 128),))
model_report.allclose, model_report.max_abs_error  # noqa: B018 - displayed

# %%
if __name__ == "__main__":  # run as a script: say what a notebook would have shown
    print(repr(report))
    print(repr(app))
    print(repr(model_report))
    app.close()  # ends the window (and its engine) this script opened
