"""Generation in the app, on its real engine and the tiny sample:hf_llama: File ▸ Open for
generation opens the causal LM's prefill and decode programs; the toolbar's program bar switches
the panes between them; the Run pane's Generate tab generates 8 tokens and shows that they match
torch generate with the timings; the result goes stale when a program's step changes; the Memory
tab shows the KV cache's bytes by context length."""
from __future__ import annotations

import os

import pytest

pytest.importorskip("transformers", reason="sample:hf_llama needs the hf extra")

T = 240_000
SHOTS = os.environ.get("IRVIZ_SHOTS", "/tmp")


@pytest.fixture(scope="module")
def opened(real_window):
    from pytestqt.qtbot import QtBot

    w = real_window
    qtbot = QtBot(None)
    w.generation.open("sample:hf_llama", tokens=8)
    qtbot.waitUntil(lambda: bool(w.state.get("generation")) or w.last_error is not None, timeout=T)
    assert w.last_error is None, w.last_error
    return w


def _filled(qtbot, w):
    qtbot.waitUntil(lambda: w.all_filled() or w.last_error is not None, timeout=T)
    assert w.last_error is None, w.last_error


def test_the_program_bar_switches_the_panes_between_prefill_and_decode(qtbot, opened):
    w = opened
    _filled(qtbot, w)
    bar = w.generation.bar
    assert bar.combo.isVisibleTo(w) and bar.combo.count() == 2
    assert w.state["model"] == "hf_llama prefill" and bar.combo.currentData() == "prefill"
    assert bar.combo.itemText(1).startswith("decode · ")
    placeholders = lambda: {n.get("label") for n in w.fx.graph_dict["nodes"] if n.get("op") == "placeholder"}
    prefill_inputs = placeholders()
    bar.choose("decode")
    qtbot.waitUntil(lambda: w.state.get("model") == "hf_llama decode", timeout=T)
    _filled(qtbot, w)
    assert bar.combo.currentData() == "decode" and "hf_llama decode" in w.windowTitle()
    assert placeholders() != prefill_inputs  # decode takes the token, its position and the cache
    w.grab().save(os.path.join(SHOTS, "generate_decode_graph.png"))


def test_generate_8_tokens_match_and_go_stale_when_a_step_changes(qtbot, opened):
    w = opened
    tab = w.generation.tab
    w.run.tabs.setCurrentWidget(tab)
    assert tab.button.isEnabled() and tab.tokens.value() == 8
    tab.repeats = 2
    tab.button.click()
    qtbot.waitUntil(lambda: tab.result is not None or "failed" in tab.status.text(), timeout=T)
    assert tab.result is not None, tab.status.text()
    assert tab.verdict.text().startswith("Tokens match: TVM generated the same 8 token ids")
    for row in range(3):
        for col in (1, 2):
            assert float(tab.figures.item(row, col).text()) > 0
    assert tab.timing.text().startswith(("Timings reliable", "Timings unreliable: "))
    assert "prefill at step" in tab.stamp.text() and "decode at step" in tab.stamp.text()
    assert not tab.slot.stale
    w.generation.bar.choose("prefill")  # looking at the other program keeps the result current
    qtbot.waitUntil(lambda: w.state.get("model") == "hf_llama prefill", timeout=T)
    assert not tab.slot.stale
    _filled(qtbot, w)
    w.grab().save(os.path.join(SHOTS, "generate_run.png"))
    cursor = w.state["cursor"]
    w.back()
    qtbot.waitUntil(lambda: w.state.get("cursor") == cursor - 1, timeout=T)
    assert tab.slot.stale and tab.note.isVisibleTo(w)
    _filled(qtbot, w)
    assert tab.slot.reason.startswith(f"for the prefill program at step {cursor}")
    w.grab().save(os.path.join(SHOTS, "generate_run_stale.png"))
    w.step()
    qtbot.waitUntil(lambda: w.state.get("cursor") == cursor, timeout=T)
    assert not tab.slot.stale  # back at the steps it was run at


def test_the_memory_tab_shows_the_kv_cache_by_context_length(qtbot, opened):
    w = opened
    mem = w.run.memory
    w.run.tabs.setCurrentWidget(mem)
    gen = w.state["generation"]
    assert mem.kv.isVisibleTo(w)
    text = mem.kv.text()
    assert text.startswith("KV cache: ") and f"{gen['max_len']} positions" in text
    lengths = sorted(int(n) for n in gen["kv_cache_bytes_by_length"])
    assert len(lengths) > 2
    at = [text.index(f" {n}: ") for n in lengths]
    assert at == sorted(at)  # by context length, not as text
    mem.plan()
    qtbot.waitUntil(lambda: mem.view.plan is not None or "failed" in mem.status.text(), timeout=T)
    w.grab().save(os.path.join(SHOTS, "generate_memory.png"))


def test_the_replay_recipe_and_the_launch_option_open_for_generation(monkeypatch, opened):
    from irviz.cli.main import main
    from irviz.ui import app
    from irviz.ui.session_replay import _frontend_recipe

    gen = opened.state["generation"]
    assert _frontend_recipe(opened.state)["generation"] == {
        "pipeline": "zero", "tokens": 8, "max_len": gen["max_len"], "program": gen["program"]}
    launched = {}
    monkeypatch.setattr(app, "run_app", lambda spec, **kw: launched.update(spec=spec, **kw) or 0)
    assert main(["sample:hf_llama", "--generate", "--tokens", "4"]) == 0
    assert launched["spec"] == "sample:hf_llama" and launched["generate"] and launched["tokens"] == 4
