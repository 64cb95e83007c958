"""irviz's own converters (empty 1-D cat, negative indices, bool cumsum) and user converter files (the failing-op path)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from irviz.core import passes
from irviz.core.backend.build import build
from irviz.core.backend.run import run_and_compare
from irviz.core.frontend.capture import capture
from irviz.core.frontend.converters import load_converter_file, normalize_key
from irviz.core.errors import IRImportError, LoadError
from irviz.core.frontend.importer import import_model
from irviz.core.frontend.model_file import LoadedModel, load_model
from irviz.core.frontend.sample_files import sample_path
from irviz.core.session import Session

EXAMPLE = sample_path("example_converter")
REPO = Path(__file__).resolve().parents[2]


def _zero_build_compare(loaded, imp, cap):
    s = Session(imp, cap)
    s.set_pipeline(passes.get_pipeline("zero"))
    assert s.run_to_end() is not None, s.error and s.error.user_message()
    return run_and_compare(build(s.current.mod), loaded, repeats=1)


def _loaded(module, *inputs, name="m"):
    return LoadedModel(module=module.eval(), example_inputs=tuple(inputs), spec=name, name=name)


# --------------------------------------------------------------------------------------------
# the failing-op path: unsupported op -> precise error -> user converter file -> success


@pytest.fixture(scope="module")
def unsupported():
    loaded = load_model("sample:unsupported_op")
    return loaded, capture(loaded)


def test_unsupported_op_capture_succeeds_and_import_names_node(unsupported):
    loaded, cap = unsupported
    # capture gives the whole graph, the failing node included (the FX view can mark it)
    node = cap.graph.node("erfinv")
    assert node.target == "aten.erfinv.default" and node.module_path == "gauss"
    assert any(n.kind == "output" for n in cap.graph.nodes)
    with pytest.raises(IRImportError) as ei:
        import_model(cap)
    e = ei.value
    assert e.stage == "import" and e.node == "erfinv" and e.op == "aten.erfinv.default"
    assert cap.graph.node(e.node) is node  # .node is the FX node to mark
    assert "aten.erfinv.default" in e.message
    assert "(4, 32)" in e.message  # input shape
    assert '"gauss"' in e.message and "GaussianQuantile" in e.message  # nn.Module
    assert "--converters" in e.hint and "example_converter.py" in e.hint


def test_example_converter_file_makes_it_import(unsupported):
    loaded, cap = unsupported
    conv = load_converter_file(EXAMPLE)
    assert set(conv) == {"erfinv.default"}
    imp = import_model(cap, custom_convert_map=conv)
    assert len(imp.provenance["erfinv"]) > 10  # the converter's bindings, grouped under the node
    r = _zero_build_compare(loaded, imp, cap)
    assert r.allclose and r.max_abs_error < 1e-5


def test_cli_converters_flag():
    cmd = [sys.executable, "-m", "irviz", "check", "sample:unsupported_op", "--json", "-"]
    bad = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=300)
    out = json.loads(bad.stdout)
    assert not out["ok"] and out["failed_stage"] == "import" and "erfinv" in out["error"]
    good = subprocess.run(cmd + ["--converters", str(EXAMPLE)], capture_output=True, text=True,
                          cwd=REPO, timeout=300)
    out = json.loads(good.stdout)
    assert out["ok"] and out["allclose"], out


def test_edited_converter_file_is_reloaded(tmp_path, unsupported):
    """Loading the file again picks up edits (re-import without restarting)."""
    _, cap = unsupported
    f = tmp_path / "conv.py"
    f.write_text("from tvm import relax\n\n"
                 "def conv(node, imp):\n"
                 "    raise RuntimeError('first version')\n\n"
                 "CONVERTERS = {'aten.erfinv.default': conv}\n")
    with pytest.raises(IRImportError) as ei:
        import_model(cap, custom_convert_map=load_converter_file(f))
    assert ei.value.node == "erfinv"
    assert "first version" in ei.value.message
    assert "conv.py:4" in ei.value.message  # where the user's converter failed
    f.write_text("from tvm import relax\n\n"
                 "def conv(node, imp):\n"
                 "    return imp.block_builder.emit(relax.op.tanh(imp.env[node.args[0]]))\n\n"
                 "CONVERTERS = {'aten.erfinv.default': conv}\n")
    imp = import_model(cap, custom_convert_map=load_converter_file(f))
    assert "tanh" in imp.mod.script()


# --------------------------------------------------------------------------------------------
# converter file errors name file:line


@pytest.mark.parametrize("source, expect", [
    ("CONVERTERS = {\n  'aten.erfinv.default': conv,\n", "conv.py:1"),  # syntax error
    ("import math\nx = 1 / 0\nCONVERTERS = {}\n", "conv.py:2"),  # raises while loading
    ("def f(node, imp):\n    pass\n", "does not define CONVERTERS"),
    ("CONVERTERS = [1, 2]\n", "conv.py:1"),
    ("CONVERTERS = {}\n", "empty"),
    ("def f(n, i): pass\n\nCONVERTERS = {'aten.erfinvv.default': f}\n", "did you mean erfinv"),
    ("def f(n, i): pass\n\nCONVERTERS = {'aten.erfinv.Tensor': f}\n", "no overload 'Tensor'"),
    ("CONVERTERS = {'aten.erfinv.default': 3}\n", "not a function"),
])
def test_converter_file_errors(tmp_path, source, expect):
    f = tmp_path / "conv.py"
    f.write_text(source)
    with pytest.raises(LoadError) as ei:
        load_converter_file(f)
    assert expect in ei.value.message
    assert ei.value.hint


def test_missing_converter_file(tmp_path):
    with pytest.raises(LoadError, match="No such converter file"):
        load_converter_file(tmp_path / "nope.py")


def test_normalize_key():
    assert normalize_key("aten.erfinv.default") == ["erfinv.default"]
    assert normalize_key(torch.ops.aten.erfinv.default) == ["erfinv.default"]
    assert "add.Tensor" in normalize_key("aten.add") and "add.Scalar" in normalize_key("aten.add")
    assert "erfinv.default" in normalize_key(torch.ops.aten.erfinv)
    assert normalize_key("my_op.default") == ["my_op.default"]  # another namespace: kept
    assert normalize_key("getitem") == ["getitem"]  # TVM keys Python operators by bare name
    assert normalize_key("mul") == ["mul"]


# --------------------------------------------------------------------------------------------
# irviz's built-in converters


class CacheLikeCat(torch.nn.Module):
    """Starts from an empty 1-D tensor and concatenates a 4-D one onto it, as transformers'
    DynamicCache does (torch.cat skips empty 1-D operands)."""

    def forward(self, k):
        cache = torch.tensor([])
        cache = torch.cat([cache, k], dim=-2)
        both = torch.cat([cache, k * 2], dim=-2)
        return both + 1


def test_cat_drops_empty_1d_operand():
    from tvm.relax.frontend.torch import from_exported_program

    loaded = _loaded(CacheLikeCat(), torch.randn(1, 2, 3, 4))
    cap = capture(loaded)
    with pytest.raises(Exception, match="ndim"):  # bare TVM: concat of 1-D and 4-D
        from_exported_program(cap.exported, run_ep_decomposition=False)
    imp = import_model(cap)
    r = _zero_build_compare(loaded, imp, cap)
    assert r.allclose and r.max_abs_error == 0.0


class BoolCumsum(torch.nn.Module):
    """Position ids from a padding mask, as transformers builds them (bool cumsum -> int64)."""

    def forward(self, ids):
        mask = ids.ne(0)
        return (mask.cumsum(-1) * mask).to(torch.float32) + mask.to(torch.int32).cumprod(-1)


def test_cumsum_of_bool_builds(monkeypatch):
    from irviz.core.frontend import builtin_converters
    from irviz.core.errors import BuildError

    ids = torch.tensor([[3, 1, 0, 4, 5, 0]])
    loaded = _loaded(BoolCumsum(), ids)
    cap = capture(loaded)
    with monkeypatch.context() as m:  # without irviz's converter: TVM's bool cumsum fails to build
        m.setattr(builtin_converters, "BUILTIN_CONVERTERS", {})
        with pytest.raises(BuildError):
            build(import_model(cap).mod)
    imp = import_model(cap)
    r = _zero_build_compare(loaded, imp, cap)
    assert r.allclose and r.max_abs_error == 0.0


class NegativeIndex(torch.nn.Module):
    """Falcon's multi-query split (`qkv[..., [-2], :]`) and a run-time index tensor with negatives."""

    def forward(self, x, i):
        return x[..., [-2], :] * 2 + x[:, i].sum() + x[..., [-1], :]


