"""Generation through the CPU schedules: the decode step's one-row matmuls are CPUMatVec's, the
tokens are generate's, and a weight both programs pack alike is held once."""
from __future__ import annotations

import pytest
import torch  # noqa: F401 - transformers needs it first

transformers = pytest.importorskip("transformers")

from irviz.core.frontend import hf
from irviz.core.generate import generation as g
from irviz.core.generate.programs import TRANSFORM_PARAMS, open_programs

TOKENS = 32


@pytest.fixture(scope="module")
def generated():
    # a Llama-family decoder whose widths give its matmuls several vector panels
    cfg = transformers.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=96,
                                   initializer_range=0.1, bos_token_id=1, eos_token_id=2)
    lm, prompt = hf.build(transformers.LlamaForCausalLM, cfg, seed=0), hf.token_ids(256, seq=10, seed=2)
    progs = open_programs(lm, (prompt,), spec="test", tokens=TOKENS, pipeline="tir-cpu")
    gen = g.TvmGenerator(progs)
    tokens, logits = gen.generate(prompt.numpy(), TOKENS)
    ref, ref_logits = g.torch_generate(lm, prompt, TOKENS)
    return progs, gen, g.compare_steps(tokens, ref, logits, ref_logits), tokens


def _notes(program):
    mod = program.session.module()
    return {gv.name_hint: dict(f.attrs["irviz.schedule_notes"]) for gv, f in mod.functions.items()
            if f.attrs is not None and "irviz.schedule_notes" in f.attrs}


def test_the_tokens_are_generates_with_the_decode_matmuls_as_matrix_vector_kernels(generated):
    progs, gen, result, tokens = generated
    assert len(set(tokens)) > 3
    assert result["tokens_match"], result["first_mismatch"]
    decode = [n for n, notes in _notes(progs.decode).items() if "matrix-vector" in notes.get("CPUMatVec", "")]
    # q, k, v, o, gate, up, down per layer and the LM head
    assert len(decode) >= 8, decode
    # the prompt's matmuls have several rows: the matmul tiles' work
    assert not any("matrix-vector" in notes.get("CPUMatVec", "") for notes in _notes(progs.prefill).values())


def test_a_weight_both_programs_pack_alike_is_held_once(generated):
    progs, gen, _, _ = generated
    shared = progs.decode.from_prefill
    assert shared
    for i, j in shared.items():
        assert gen.decode_weights[i] is gen.prefill_weights[j]
        assert tuple(gen.decode_weights[i].shape) == tuple(gen.prefill_weights[j].shape)
    # decode's own transform no longer computes them
    own = progs.decode.built.mod[TRANSFORM_PARAMS].ret_ty.fields
    assert len(own) == len(gen.decode_weights) - len(shared)


def test_a_rebuilt_prefill_rebuilds_the_decode_that_takes_its_tensors(generated):
    progs, _, _, _ = generated
    before = progs.decode.built
    progs.prefill.built = None
    progs.build()
    assert progs.decode.built is not before
    gen = g.TvmGenerator(progs)
    tokens, _ = gen.generate(progs.prompt.numpy(), 8)
    assert tokens == g.torch_generate(progs.lm, progs.prompt, 8)[0]


def test_each_decode_kernel_is_given_its_bytes_and_share_of_the_bandwidth(generated):
    from irviz.core.generate.decode_kernels import decode_kernel_rows

    progs, gen, _, _ = generated
    rows = decode_kernel_rows(gen, 10.0, top=100)["kernels"]
    # the LM head: the hidden vector, the 64 x 256 weight in panels, the logits
    head = (64 + 64 * 256 + 256) * 4
    row = next(r for r in rows if r["bytes"] == head * r["calls"])
    assert row["share"] == pytest.approx(row["bytes"] / (row["ms"] * 1e6) / 10.0)
    assert all(r["ms"] >= 0 and r["calls"] >= 1 for r in rows)
