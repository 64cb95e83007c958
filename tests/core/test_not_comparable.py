"""Outputs that cannot match by nature are named as such; a genuine mismatch stays a mismatch."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import torch

from irviz.core import passes
from irviz.core.backend import nondeterminism
from irviz.core.backend.build import build
from irviz.core.backend.run import run_and_compare
from irviz.core.frontend.capture import capture
from irviz.core.frontend.importer import import_model
from irviz.core.frontend.model_file import LoadedModel
from irviz.core.session import Session
from irviz.core.workspace import Workspace

REPO = Path(__file__).resolve().parents[2]


def _loaded(module, *inputs):
    return LoadedModel(module=module.eval(), example_inputs=tuple(inputs), spec="m", name="m")


def _zero_build(cap):
    s = Session(import_model(cap), cap)
    s.set_pipeline(passes.get_pipeline("zero"))
    assert s.run_to_end() is not None, s.error and s.error.user_message()
    return build(s.current.mod)


class Noisy(torch.nn.Module):
    def forward(self, x):
        return x + torch.randn_like(x)


def test_random_op_is_not_comparable_in_check_json_and_text(tmp_path):
    model = tmp_path / "noisy.py"
    model.write_text(textwrap.dedent("""
        import torch
        class Noisy(torch.nn.Module):
            def forward(self, x):
                return x + torch.randn_like(x)
        def get_model():
            return Noisy(), (torch.randn(4, 8),)
    """))
    out = tmp_path / "check.json"
    proc = subprocess.run([sys.executable, "-m", "irviz.cli", "check", str(model), "--pipeline", "zero",
                           "--repeats", "1", "--json", str(out)],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    summary = json.loads(out.read_text())
    assert proc.returncode == 1  # not a pass: nothing was confirmed
    assert summary["verdict"] == "not comparable"
    assert summary["not_comparable"] == "random op aten.randn_like"
    assert summary["allclose"] is False and summary["max_abs_error"] > 0.1
    assert "NOT COMPARABLE: random op aten.randn_like" in proc.stdout
    assert "MISMATCH" not in proc.stdout + proc.stderr


def test_random_op_found_in_the_graph():
    loaded = _loaded(Noisy(), torch.randn(4, 8))
    cap = capture(loaded)
    assert nondeterminism.random_ops(cap.exported) == ["aten.randn_like"]
    r = run_and_compare(_zero_build(cap), loaded, repeats=1, program=cap.exported)
    assert r.allclose is False and r.verdict == "not comparable"
    assert r.not_comparable == "random op aten.randn_like"


class IndexPut(torch.nn.Module):
    """Three index pairs written twice or more: (0,1) three times, (1,2) twice."""

    def __init__(self, reverse: bool = False):
        super().__init__()
        self.reverse = reverse

    def forward(self, x, v):
        i = torch.tensor([0, 1, 0, 2, 1, 0])
        j = torch.tensor([1, 2, 1, 0, 2, 1])
        if self.reverse:  # the same writes, in the other order
            i, j, v = i.flip(0), j.flip(0), v.flip(0)
        return x.index_put((i, j), v, accumulate=False)


def test_duplicate_index_put_is_order_dependent_with_its_count():
    inputs = (torch.zeros(3, 3), torch.arange(1.0, 7.0))
    forward = _loaded(IndexPut(), *inputs)
    backward = _loaded(IndexPut(reverse=True), *inputs)
    # which write wins is all that differs: TVM's build of one order against torch's other order
    built = _zero_build(capture(forward))
    cap_back = capture(backward)
    r = run_and_compare(built, backward, repeats=1, program=cap_back.exported)
    assert r.allclose is False
    assert r.verdict == "not comparable"
    assert r.not_comparable.startswith("order-dependent: 3 duplicate indices")
    assert "index_put" in r.not_comparable


def test_unique_or_accumulated_indices_explain_nothing():
    class Unique(torch.nn.Module):
        def forward(self, x, v):
            return x.index_put((torch.tensor([0, 1, 2]), torch.tensor([2, 1, 0])), v)

    class Accumulated(torch.nn.Module):
        def forward(self, x, v):
            return x.index_put((torch.tensor([0, 0, 0]), torch.tensor([1, 1, 1])), v, accumulate=True)

    for m in (Unique(), Accumulated()):
        loaded = _loaded(m, torch.zeros(3, 3), torch.arange(3.0))
        assert nondeterminism.explain(m, loaded.example_inputs, capture(loaded).exported) is None


class InPlace(torch.nn.Module):
    """Mutates its input, and its output depends on the mutated value."""

    def forward(self, x):
        x.add_(1)
        return x * 2


def test_in_place_op_is_compared_on_fresh_copies(tmp_path):
    model = tmp_path / "inplace.py"
    model.write_text(textwrap.dedent("""
        import torch
        class InPlace(torch.nn.Module):
            def forward(self, x):
                x.add_(1)
                return x * 2
        X = torch.arange(6.0).reshape(2, 3)
        def get_model():
            return InPlace(), (X,)
    """))
    ws = Workspace()
    ws.open(str(model), planned=passes.get_pipeline("zero"))
    ws.run_to_end()
    before = ws.loaded.example_inputs[0].clone()
    _, first = ws.build_run(repeats=3)
    _, again = ws.build_run(step=0, repeats=3)
    # neither run left the model's inputs mutated, so both compared on the same values
    assert torch.equal(ws.loaded.example_inputs[0], before)
    assert first.verdict == "pass" and again.verdict == "pass"
    assert first.max_abs_error == 0.0 and again.max_abs_error == 0.0


def test_fresh_copies_leave_the_callers_tensors_alone():
    x = torch.arange(4.0)
    (y,) = nondeterminism.fresh((x,))
    InPlace()(y)
    assert torch.equal(x, torch.arange(4.0)) and torch.equal(y, torch.arange(4.0) + 1)


BREAK_PASS = '''
import tvm
from tvm import relax
from irviz.core.passes import irviz_pass


@relax.expr_functor.mutator
class _Shift(relax.PyExprMutator):
    def visit_call_(self, call):
        call = self.visit_expr_post_order(call)
        if call.op == tvm.ir.Op.get("relax.nn.relu"):
            return relax.op.add(call, relax.const(0.5, "float32"))
        return call


@irviz_pass(name="BreakNumbersForTest", description="adds 0.5 after every relu")
def break_numbers(mod):
    m = _Shift(mod)
    for gv, f in mod.functions.items():
        if isinstance(f, relax.Function):
            m.builder_.update_func(gv, m.visit_expr(f))
    return m.builder_.get()
'''


def test_a_pass_that_breaks_numbers_is_still_a_mismatch(tmp_path):
    path = tmp_path / "break_pass.py"
    path.write_text(BREAK_PASS)
    passes.load_pass_file(str(path))
    ws = Workspace()
    ws.open("sample:mlp", planned=[passes.PassInvocation("BreakNumbersForTest", {})]
            + passes.get_pipeline("zero"))
    ws.run_to_end()
    _, res = ws.build_run(repeats=1)
    assert res.allclose is False and res.max_abs_error >= 0.4
    assert res.not_comparable is None and res.verdict == "mismatch"


def test_returned_uninitialized_memory_is_not_comparable_but_used_memory_is():
    class Returned(torch.nn.Module):
        def forward(self, x):
            return x + 1, torch.empty(64, 64)

    class Overwritten(torch.nn.Module):
        def forward(self, x):
            return torch.empty_like(x).fill_(2.0) * x

    returned = _loaded(Returned(), torch.randn(3))
    assert nondeterminism.uninitialized_outputs(capture(returned).exported) == ["aten.empty"]
    assert nondeterminism.explain(returned.module, returned.example_inputs,
                                  capture(returned).exported).startswith("uninitialized memory")
    over = _loaded(Overwritten(), torch.randn(3))
    assert nondeterminism.uninitialized_outputs(capture(over).exported) == []


class ZeroRouter(torch.nn.Module):
    """AFMoE's router at initialisation: a zero gate scores every expert the same, and the top-2
    experts each token goes to are whichever of the tied four the library picks."""

    def __init__(self, gate_scale: float):
        super().__init__()
        torch.manual_seed(0)
        self.gate = torch.nn.Parameter(torch.randn(4, 8) * gate_scale)
        self.experts = torch.nn.Parameter(torch.randn(4, 8))

    def forward(self, x):
        scores = torch.sigmoid(x @ self.gate.T)
        weights, chosen = torch.topk(scores, 2, dim=-1)
        return (weights.unsqueeze(-1) * self.experts[chosen]).sum(1)


def test_tied_topk_is_named_with_its_rows_and_an_untied_one_explains_nothing():
    x = torch.randn(6, 8)
    tied = ZeroRouter(0.0)
    assert nondeterminism.explain(tied, (x,), capture(_loaded(tied, x)).exported) == (
        "tied top-k: 6 rows of aten.topk's input hold equal values among the k+1 best, and which "
        "of them is picked is each library's choice")
    untied = ZeroRouter(1.0)
    assert nondeterminism.explain(untied, (x,), capture(_loaded(untied, x)).exported) is None
