"""The CPU pipelines fuse reshapes and transposes into the kernel before them: a BERT-like encoder
(built from code, random weights) has no kernel of its own for the transposes around attention,
the residual adds and the gelu are in their matmul's kernel, it launches fewer kernels per layer,
and it still gives torch's numbers."""
from __future__ import annotations

import pytest
import torch
import tvm
from tvm import relax, s_tir, tirx

from irviz.core import passes
from irviz.core.backend import build as build_mod
from irviz.core.backend.run import run_and_compare
from irviz.core.frontend import hf
from irviz.core.frontend.capture import capture
from irviz.core.frontend.importer import import_model
from irviz.core.frontend.model_file import LoadedModel
from irviz.core.schedules.layout_fusion import ELEMWISE, INJECTIVE, PATTERN_ATTR, fuse_layout_ops
from irviz.core.session import Session

LAYERS = 2


def _encoder() -> LoadedModel:
    import transformers

    torch.manual_seed(3)
    cfg = transformers.BertConfig(hidden_size=48, num_hidden_layers=LAYERS, num_attention_heads=3,
                                  intermediate_size=96, vocab_size=50, max_position_embeddings=32)
    model = transformers.BertModel(cfg, add_pooling_layer=False).eval()
    return LoadedModel(model, (torch.randint(0, 50, (1, 12)),), "bert-like", "bert-like")


def _has_reduction(func) -> bool:
    sch = s_tir.Schedule(func)
    stack = list(sch.get_child_blocks(sch.get_sblock("root")))
    while stack:
        b = stack.pop()
        if any(iv.iter_type == tirx.IterVar.CommReduce for iv in sch.get(b).iter_vars):
            return True
        stack.extend(sch.get_child_blocks(b))
    return False


@pytest.mark.skipif(not hf.available(), reason="transformers is not installed")
def test_attention_layouts_residuals_and_gelu_fuse_into_the_matmuls():
    loaded = _encoder()
    cap = capture(loaded)
    # the tile searches measure; what is fused does not depend on them
    steps = [i for i in passes.get_pipeline("tir-cpu") if not i.name.startswith("CPUTune")]
    session = Session(import_model(cap), cap)
    session.set_pipeline(steps)
    assert session.run_to_end() is not None, session.error
    mod = session.module()
    call_tir = tvm.ir.Op.get("relax.call_tir")
    called = []
    relax.analysis.post_order_visit(
        mod["main"], lambda e: called.append(e.args[0].name_hint)
        if isinstance(e, relax.Call) and e.op.same_as(call_tir) else None)
    alone = [n for n in called if any(op in n for op in ("transpose", "gelu", "add"))
             and not _has_reduction(mod[n]) and "layer_norm" not in n]
    # the embeddings' sum (word + position + type) is the only add with no matmul before it
    assert [n for n in alone if "transpose" in n] == [], alone
    assert [n for n in alone if "gelu" in n] == [], alone
    assert len([n for n in alone if "add" in n]) <= 1, alone

    built = build_mod.build(mod)
    res = run_and_compare(built, loaded, repeats=1)
    assert res.allclose and res.max_abs_error <= 1e-5, res.max_abs_error
    launches = sum(k.calls for k in res.kernels)
    # per layer: 3 projections (heads laid out in their write-back), QK^T with the mask add, the
    # mask check, softmax, softmax.V with the heads merged back, out-projection + residual, layer
    # norm, FFN up + gelu, FFN down + residual, layer norm; before, each transpose, add and gelu
    # was a launch of its own (19 per layer)
    assert launches <= 12 * LAYERS + 4, sorted((k.name, k.calls) for k in res.kernels)


def test_data_movement_kernels_are_marked_elementwise_gathers_are_not():
    x = relax.Var("x", relax.TensorType((1, 6, 2, 4), "float32"))
    idx = relax.Var("i", relax.TensorType((3,), "int32"))
    table = relax.Var("t", relax.TensorType((10, 8), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, idx, table]):
        with bb.dataflow():
            t = bb.emit(relax.op.permute_dims(x, [0, 2, 1, 3]))
            r = bb.emit(relax.op.reshape(t, (2, 24)))
            g = bb.emit(relax.op.take(table, idx, axis=0))
            out = bb.emit_output(relax.Tuple([r, g]))
        bb.emit_func_output(out)
    mod = relax.transform.AnnotateTIROpPattern()(relax.transform.LegalizeOps()(bb.get()))
    after = fuse_layout_ops()(mod)
    patterns = {gv.name_hint: int(f.attrs[PATTERN_ATTR]) for gv, f in after.functions.items()
                if isinstance(f, tirx.PrimFunc)}
    before = {gv.name_hint: int(f.attrs[PATTERN_ATTR]) for gv, f in mod.functions.items()
              if isinstance(f, tirx.PrimFunc)}
    assert before["transpose"] == INJECTIVE and patterns["transpose"] == ELEMWISE
    assert patterns["reshape"] == ELEMWISE
    assert patterns["take"] == before["take"] != ELEMWISE