def test_negative_indices_count_from_the_end():
    # TVM's converter alone reads before the tensor here (garbage, or a segfault): not run in-process
    loaded = _loaded(NegativeIndex(), torch.randn(1, 8, 6, 8), torch.tensor([-1, 2, -3]))
    cap = capture(loaded)
    r = _zero_build_compare(loaded, import_model(cap), cap)
    assert r.allclose and r.max_abs_error < 1e-5


class IntegerLog(torch.nn.Module):
    """DeBERTa-v2's relative position buckets: log and sqrt of int64 tensors (torch gives float)."""

    def forward(self, pos):
        return torch.log(pos.abs() + 1) * torch.sqrt(pos.abs()) + torch.exp(-pos.abs())


def test_float_functions_of_integer_tensors_are_computed_in_float():
    loaded = _loaded(IntegerLog(), torch.arange(-8, 8).reshape(4, 4))
    cap = capture(loaded)
    r = _zero_build_compare(loaded, import_model(cap), cap)
    assert r.allclose and r.max_abs_error < 1e-5


class IntegerDivisions(torch.nn.Module):
    """Mixture-of-experts routing divides int64 positions by a Python int (`perm // top_k`)."""

    def forward(self, ids, x):
        floor = ids // 2
        trunc = torch.div(ids, 3, rounding_mode="trunc")
        true = ids / 4                        # torch: float
        return floor.float() + trunc.float() + true + x / 2


