"""The CPU pipelines (`fast-cpu`: library dispatch + schedules; `tir-cpu`: schedules only) give
PyTorch's numbers on every sample, and the dispatch pass leaves what torch does not take to TensorIR.

Every sample in irviz/samples runs through both pipelines, is built and compared with torch
(`run_and_compare`). ResNet-18, the GPT and the transformers samples are marked slow (CI still runs
them); the whole file takes a few minutes on two cores.
"""
from __future__ import annotations

import pytest
import tvm
from tvm import relax

from irviz.core.backend import build as build_mod
from irviz.core.backend import run as run_mod
from irviz.core.backend import library_functions as dispatch
from irviz.core.views import decisions
from irviz.core.frontend import hf
from irviz.core import passes
from irviz.core.frontend.capture import capture
from irviz.core.frontend.converters import load_converter_file
from irviz.core.frontend.importer import import_model
from irviz.core.frontend.model_file import load_model
from irviz.core.frontend.sample_files import is_ir_sample, list_samples, sample_path
from irviz.core.session import Session

NOT_MODELS = {"example_converter"}  # a converter file, not a model
SLOW = {"resnet18", "gpt"}
# IR samples (course_te, course_mymodule, ...) have no torch model to compare with
# published sizes (no weights, or 5 GB of them): benchmarks/full_size.py opens them
FULL_SIZE = {"llama3_8b_shape", "llama3_8b_1layer", "qwen2_7b_shape", "mixtral_8x7b_shape"}
SAMPLES = [n for n, _ in list_samples()
           if n not in NOT_MODELS and n not in FULL_SIZE and not is_ir_sample(n)]


def _params(names):
    out = []
    for n in names:
        marks = []
        if n in SLOW or n.startswith("hf_"):
            marks.append(pytest.mark.slow)
        if n.startswith("hf_"):
            marks.append(pytest.mark.skipif(not hf.available(), reason="transformers is not installed"))
        out.append(pytest.param(n, marks=marks, id=n))
    return out


_loaded_cache: dict = {}


def _captured(name):
    if name not in _loaded_cache:
        loaded = load_model(f"sample:{name}")
        _loaded_cache.clear()  # keep one model alive at a time
        _loaded_cache[name] = (loaded, capture(loaded))
    return _loaded_cache[name]


def _run_pipeline(name, pipeline, **dispatch_params):
    loaded, cap = _captured(name)
    convert = load_converter_file(sample_path("example_converter")) if name == "unsupported_op" else None
    session = Session(import_model(cap, custom_convert_map=convert), cap)
    invs = passes.get_pipeline(pipeline)
    for inv in invs:  # e.g. min_macs=0: dispatch every conv2d/matmul, however small
        if inv.name == "LibraryDispatch":
            inv.params.update(dispatch_params)
    session.set_pipeline(invs)
    assert session.run_to_end() is not None, session.error and session.error.user_message()
    return loaded, session.module()


@pytest.mark.parametrize("pipeline", ["fast-cpu", "tir-cpu"])
@pytest.mark.parametrize("name", _params(SAMPLES))
def test_cpu_pipeline_matches_torch(name, pipeline):
    loaded, mod = _run_pipeline(name, pipeline)
    built = build_mod.build(mod)
    res = run_mod.run_and_compare(built, loaded, repeats=1)
    assert res.allclose, f"{name}/{pipeline}: max abs error {res.max_abs_error}"
    alt = loaded.alt_inputs
    if alt is not None:  # symbolic shapes: another size through the same build
        res = run_mod.run_and_compare(built, loaded, repeats=1, inputs=alt)
        assert res.allclose, f"{name}/{pipeline} on other input sizes: max abs error {res.max_abs_error}"
    calls = dispatch.library_calls(mod)
    if pipeline == "tir-cpu":
        assert calls == [], "tir-cpu must not call the library"


