"""When torch.export cannot capture a model: draft export, then symbolic_trace, each checked against
eager torch, and one message naming what was tried (guard, source line, module) when none works."""
from __future__ import annotations

import inspect
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from irviz.core import passes
from irviz.core.backend.build import build
from irviz.core.backend.run import run_and_compare
from irviz.core.errors import CaptureError
from irviz.core.frontend import hf
from irviz.core.frontend.capture import capture
from irviz.core.frontend.importer import import_model
from irviz.core.frontend.model_file import LoadedModel
from irviz.core.session import Session

REPO = Path(__file__).resolve().parents[2]


class Branchy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        if y.sum() > 0:
            return y * 2
        return y - 1


@torch.fx.wrap
def via_numpy(x):
    return torch.from_numpy(x.numpy() * 2)


class UsesNumpy(torch.nn.Module):
    """torch.export and draft export cannot run .numpy() on fake tensors; symbolic_trace keeps the
    wrapped function as one call."""

    def forward(self, x):
        return via_numpy(x) + 1


class Hopeless(torch.nn.Module):
    def forward(self, x):
        n = int(x.sum().item() > 0) + 1
        return torch.ones(n) * x.numpy().sum()


def _line(cls, code: str) -> int:
    """The line of this file where `cls`'s source has `code`."""
    lines, start = inspect.getsourcelines(cls)
    return start + next(i for i, ln in enumerate(lines) if code in ln)


def _loaded(module, *inputs):
    return LoadedModel(module=module.eval(), example_inputs=tuple(inputs), spec="m", name="m")


def _branchy_inputs(m, sign):
    torch.manual_seed(0)
    x = torch.randn(3, 4)
    with torch.no_grad():
        return x if (m.lin(x).sum() > 0) == (sign > 0) else -x


@pytest.mark.parametrize("sign", [1, -1])
def test_data_dependent_branch_is_exported_with_its_eager_value_and_matches_torch(sign):
    torch.manual_seed(0)
    m = Branchy().eval()
    loaded = _loaded(m, _branchy_inputs(m, sign))
    cap = capture(loaded)
    assert cap.method == "export" and cap.fallback == "torch.export with eager branch values"
    used, assumed = cap.notes
    assert used.startswith("captured with torch.export with eager branch values (torch.export "
                           "(non-strict) failed: data-dependent guard")
    assert f"test_capture_fallbacks.py:{_line(Branchy, 'if y.sum()')} `if y.sum() > 0:` in Branchy" in used
    assert assumed == (f"assumed `if y.sum() > 0:` is {sign > 0} at test_capture_fallbacks.py:"
                       f"{_line(Branchy, 'if y.sum()')} in "
                       "Branchy, as on the example inputs (inputs that change it are computed as if it held)")
    ops = [str(n.target) for n in cap.exported.graph.nodes if n.op == "call_function"]
    assert ("aten.mul.Tensor" in ops) == (sign > 0) and ("aten.sub.Tensor" in ops) == (sign < 0), ops
    s = Session(import_model(cap), cap)
    s.set_pipeline(passes.get_pipeline("zero"))
    assert s.run_to_end() is not None, s.error and s.error.user_message()
    r = run_and_compare(build(s.current.mod), loaded, repeats=1)
    assert r.allclose and r.max_abs_error < 1e-5
    assert torch.is_tensor(torch.ones(1).item() + 0) is False and bool(torch.ones(1))  # unpatched


def test_symbolic_trace_is_the_next_fallback():
    loaded = _loaded(UsesNumpy(), torch.randn(3, 4))
    cap = capture(loaded)
    assert cap.method == "symbolic_trace" and cap.fallback == "symbolic_trace"
    (note,) = cap.notes
    assert note.startswith("captured with symbolic_trace (torch.export (non-strict) failed: ")
    assert "torch.export with eager branch values failed: not used: forward() asks no bool(tensor)" in note
    assert "draft export failed: RuntimeError: .numpy()" in note
    assert [n.target for n in cap.graph.nodes if n.op == "call_function"] == \
        [f"{__name__}.via_numpy", "operator.add"]


def test_no_capture_lists_every_attempt_with_guard_line_and_module():
    with pytest.raises(CaptureError) as ei:
        capture(_loaded(Hopeless(), torch.ones(3)))
    msg = ei.value.message
    lines = msg.splitlines()
    assert lines[0] == "torch.export could not capture m, and neither could irviz's fallbacks; tried:"
    assert lines[1].startswith("  1. torch.export (non-strict): data-dependent guard ")
    assert f"at test_capture_fallbacks.py:{_line(Hopeless, 'n = int')} `n = int(x.sum().item() > 0) + 1` in Hopeless" in lines[1]
    assert lines[2] == ("  2. torch.export with eager branch values: not used: forward() asks no "
                        "bool(tensor) or bool .item() in eager torch")
    assert lines[3].startswith("  3. draft export: RuntimeError: .numpy() is not supported")
    assert lines[3].endswith(f"test_capture_fallbacks.py:{_line(Hopeless, 'torch.ones(n)')}: "
                             "return torch.ones(n) * x.numpy().sum()")
    assert lines[4].startswith("  4. symbolic_trace: torch.fx.symbolic_trace failed: TypeError")
    assert lines[4].endswith(f"at test_capture_fallbacks.py:{_line(Hopeless, 'n = int')}: "
                             "n = int(x.sum().item() > 0) + 1")
    assert "torch._check" in ei.value.hint


def test_check_says_which_fallback_was_used(tmp_path):
    model = tmp_path / "branchy.py"
    model.write_text(textwrap.dedent('''
        import torch

        class Branchy(torch.nn.Module):
            def forward(self, x):
                if x.sum() > 0:
                    return x * 2
                return x - 1

        def get_model():
            return Branchy(), (torch.ones(2, 3),)
    '''))
    proc = subprocess.run([sys.executable, "-m", "irviz", "check", str(model)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "note     captured with torch.export with eager branch values (torch.export (non-strict) " \
           "failed: data-dependent guard" in out
    assert "at branchy.py:6 `if x.sum() > 0:` in Branchy" in out
    assert "note     assumed `if x.sum() > 0:` is True at branchy.py:6 in Branchy" in out
    assert out.splitlines()[-1] == "OK"


@pytest.mark.skipif(not hf.available(), reason="transformers is not installed")
def test_longformer_is_captured_with_its_global_attention_branch_as_in_eager():
    """torch.export alone stops at `if is_global_attn:` (GuardOnDataDependentSymNode)."""
    import transformers

    cfg = transformers.LongformerConfig(vocab_size=128, hidden_size=32, num_hidden_layers=1,
                                        num_attention_heads=4, intermediate_size=64,
                                        attention_window=4, max_position_embeddings=64)
    loaded = _loaded(hf.encoder(transformers.LongformerModel, cfg), hf.token_ids(128, seq=16))
    cap = capture(loaded)
    assert cap.fallback == "torch.export with eager branch values"
    used, assumed = cap.notes
    assert "modeling_longformer.py:" in used and "`if is_global_attn:` in " \
           "model.encoder.layer.0.attention.self (LongformerSelfAttention)" in used
    assert assumed.startswith("assumed `is_global_attn = is_index_global_attn.flatten().any().item()` "
                              "is False at modeling_longformer.py:")
    assert "in model.encoder (LongformerEncoder)" in assumed
    with torch.no_grad():
        want = loaded.module(*loaded.example_inputs)
        assert torch.equal(cap.exported.module()(*loaded.example_inputs), want)
