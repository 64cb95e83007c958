"""Depthwise-separable blocks (MobileNet's) through tir-cpu: the depthwise conv gets its own schedule
(rows as vectors, widths 14 and 7 included), batch norm is folded into the weights and its bias and
ReLU6 are fused into the convolutions' write-back, a 1x1 convolution reads its input in place, and the numbers stay torch's."""
from __future__ import annotations

import json

import pytest
import tvm
from tvm import s_tir, te, topi, tirx

from irviz.core import passes
from irviz.core.schedules import rules as S
from irviz.core.backend import build as build_mod
from irviz.core.backend.run import run_and_compare
from irviz.core.frontend.capture import capture
from irviz.core.frontend.importer import import_model
from irviz.core.frontend.model_file import load_model
from irviz.core.schedules.depthwise import depthwise_blocks
from irviz.core.session import Session

MODEL = '''
import torch
from torch import nn


def _block(cin, cout, stride):
    mid = cin * 2
    return nn.Sequential(
        nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU6(),
        nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False), nn.BatchNorm2d(mid), nn.ReLU6(),
        nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))


def get_model():
    torch.manual_seed(0)
    model = nn.Sequential(_block(8, 8, 1), _block(8, 16, 2))  # 14x14, then 7x7
    for m in model.modules():  # batch norms with statistics far from (0, 1): folding them matters
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.5, 0.5)
    return model.eval(), (torch.randn(1, 8, 14, 14),)
'''


def _notes(func) -> dict:
    if func.attrs is None or S.NOTES_ATTR not in func.attrs:
        return {}
    return {str(k): str(v) for k, v in func.attrs[S.NOTES_ATTR].items()}


@pytest.fixture(scope="module")
def separable(tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "separable.py"
    path.write_text(MODEL)
    loaded = load_model(str(path))
    return loaded, capture(loaded)


def _tir_cpu(loaded, captured):
    session = Session(import_model(captured), captured)
    session.set_pipeline(passes.get_pipeline("tir-cpu"))
    assert session.run_to_end() is not None, session.error and session.error.user_message()
    return session.module()


@pytest.mark.parametrize("parallel_min_work", [S.PARALLEL_MIN_WORK, 0], ids=["one-thread", "parallel"])
def test_depthwise_block_is_scheduled_fused_and_matches_torch(separable, monkeypatch, parallel_min_work):
    monkeypatch.setattr(S, "PARALLEL_MIN_WORK", parallel_min_work)
    loaded, captured = separable
    mod = _tir_cpu(loaded, captured)
    funcs = {gv.name_hint: f for gv, f in mod.functions.items() if isinstance(f, tirx.PrimFunc)}
    assert not [n for n in funcs if "batch_norm" in n], "batch norm left as a kernel of its own"
    depthwise = {n: f for n, f in funcs.items() if "depthwise" in _notes(f).get("CPUTileConv2d", "")}
    assert len(depthwise) == 2, {n: _notes(f) for n, f in funcs.items()}
    widths = set()
    for func in depthwise.values():
        note = _notes(func)["CPUTileConv2d"]
        # batch norm folded into the weights: its bias add and ReLU6 on the accumulator
        assert "2 epilogue block(s) fused into the write-back" in note, note
        assert "as one vector" in note and "input padded per channel" in note, note
        assert ("one thread" in note) == (parallel_min_work > 0), note
        assert "CPUParallelVectorize" not in _notes(func) or "not applied" not in _notes(func)["CPUParallelVectorize"]
        text = func.script()
        assert "T.vectorized" in text and ("T.parallel" in text) == (parallel_min_work == 0)
        widths.add(int(func.params[-1].ty.shape[3]))
    assert widths == {14, 7}  # rows with no power-of-two factor are vectors too
    pointwise = [_notes(f)["CPUTileConv2d"] for f in funcs.values()
                 if _notes(f).get("CPUTileConv2d", "").startswith("conv2d_nchw:")]
    assert pointwise and all("unpadded input read in place" in n for n in pointwise), pointwise
    res = run_and_compare(build_mod.build(mod), loaded, repeats=1)
    assert res.allclose and res.max_abs_error < 1e-4, res.max_abs_error


def _group_conv(channels, size, stride):
    data = te.placeholder((1, channels, size, size), name="data")
    weight = te.placeholder((channels, 1, 3, 3), name="weight")
    out = topi.nn.group_conv2d_nchw(data, weight, stride, 1, 1, channels, "float32")
    return te.create_prim_func([data, weight, out])


@pytest.mark.parametrize("size,stride", [(14, 1), (14, 2), (40, 1)])
def test_depthwise_schedule_alone_keeps_the_numbers(size, stride):
    import numpy as np

    func = _group_conv(6, size, stride)
    sch = s_tir.Schedule(func)
    assert len(depthwise_blocks(sch)) == 1
    notes = S.schedule_depthwise(sch, 16, lambda sch, loop, block: False)
    assert len(notes) == 1 and "depthwise" in notes[0], notes
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 6, size, size)).astype("float32")
    w = rng.standard_normal((6, 1, 3, 3)).astype("float32")
    out_size = (size + 2 - 3) // stride + 1
    outs = []
    for f in (func, sch.mod["main"]):
        lib = tvm.compile(tvm.IRModule({"main": f.with_attr("global_symbol", "main")}),
                          target=tvm.target.Target.from_device(tvm.cpu()))
        args = [tvm.runtime.tensor(a) for a in (x, w, np.zeros((1, 6, out_size, out_size), "float32"))]
        lib["main"](*args)
        outs.append(args[-1].numpy())
    assert "T.vectorized" in sch.mod["main"].script()
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-5, atol=1e-5)


def test_host_target_can_stand_in_for_another_isa(monkeypatch):
    from irviz.core.target import target_spec, vector_isa
    from irviz.core.tvm_compat import HOST_TARGET_ENV, host_target

    monkeypatch.setenv(HOST_TARGET_ENV, json.dumps(target_spec("x86-avx2")[1]))
    assert vector_isa(host_target()) == ("AVX2", 8)
    assert str(host_target().attrs["mcpu"]) == "haswell"
    monkeypatch.delenv(HOST_TARGET_ENV)
    assert str(host_target().kind.name) == "llvm"


def test_decisions_are_keyed_by_the_rules_version():
    from irviz.core.tuning.decision_cache import machine_key

    assert json.loads(machine_key())["rules"] == S.RULES_VERSION
