"""The app's engine on a causal LM opened for generation: `generate_open` gives a state with both
programs and the KV cache, `choose_program` points the views and steps at the other program (each
keeps its own cursor), `generate` answers with the CLI's JSON dict stamped with both programs'
steps; bad requests change nothing."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("tvm")
pytest.importorskip("transformers", reason="sample:hf_llama needs the hf extra")

import irviz.engine as engine_mod


class _Chan:
    def send(self, msg):
        json.dumps(msg)


def _call(e, cmd, **args):
    reply = e.handle({"id": 1, "cmd": cmd, "args": args})
    json.dumps(reply, allow_nan=False)  # strict JSON, as on the wire
    return reply


@pytest.fixture(scope="module")
def engine():
    e = engine_mod.Engine(_Chan())
    reply = _call(e, "generate_open", spec="sample:hf_llama", tokens=8)
    return e, reply


def test_open_gives_both_programs_and_the_cache(engine):
    _, reply = engine
    assert reply["ok"], reply
    st = reply["result"]
    gen = st["generation"]
    assert st["model"] == "hf_llama prefill" and gen["program"] == "prefill"
    assert list(gen["programs"]) == ["prefill", "decode"]
    # prefill takes the prompt and the empty cache, whose length is symbolic in both programs
    tensors = gen["kv_cache_shape"]["tensors"]
    assert gen["programs"]["prefill"]["inputs"] == 1 + tensors and gen["programs"]["decode"]["inputs"] == 2 + tensors
    assert gen["context_length"] == "symbolic" and gen["context_reason"] is None
    assert gen["max_len"] == gen["prompt_len"] + 8 and gen["tokens"] == 8
    by = gen["kv_cache_bytes_by_length"]
    assert by[str(gen["max_len"])] == gen["kv_cache_bytes"] > 0
    assert list(by.values()) == sorted(by.values())
    assert st["cursor"] == len(st["steps"]) - 1 == gen["programs"]["prefill"]["cursor"]


def test_choose_program_points_views_and_steps_at_it(engine):
    e, _ = engine
    prefill_fx = _call(e, "fx_graph")["result"]
    st = _call(e, "choose_program", program="decode")["result"]
    assert st["model"] == "hf_llama decode" and st["generation"]["program"] == "decode"
    decode_fx = _call(e, "fx_graph")["result"]
    placeholders = lambda g: {n["label"] for n in g["nodes"] if n.get("op") == "placeholder"}
    assert placeholders(decode_fx) != placeholders(prefill_fx)
    st = _call(e, "back")["result"]
    gen = st["generation"]
    assert gen["programs"]["decode"]["cursor"] == st["cursor"] == gen["programs"]["prefill"]["cursor"] - 1
    assert len(gen["programs"]["decode"]["at"]) == st["cursor"]
    assert _call(e, "diff")["ok"]
    st = _call(e, "step")["result"]
    assert st["cursor"] == st["generation"]["programs"]["prefill"]["cursor"]


def test_generate_answers_with_the_cli_dict(engine):
    e, _ = engine
    reply = _call(e, "generate", tokens=8, repeats=2)
    assert reply["ok"], reply
    r = reply["result"]
    assert r["tokens_match"] and r["first_mismatch"] is None and r["mismatch"] is None
    assert len(r["tvm_tokens"]) == 8 and r["tvm_tokens"] == r["torch_tokens"]
    for key in ("prefill_ms", "decode_ms_per_token", "tokens_per_s"):
        assert r[key]["tvm"] > 0 and r[key]["torch"] > 0
    assert isinstance(r["reliable"], bool) and (r["reliable"] or r["reason"])
    st = _call(e, "state")["result"]
    assert r["stamp"]["steps"] == {p: st["generation"]["programs"][p]["cursor"] for p in ("prefill", "decode")}
    assert r["stamp"]["passes"]["decode"] == st["generation"]["programs"]["decode"]["at"]


def test_bad_requests_change_nothing(engine):
    e, _ = engine
    before = _call(e, "state")["result"]
    reply = _call(e, "choose_program", program="verify")
    assert not reply["ok"] and "prefill, decode" in reply["error"]["hint"]
    assert reply["state"]["model"] == before["model"]
    reply = _call(e, "generate", tokens=99)
    assert not reply["ok"] and "room for 1 to 8" in reply["error"]["message"]


def test_no_generation_without_a_causal_lm():
    e = engine_mod.Engine(_Chan())
    reply = _call(e, "generate", tokens=2)
    assert not reply["ok"] and "open a causal LM for generation" in reply["error"]["message"]
    reply = _call(e, "generate_open", spec="sample:mul_add", tokens=2)
    assert not reply["ok"] and reply["error"]["message"]
    assert _call(e, "state")["result"]["generation"] is None


def test_opening_another_model_ends_the_generation(engine):
    e, _ = engine
    st = _call(e, "open", spec="sample:mul_add")["result"]
    assert st["generation"] is None and st["model"] == "mul_add"
    reply = _call(e, "choose_program", program="decode")
    assert not reply["ok"] and reply["state"]["model"] == "mul_add"


def test_replay_opens_the_program_that_was_shown_at_its_cursor():
    e = engine_mod.Engine(_Chan())
    reply = _call(e, "replay", spec="sample:hf_llama", cursor=3,
                  generation={"pipeline": "zero", "tokens": 4, "max_len": 24, "program": "decode"})
    assert reply["ok"], reply
    st = reply["result"]
    assert st["model"] == "hf_llama decode" and st["cursor"] == 3
    gen = st["generation"]
    assert (gen["program"], gen["tokens"], gen["max_len"]) == ("decode", 4, 24)
    assert gen["programs"]["decode"]["cursor"] == 3
