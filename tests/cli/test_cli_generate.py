"""irviz generate MODEL --tokens N: TVM's greedy tokens against generate(), timed, as JSON."""
import json
import textwrap

import pytest

from irviz.cli.main import main

pytest.importorskip("transformers")

LLAMA_FILE = textwrap.dedent("""
    import transformers
    from irviz.core.frontend import hf

    def get_model():
        cfg = transformers.LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                       initializer_range=0.1, bos_token_id=1, eos_token_id=2)
        model = hf.causal_lm(transformers.LlamaForCausalLM, cfg, seed=3)
        return model, (hf.token_ids(96, seq=10, seed=4),)
""")

NOT_AN_LM_FILE = textwrap.dedent("""
    import torch

    def get_model():
        return torch.nn.Sequential(torch.nn.Embedding(32, 8), torch.nn.Linear(8, 32)), \\
            (torch.zeros(1, 6, dtype=torch.long),)
""")


def _run(tmp_path, source, *extra):
    model = tmp_path / "model.py"
    model.write_text(source)
    out = tmp_path / "out.json"
    code = main(["generate", str(model), "--json", str(out), *extra])
    return code, json.loads(out.read_text())


def test_generate_writes_matching_tokens_and_both_runtimes_figures(tmp_path, capsys):
    code, s = _run(tmp_path, LLAMA_FILE, "--tokens", "8", "--repeats", "2")
    assert code == 0, capsys.readouterr().err
    assert s["ok"] and s["tokens_match"] and s["first_mismatch"] is None
    assert len(s["tvm_tokens"]) == 8 and s["tvm_tokens"] == s["torch_tokens"]
    for key in ("prefill_ms", "decode_ms_per_token", "tokens_per_s"):
        assert s[key]["tvm"] > 0 and s[key]["torch"] > 0
    assert s["tokens_per_s"]["tvm"] == pytest.approx(1e3 / s["decode_ms_per_token"]["tvm"])
    # 2 layers x (keys, values) x (1, 2 KV heads, 10 + 8 positions, head 8) float32
    assert s["kv_cache_bytes"] == 4 * 2 * 18 * 8 * 4 and s["max_len"] == 18
    assert s["kv_cache_bytes_by_length"]["18"] == s["kv_cache_bytes"]
    assert s["kv_cache_bytes_by_length"]["8"] == 4 * 2 * 8 * 8 * 4  # 8 of the 18 positions filled
    assert isinstance(s["reliable"], bool) and (s["reason"] is None) == s["reliable"]
    assert s["model"].endswith("model.py") and s["pipeline"] == "zero" and s["target"] == "host"
    assert s["programs"]["decode"]["signature"].startswith("main(token, position, cache_0")
    assert "tokens match" in capsys.readouterr().out


def test_generate_without_weights_estimates_prefill_decode_and_the_bandwidth_limit(tmp_path, capsys):
    code, s = _run(tmp_path, LLAMA_FILE, "--tokens", "4", "--no-weights")
    assert code == 0, capsys.readouterr().err
    assert s["estimated_prefill_ms"] > 0 and s["estimated_decode_ms_per_token"] > 0
    assert s["bandwidth_limit_ms_per_token"] > 0 and s["bandwidth_gbs"] > 0
    assert s["weight_bytes"] > 0 and s["kv_cache_bytes"] == 4 * 2 * 14 * 8 * 4
    # the programs' cache length is symbolic: the estimates above bound it to the 14 positions
    assert s["context_length"] == "symbolic" and s["context_reason"] is None and s["max_len"] == 14
    # decode reads the filled positions only; estimated at the last one, every kernel counted
    assert s["decode_reads"] == "used" and s["not_estimated"]["decode"] == []
    assert s["tvm_tokens"] is None and s["tokens_match"] is None  # nothing ran


def test_a_model_that_is_not_a_causal_lm_fails_saying_what_was_looked_for(tmp_path, capsys):
    code, s = _run(tmp_path, NOT_AN_LM_FILE, "--tokens", "4")
    assert code == 1
    err = capsys.readouterr().err
    assert "not a causal language model" in err and "Sequential" in err
    assert s["ok"] is False and s["failed_stage"] == "load" and "AutoModelForCausalLM" in s["error"]
