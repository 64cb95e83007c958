"""irviz generate --bisect: a wrong pass in the pipeline makes the tokens differ; the bisect of the
program that made the first wrong token names that pass in the JSON and the text, and without
--bisect the mismatch says how to run it."""
import json
import textwrap
from pathlib import Path

import pytest

from irviz.cli.main import main

pytest.importorskip("transformers")

PASSES = str(Path(__file__).resolve().parents[1] / "core" / "data" / "bisect_passes.py")
# the wrong pass needs high-level R.add: ahead of LegalizeOps, in both programs
WRONG = "WrongAddToSubtract,LegalizeOps,AnnotateTIROpPattern,FoldConstant,FuseOps,FuseTIR"

LM_FILE = textwrap.dedent("""
    import transformers
    from irviz.core.frontend import hf

    def get_model():
        cfg = transformers.LlamaConfig(vocab_size=80, hidden_size=32, intermediate_size=48, num_hidden_layers=1,
                                       num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32,
                                       initializer_range=0.2, bos_token_id=1, eos_token_id=2)
        return hf.causal_lm(transformers.LlamaForCausalLM, cfg, seed=5), (hf.token_ids(80, seq=6, seed=6),)
""")


def _run(tmp_path, *extra):
    model = tmp_path / "lm.py"
    model.write_text(LM_FILE)
    out = tmp_path / "out.json"
    code = main(["generate", str(model), "--tokens", "3", "--repeats", "1", "--passes", PASSES,
                 "--pipeline", WRONG, "--json", str(out), *extra])
    return code, json.loads(out.read_text())


def test_bisect_names_the_wrong_pass_of_the_program_that_made_the_first_wrong_token(tmp_path, capsys):
    code, s = _run(tmp_path, "--bisect")
    assert code == 1 and not s["tokens_match"]
    step = s["first_mismatch"]["step"]
    b = s["bisect"]
    assert b["token_step"] == step and b["program"] == ("prefill" if step == 0 else "decode")
    assert (b["first_bad"]["index"], b["first_bad"]["pass"], b["first_bad"]["stage"]) == (
        1, "WrongAddToSubtract", "compare")
    assert b["diverging"]["first_op"] == "relax.subtract"
    assert {c["index"] for c in b["steps_checked"]} >= {0, 1}
    text = capsys.readouterr()
    assert "first bad pass step 1 WrongAddToSubtract" in text.out
    assert "--bisect" not in text.err  # it ran: no advice to run it


def test_without_bisect_the_mismatch_says_how_to_run_it(tmp_path, capsys):
    code, s = _run(tmp_path)
    assert code == 1 and not s["tokens_match"] and s["bisect"] is None
    err = capsys.readouterr().err
    assert f"--bisect` finds the pass that breaks step {s['first_mismatch']['step']}" in err
