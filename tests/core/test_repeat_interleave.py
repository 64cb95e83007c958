"""aten.repeat_interleave.Tensor imports and runs as torch does: constant repeats (a buffer),
repeats from an input with and without a dim, and with output_size given; the expanded length capped by sym_min / sym_max."""
from __future__ import annotations

import textwrap

import pytest

from irviz.core.workspace import Workspace

MODELS = {
    # a length regulator as in FastSpeech2: each frame repeated by its (input) duration
    "durations": ("""
        class M(nn.Module):
            def forward(self, x, d):
                return torch.repeat_interleave(x, d, dim=1)
        """, "torch.randn(2, 5, 3), torch.tensor([2, 0, 3, 1, 4])"),
    # FastSpeech2's length regulator caps the expanded length: torch.sym_min / sym_max of sizes
    "capped": ("""
        class M(nn.Module):
            def forward(self, x, d):
                y = torch.repeat_interleave(x, d, dim=1)
                return y[:, :torch.sym_min(y.shape[1], 6)] * 2, y[:, :torch.sym_max(y.shape[1] - 8, 1)]
        """, "torch.randn(2, 5, 3), torch.tensor([2, 0, 3, 1, 4])"),
    "flat": ("""
        class M(nn.Module):
            def forward(self, x, d):
                return torch.repeat_interleave(x, d) * 2
        """, "torch.randn(4), torch.tensor([1, 3, 0, 2])"),
    "output_size": ("""
        class M(nn.Module):
            def forward(self, x, d):
                return torch.repeat_interleave(x, d, dim=0, output_size=7)
        """, "torch.randn(4, 3), torch.tensor([2, 1, 1, 3])"),
    "buffer": ("""
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("r", torch.tensor([1, 0, 3, 2]))
            def forward(self, x):
                return x.repeat_interleave(self.r, dim=1)
        """, "torch.randn(2, 4, 3),"),
}


def _open(tmp_path, name):
    body, inputs = MODELS[name]
    path = tmp_path / f"{name}.py"
    path.write_text("import torch\nfrom torch import nn\n" + textwrap.dedent(body) +
                    f"\ndef get_model():\n    torch.manual_seed(0)\n    return M().eval(), ({inputs})\n")
    ws = Workspace()
    ws.open(str(path), planned="zero")
    ws.run_to_end()
    return ws


@pytest.mark.parametrize("name", sorted(MODELS))
def test_repeat_interleave_matches_torch(tmp_path, name):
    ws = _open(tmp_path, name)
    _, res = ws.build_run(step=-1, repeats=1)
    assert res.allclose is True and res.max_abs_error == 0


def test_sizes_known_at_import_stay_static_and_a_data_dependent_one_is_named(tmp_path):
    main = _open(tmp_path, "buffer").session.steps[0].mod["main"]
    assert "R.Tensor((2, 6, 3)" in main.script()
    main = _open(tmp_path, "output_size").session.steps[0].mod["main"]
    assert "R.Tensor((7, 3)" in main.script()
    text = _open(tmp_path, "durations").session.steps[0].mod["main"].script()
    # the length is sum(durations), bound when the model runs, under torch's name for it
    assert "R.tensor_to_shape" in text and "R.match_cast" in text and "R.Tensor((2, u0, 3)" in text
