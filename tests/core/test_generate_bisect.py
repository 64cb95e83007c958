"""A generation whose tokens part from torch's: the bisect of the program that made the first wrong
token, on that step's inputs as torch computed them, names the wrong pass and its op."""
from pathlib import Path

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")

from irviz.core.frontend import hf
from irviz.core.generate import generation as g
from irviz.core.generate.mismatch_bisect import bisect_generation, step_inputs
from irviz.core.generate.programs import open_programs
from irviz.core.passes import load_pass_file
from irviz.core.passes.plan import plan

PASSES = str(Path(__file__).resolve().parent / "data" / "bisect_passes.py")
TOKENS = 6


def small_llama():
    cfg = transformers.LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                   initializer_range=0.1, bos_token_id=1, eos_token_id=2)
    return hf.build(transformers.LlamaForCausalLM, cfg, seed=3), hf.token_ids(96, seq=7, seed=4)


@pytest.fixture(scope="module")
def broken_decode():
    """The decode program (only) with a wrong pass ahead of the zero pipeline, as a user who chose
    decode and edited its pipeline has it; the prefill is right."""
    load_pass_file(PASSES)
    lm, prompt = small_llama()
    progs = open_programs(lm, (prompt,), spec="test", tokens=TOKENS, pipeline="zero")
    s = progs.decode.session
    s.jump(0)
    s.set_pipeline(["WrongAddToSubtract", *plan("zero").passes])
    assert s.run_to_end() is not None
    gen = g.TvmGenerator(progs)
    tvm_tokens, tvm_logits = gen.generate(prompt.numpy(), TOKENS)
    torch_tokens, torch_logits = g.torch_generate(lm, prompt, TOKENS)
    return progs, g.compare_steps(tvm_tokens, torch_tokens, tvm_logits, torch_logits), torch_tokens, torch_logits


def test_the_decode_step_that_went_wrong_is_bisected_to_the_wrong_pass_and_its_op(broken_decode):
    progs, result, torch_tokens, _ = broken_decode
    assert not result["tokens_match"]
    step = result["first_mismatch"]["step"]
    assert step >= 1  # the prefill is right: the first token matches
    found = bisect_generation(progs, step, torch_tokens)
    assert found["program"] == "decode" and found["token_step"] == step
    assert found["position"] == 7 + step - 1
    fb = found["first_bad"]
    assert (fb["index"], fb["pass"], fb["stage"]) == (1, "WrongAddToSubtract", "compare")
    assert found["diverging"]["step"] == 1
    assert found["diverging"]["first_op"] == "relax.subtract"
    assert found["diverging"]["first_fx"].startswith("add")
    assert "WrongAddToSubtract" in found["message"] and "relax.subtract" in found["message"]
    assert f"position {found['position']}" in found["message"]


def test_the_step_inputs_are_torch_s_own_so_its_logits_are_generate_s(broken_decode):
    progs, _, torch_tokens, torch_logits = broken_decode
    k = 3  # past the first mismatch: TVM's cache has drifted, torch's has not
    name, inputs, position = step_inputs(progs, k, torch_tokens)
    assert name == "decode" and position == 7 + k - 1
    assert int(inputs[0]) == torch_tokens[k - 1]
    with torch.no_grad():
        logits = progs.decode.loaded.module(*inputs)[0]
    np.testing.assert_allclose(logits[0, -1].numpy(), torch_logits[k], rtol=1e-4, atol=1e-4)


def test_a_prefill_that_matches_has_no_bad_pass(broken_decode):
    progs, _, torch_tokens, _ = broken_decode
    found = bisect_generation(progs, 0, torch_tokens)
    assert found["program"] == "prefill" and found["position"] is None
    assert found["first_bad"] is None and found["diverging"] is None
    assert len(found["steps_checked"]) == 1  # the last changed step matched: nothing to search
    assert "no single pass" in found["message"]