def test_divisions_follow_torchs_dtypes_and_rounding():
    ids = torch.tensor([-7, -4, -1, 0, 3, 5, 8, 9])
    loaded = _loaded(IntegerDivisions(), ids, torch.randn(8))
    cap = capture(loaded)
    r = _zero_build_compare(loaded, import_model(cap), cap)
    assert r.allclose and r.max_abs_error < 1e-6


class ExpertCounts(torch.nn.Module):
    """What a mixture-of-experts layer does with histc: tokens per expert, then cumulative offsets."""

    def forward(self, ids, x):
        counts = torch.histc(ids.float(), bins=4, min=0, max=3)
        wide = torch.histc(x, bins=5, min=-1.0, max=1.0)   # values outside [-1, 1] are not counted
        return torch.cumsum(counts, 0), wide


def test_histc_counts_like_torch():
    ids = torch.tensor([3, 0, 0, 2, 3, 3, 1, 0])
    x = torch.tensor([-2.0, -1.0, -0.5, 0.0, 0.3, 0.99, 1.0, 5.0, 0.6])
    loaded = _loaded(ExpertCounts(), ids, x)
    cap = capture(loaded)
    r = _zero_build_compare(loaded, import_model(cap), cap)
    assert r.allclose and r.max_abs_error == 0.0


class GroupedMM(torch.nn.Module):
    """transformers' grouped_mm_fallback: rows grouped by expert times that expert's weight."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(3, 4, 5))

    def forward(self, x, offs):
        return torch.ops.transformers.grouped_mm_fallback(x, self.weight, offs=offs)


def test_grouped_mm_fallback_matches_transformers():
    pytest.importorskip("transformers.integrations.moe")
    import transformers.integrations.moe  # noqa: F401 - registers torch.ops.transformers.*

    torch.manual_seed(0)
    # expert 1 gets no rows, and the last row belongs to no expert (it stays zero)
    offs = torch.tensor([2, 2, 5], dtype=torch.int32)
    loaded = _loaded(GroupedMM(), torch.randn(6, 4), offs)
    cap = capture(loaded)
    r = _zero_build_compare(loaded, import_model(cap), cap)
    assert r.allclose and r.max_abs_error < 1e-5


def test_user_converter_overrides_builtin():
    loaded = _loaded(CacheLikeCat(), torch.randn(1, 2, 3, 4))
    cap = capture(loaded)
    seen = []

    def mine(node, imp):
        from irviz.core.frontend.builtin_converters import convert_cat

        seen.append(node.name)
        return convert_cat(node, imp)

    import_model(cap, custom_convert_map={"aten.cat.default": mine})
    assert len(seen) == 2