def _call_tir_callees(mod) -> list[str]:
    names = []

    def visit(e):
        if isinstance(e, relax.Call) and e.op == tvm.ir.Op.get("relax.call_tir"):
            names.append(e.args[0].name_hint)

    relax.analysis.post_order_visit(mod["main"], visit)
    return names


def test_fast_cpu_sends_conv_to_torch_and_keeps_the_rest_in_tensorir():
    loaded, mod = _run_pipeline("small_cnn", "fast-cpu", measure=False, min_macs=0,
                                keep_tileable_conv=False)
    assert run_mod.run_and_compare(build_mod.build(mod), loaded, repeats=1).allclose
    calls = dispatch.library_calls(mod)
    assert any(c.startswith("irviz.torch.conv2d") for c in calls), calls
    # batch norm, relu, flatten stay TensorIR kernels (the course's mixture), and are scheduled
    kernels = _call_tir_callees(mod)
    assert kernels and not any("conv2d" in k for k in kernels), kernels
    for k in kernels:
        assert "irviz.schedule_notes" in mod[k].attrs, k


def test_fast_cpu_keeps_convs_that_tensorir_blocks():
    _, mod = _run_pipeline("small_cnn", "fast-cpu", measure=False, min_macs=0, keep_tileable_conv=True)
    assert not any(c.startswith("irviz.torch.conv2d") for c in dispatch.library_calls(mod))


def test_fast_cpu_measures_each_conv_and_matmul_and_records_why():
    _, mod = _run_pipeline("small_cnn", "fast-cpu")
    recs = [d for d in decisions.decisions_of(mod) if d["kind"] == "library_or_tir"]
    ops = sorted(r["workload"].split()[0] for r in recs)
    assert ops == ["conv2d", "matmul"], recs
    sent = {c.split(".")[2] for c in dispatch.library_calls(mod)}
    for r in recs:
        assert r["choice"] in ("torch", "tir") and r["torch_ms"] and r["tir_ms"], r
        assert (r["workload"].split()[0] in sent) == (r["choice"] == "torch"), (r, sent)


def test_fast_cpu_keeps_small_matmuls_in_tensorir():
    # the MLP's matmuls (784×128, 128×10) are cheaper as TensorIR than as a call into torch
    _, mod = _run_pipeline("mlp", "fast-cpu", measure=False)
    assert dispatch.library_calls(mod) == []
    _, mod = _run_pipeline("mlp", "fast-cpu", measure=False, min_macs=0)
    assert dispatch.library_calls(mod) == ["irviz.torch.matmul"]


def test_dispatch_leaves_unsupported_ops_to_tensorir():
    # the erfinv sample (with its converter): only its matmuls may go to torch
    _, mod = _run_pipeline("unsupported_op", "fast-cpu", measure=False, min_macs=0)
    kernels = _call_tir_callees(mod)
    assert kernels, "erfinv/tanh must stay TensorIR"
    assert all(c.startswith(dispatch.PREFIX) for c in dispatch.library_calls(mod))


def test_tir_cpu_tiles_conv2d_and_prepacks_its_weight():
    _, mod = _run_pipeline("small_cnn", "tir-cpu")
    conv = [gv.name_hint for gv, f in mod.functions.items()
            if isinstance(f, tvm.tirx.PrimFunc) and "conv2d" in gv.name_hint]
    assert conv, [gv.name_hint for gv in mod.functions]
    notes = {str(k): str(v) for k, v in mod[conv[0]].attrs["irviz.schedule_notes"].items()}
    assert "output channels per vector" in notes["CPUTileConv2d"], notes
    # the weight re-layout was folded at compile time: no prepack kernel is left to call
    assert not any("weight_prepack" in k for k in _call_tir_callees(mod))
    text = mod[conv[0]].script()
    assert "T.vectorized" in text and "T.unroll" in text
    assert "T.parallel" not in text  # 8×8×8 outputs: too small to wake the thread pool
    assert "one thread (small)" in notes["CPUTileConv2d"]
