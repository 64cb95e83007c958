"""Generate tab ▸ Bisect this step, on the real engine: a decode program with a wrong pass makes the
tokens part from torch's; the button bisects that step's program, and the window shows the verdict
as Find first bad pass does (the decode program chosen, its bad step jumped to, the first diverging
binding selected). The verdict outlives the jump; the generation it came from does not."""
from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("transformers")

T = 300_000
SHOTS = os.environ.get("IRVIZ_SHOTS", "/tmp")
PASSES = str(Path(__file__).resolve().parents[1] / "core" / "data" / "bisect_passes.py")
WRONG = "WrongAddToSubtract,LegalizeOps,AnnotateTIROpPattern,FoldConstant,FuseOps,FuseTIR"

LM_FILE = textwrap.dedent("""
    import transformers
    from irviz.core.frontend import hf

    def get_model():
        cfg = transformers.LlamaConfig(vocab_size=72, hidden_size=24, intermediate_size=48, num_hidden_layers=1,
                                       num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32,
                                       initializer_range=0.2, bos_token_id=1, eos_token_id=2)
        return hf.causal_lm(transformers.LlamaForCausalLM, cfg, seed=7), (hf.token_ids(72, seq=5, seed=8),)
""")


def _wait_state(qtbot, w, ok):
    qtbot.waitUntil(lambda: ok(w.state) or w.last_error is not None, timeout=T)
    assert w.last_error is None, w.last_error


def test_bisect_this_step_names_the_wrong_decode_pass_and_shows_it(qtbot, real_window, tmp_path):
    w = real_window
    model = tmp_path / "lm.py"
    model.write_text(LM_FILE)
    w.bridge.request("load_pass_file", path=PASSES)
    w.generation.open(str(model), tokens=4)
    _wait_state(qtbot, w, lambda s: bool(s.get("generation")))
    # the user edits the decode program's pipeline only
    w.generation.bar.choose("decode")
    _wait_state(qtbot, w, lambda s: (s.get("generation") or {}).get("program") == "decode")
    w.bridge.request("jump", index=0)
    w.bridge.request("set_pipeline", pipeline=WRONG)
    w.bridge.request("run_to_end")
    _wait_state(qtbot, w, lambda s: len(s.get("steps") or []) == 7 and s.get("cursor") == 6)
    w.generation.bar.choose("prefill")
    _wait_state(qtbot, w, lambda s: (s.get("generation") or {}).get("program") == "prefill")

    tab = w.generation.tab
    w.run.tabs.setCurrentWidget(tab)
    part = tab.step_bisect
    assert not part.button.isVisibleTo(tab)  # nothing generated yet: nothing to bisect
    tab.repeats = 1
    tab.button.click()
    qtbot.waitUntil(lambda: tab.result is not None or "failed" in tab.status.text(), timeout=T)
    assert tab.result is not None, tab.status.text()
    step = tab.result["first_mismatch"]["step"]
    assert step >= 1  # the prefill is right
    assert part.button.isVisibleTo(tab) and part.button.isEnabled()
    assert part.button.text() == f"Bisect step {step}"
    os.makedirs(SHOTS, exist_ok=True)
    qtbot.wait(200)  # the tab lays its new rows out first
    tab.grab().save(os.path.join(SHOTS, "generate_mismatch_tab.png"))

    part.button.click()
    assert not part.button.isEnabled()  # one bisect at a time
    qtbot.waitUntil(lambda: part.result is not None or "failed" in part.info.text(), timeout=T)
    r = part.result
    assert r is not None, part.info.text()
    assert r["program"] == "decode" and r["token_step"] == step
    assert part.info.text().startswith(f"Bisect of the decode program on token step {step}'s inputs: "
                                       "first bad pass step 1 WrongAddToSubtract (compare)")
    assert "relax.subtract" in part.info.text()
    # shown as Find first bad pass shows its own: in the decode program, at the bad step
    _wait_state(qtbot, w, lambda s: (s.get("generation") or {}).get("program") == "decode"
                and s.get("cursor") == 1)
    qtbot.waitUntil(lambda: w.pipeline.info.text().startswith("First bad pass: step 1 WrongAddToSubtract"),
                    timeout=T)
    first = r["diverging"]["first"]
    assert w.hub.selection is not None and first in w.hub.selection.relax
    qtbot.waitUntil(w.all_filled, timeout=T)
    # the jump left the generation's step: the tokens are stale, the verdict on that pipeline is not
    assert tab.slot.stale and not part.slot.stale
    qtbot.wait(200)
    w.grab().save(os.path.join(SHOTS, "generate_bisect_window.png"))
    tab.grab().save(os.path.join(SHOTS, "generate_bisect_tab.png"))
    # another pipeline for the decode program: the verdict is for the previous one
    w.bridge.request("jump", index=0)
    w.bridge.request("set_pipeline", pipeline="zero")
    w.bridge.request("run_to_end")
    _wait_state(qtbot, w, lambda s: len(s.get("steps") or []) == 6 and s.get("cursor") == 5)
    assert part.slot.stale and part.slot.reason == "for the decode program's previous pipeline"
