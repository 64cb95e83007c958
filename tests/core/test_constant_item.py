"""`.item()` of a tensor no input reaches (Reformer's axial position embeddings) imports as its
number; one an input reaches stays a run-time size, and the checks torch.export writes on such sizes
(`(u0 < n) & (u1 < n)`, Encodec's reflect pads) import."""
from __future__ import annotations

import torch
from tvm import relax

from irviz.core import passes
from irviz.core.backend.build import build
from irviz.core.backend.run import run_and_compare
from irviz.core.frontend.capture import capture
from irviz.core.frontend.constant_item import constant_item
from irviz.core.frontend.importer import import_model
from irviz.core.frontend.model_file import LoadedModel
from irviz.core.session import Session


class AxialPositions(torch.nn.Module):
    """Reformer's pattern: weights sliced to (position_ids.max().item() + w) // w columns, where
    the position ids are an arange over the fixed sequence length."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.w = torch.nn.Parameter(torch.randn(1, 8, 4, 16))

    def forward(self, x):
        pos = torch.arange(x.shape[1]).unsqueeze(0).expand(x.shape[0], -1)
        cols = (pos.max().item() + 4) // 4
        enc = self.w[:, :cols].reshape(1, -1, 16)
        return x + torch.index_select(enc[0], 0, pos[0])


class InputItem(torch.nn.Module):
    def forward(self, x, n):
        return x[: n.max().item()] * 2


def _loaded(module, *inputs):
    return LoadedModel(module=module.eval(), example_inputs=tuple(inputs), spec="m", name="m")


def _item_nodes(cap):
    return [n for n in cap.exported.graph.nodes if n.op == "call_function"
            and ("item" in str(n.target) or "_local_scalar" in str(n.target))]


def test_constant_item_imports_as_a_number_and_builds():
    x = torch.randn(1, 16, 16)
    loaded = _loaded(AxialPositions(), x)
    cap = capture(loaded)
    [item] = _item_nodes(cap)
    assert constant_item(item) == 15
    imported = import_model(cap)
    # no symbolic size is left: the slice is to a fixed 4 columns
    main = imported.mod["main"]
    assert not relax.analysis.free_symbolic_vars(main) and "tensor_to_shape" not in main.script()
    s = Session(imported, cap)
    s.set_pipeline(passes.get_pipeline("zero"))
    assert s.run_to_end() is not None, s.error and s.error.user_message()
    result = run_and_compare(build(s.current.mod), loaded, repeats=1)
    assert result.allclose, result


def test_item_of_an_input_stays_a_run_time_size():
    loaded = _loaded(InputItem(), torch.randn(8, 4), torch.tensor([3, 5]))
    cap = capture(loaded)
    [item] = _item_nodes(cap)
    assert constant_item(item) is None
    assert "tensor_to_shape" in import_model(cap).mod["main"].script()


class ReflectPadByRunTimeSizes(torch.nn.Module):
    """Encodec's reflect pad by paddings read with .item(): torch.export checks them at run time
    with `(u0 < 16) & (u1 < 16)`."""

    def forward(self, x, left, right):
        return torch.nn.functional.pad(x, (left.item(), right.item()), mode="reflect")


def test_and_of_symbolic_checks_imports():
    loaded = _loaded(ReflectPadByRunTimeSizes(), torch.randn(1, 2, 16), torch.tensor(3), torch.tensor(2))
    cap = capture(loaded)
    assert any(n.target.__name__ == "and_" for n in cap.exported.graph.nodes if n.op == "call_function")
    imported = import_model(cap)
    assert " and " in imported.mod["main"].script()  # the two checks combined into one TIR boolean
    s = Session(imported, cap)
    s.set_pipeline(passes.get_pipeline("zero"))
    assert s.run_to_end() is not None, s.error and s.error.user_message()
    assert run_and_compare(build(s.current.mod), loaded, repeats=1).allclose
