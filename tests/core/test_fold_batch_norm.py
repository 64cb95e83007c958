"""FoldBatchNorm: conv2d + inference batch norm becomes one conv2d with scaled weights and a bias,
computed at compile time, with torch's numbers; what it cannot fold is left as it was."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from irviz.core import passes
from irviz.core.backend import build as build_mod
from irviz.core.backend.run import run_and_compare
from irviz.core.frontend.capture import capture
from irviz.core.frontend.importer import import_model
from irviz.core.frontend.model_file import LoadedModel
from irviz.core.session import Session


def _model(groups: int, conv_bias: bool):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, groups=groups, bias=conv_bias), nn.BatchNorm2d(8),
                          nn.ReLU())
    bn = model[1]  # statistics far from (0, 1), so a fold that got them wrong shows
    bn.running_mean.uniform_(-2, 2)
    bn.running_var.uniform_(0.1, 4)
    bn.weight.data.uniform_(-1.5, 1.5)
    bn.bias.data.uniform_(-1, 1)
    return model.eval(), (torch.randn(1, 8, 10, 10),)


def _session(groups=1, conv_bias=False, keep_params=False, pipeline="FoldBatchNorm"):
    module, example = _model(groups, conv_bias)
    loaded = LoadedModel(module=module, example_inputs=example, spec="test", name="conv_bn")
    captured = capture(loaded)
    session = Session(import_model(captured, keep_params=keep_params), captured)
    session.set_pipeline(passes.parse_pipeline(pipeline))
    assert session.run_to_end() is not None, session.error and session.error.user_message()
    return loaded, session


@pytest.mark.parametrize("groups", [1, 8], ids=["conv", "depthwise"])
def test_batch_norm_becomes_the_convs_weights_and_keeps_torchs_numbers(groups):
    loaded, session = _session(groups, pipeline="FoldBatchNorm,zero")
    first = session.steps[1]  # 0 is the import
    text = first.mod["main"].script()
    assert "batch_norm" not in text and "R.add" in text, text
    assert first.changed and "1 batch norm(s) folded" in " ".join(first.notes)
    res = run_and_compare(build_mod.build(session.module()), loaded, repeats=1)
    assert res.allclose and res.max_abs_error < 1e-5, res.max_abs_error


@pytest.mark.parametrize("kwargs", [{"keep_params": True}, {"conv_bias": True}], ids=["weights-as-inputs", "conv-bias"])
def test_what_it_cannot_fold_stays_for_decompose(kwargs):
    _, session = _session(**kwargs)
    step = session.steps[1]
    assert "batch_norm" in step.mod["main"].script()
    assert not step.changed


def _conv_norm(return_conv: bool):
    """conv2d then batch_norm, returning the norm's output and, with `return_conv`, the conv's too."""
    import numpy as np
    from tvm import relax
    from tvm.script import relax as R

    rng = np.random.default_rng(0)
    w = relax.const(rng.standard_normal((4, 4, 3, 3)).astype("float32"))
    gamma, beta, mean = (relax.const(rng.uniform(0.5, 2, 4).astype("float32")) for _ in range(3))
    var = relax.const(rng.uniform(0.5, 2, 4).astype("float32"))
    bb = relax.BlockBuilder()
    x = relax.Var("x", R.Tensor((1, 4, 8, 8), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            conv = relax.op.nn.conv2d(x, w, padding=1)
            conv = bb.emit_output(conv) if return_conv else bb.emit(conv)
            norm = bb.emit(relax.op.nn.batch_norm(conv, gamma, beta, mean, var, axis=1, training=False))
            out = bb.emit_output(relax.TupleGetItem(norm, 0))
        bb.emit_func_output(relax.Tuple([conv, out]) if return_conv else out)
    return bb.get()


def test_a_conv_the_function_also_returns_keeps_its_weights():
    """The conv's output is returned as well as normalized: scaling its weights would change it."""
    from irviz.core.passes.registry import apply_pass

    assert "batch_norm" in apply_pass("FoldBatchNorm", _conv_norm(return_conv=True))["main"].script()
    # the same pair with only the norm returned does fold: the check above is about the extra use
    assert "batch_norm" not in apply_pass("FoldBatchNorm", _conv_norm(return_conv=False))["main"].script()
