"""Opening a model without its weights: get_model() on the meta device, weights as typed
parameters of main with no data, every pass and the build work, runs say there are no weights."""
from __future__ import annotations

import json

import pytest
import torch

from irviz.core.backend.memory import weights_of
from irviz.core.errors import IRImportError, RequestError, RunError
from irviz.core.frontend import hf
from irviz.core.frontend.structure_only import STRUCTURE_ONLY
from irviz.core.tvm_compat import var_name
from irviz.core.workspace import Workspace

pytestmark = pytest.mark.skipif(not hf.available(), reason="transformers is not installed")

# a transformers decoder written the ordinary way: nothing here asks for the meta device
TINY_LLAMA = '''
from irviz.core.frontend import hf


def get_model():
    transformers = hf.require_transformers()
    cfg = transformers.LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                                   max_position_embeddings=32)
    model = hf.causal_lm(transformers.LlamaForCausalLM, cfg)
    return model, (hf.token_ids(cfg.vocab_size, seq=8),)
'''

# the model file builds its module on the meta device itself
OWN_META = '''
import torch
from torch import nn


def get_model():
    with torch.device("meta"):
        model = nn.Sequential(nn.Linear(32768, 32768), nn.ReLU(), nn.Linear(32768, 16))
    return model, (torch.randn(2, 32768),)
'''


@pytest.fixture(scope="module")
def llama_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / "tiny_llama.py"
    path.write_text(TINY_LLAMA)
    return str(path)


@pytest.fixture(scope="module")
def ws(llama_file):
    w = Workspace()
    w.open(llama_file, planned=["LegalizeOps", "AnnotateTIROpPattern", "FuseOps", "FuseTIR"],
           no_weights=True)
    return w


def test_the_weights_are_never_allocated_and_main_takes_them_as_parameters(ws):
    module = ws.loaded.module
    named = dict(module.named_parameters())
    assert named and all(p.is_meta for p in named.values())
    assert all(b.is_meta for b in module.buffers())
    # integer token ids stay integer, on the meta device
    (ids,) = ws.loaded.example_inputs
    assert ids.is_meta and ids.dtype == torch.int64 and tuple(ids.shape) == (1, 8)
    assert ws.structure_only and ws.imported.structure_only and ws.imported.params is None
    main = ws.session.steps[0].mod["main"]
    assert int(main.attrs["num_input"]) == 1
    names = [var_name(p) for p in main.params]
    assert names[0] == "input_ids"
    # every parameter of the model is a parameter of main, typed with the weight's shape
    expected = {"p_" + n.replace(".", "_"): tuple(p.shape) for n, p in named.items()}
    got = {var_name(p): tuple(int(d) for d in p.ty.shape.values) for p in main.params[1:]}
    assert expected.items() <= got.items()
    assert len(got) > len(expected)  # the rotary frequencies (buffers) are parameters too
    assert "params" not in main.attrs  # TVM's copy of the weights' values: there is none
    w = weights_of(ws.session.steps[0].mod)
    assert w["bytes"] >= sum(p.numel() * 4 for p in named.values())
    assert ws.session.steps[0].provenance["p_model_model_embed_tokens_weight"] == \
        ["p_model_model_embed_tokens_weight"]


def test_passes_build_and_runs_say_structure_only(ws):
    ws.run_to_end()
    s = ws.session
    assert [st.pass_name for st in s.steps[1:]] == ["LegalizeOps", "AnnotateTIROpPattern", "FuseOps",
                                                    "FuseTIR"]
    assert s.error is None and all(st.changed for st in s.steps[1:] if st.pass_name != "AnnotateTIROpPattern")
    built = ws.build_step()
    assert built.seconds > 0 and built.lowered is not None
    cursor = s.cursor
    for request in (ws.build_run, ws.compare_intermediates, ws.latency_trace):
        with pytest.raises(RunError, match=STRUCTURE_ONLY):
            request()
    assert ws.session is s and s.cursor == cursor  # the session is kept


def test_check_reports_structure_only_with_exit_0(llama_file, capsys):
    from irviz.cli.main import main

    code = main(["check", llama_file, "--no-weights", "--pipeline", "zero", "--json", "-"])
    out = capsys.readouterr()
    summary = json.loads(out.out)
    assert code == 0, out.err
    assert summary["structure_only"] is True and summary["ok"] is True
    assert summary["failed_stage"] is None and summary["error"] is None
    assert summary["verdict"] == "structure only" and summary["build_seconds"] > 0
    assert summary["max_abs_error"] is None and summary["tvm_ms"] is None
    mem = summary["memory"]
    assert mem["weights_bytes"] > 0 and "float32" in mem["weights_dtypes"]
    assert mem["planned_bytes"] > 0 and mem["peak_bytes"] > 0
    assert "structure only: no weights to run with" in out.err


def test_a_model_file_on_the_meta_device_needs_no_flag(tmp_path):
    path = tmp_path / "own_meta.py"
    path.write_text(OWN_META)  # 4 GB of float32 weights if they were ever allocated
    w = Workspace()
    w.open(str(path), planned=["LegalizeOps"])
    assert w.structure_only and w.loaded.example_inputs[0].is_meta
    main = w.session.steps[0].mod["main"]
    assert [var_name(p) for p in main.params] == ["input", "p_0_weight", "p_0_bias", "p_2_weight",
                                                  "p_2_bias"]
    assert weights_of(w.session.steps[0].mod)["bytes"] == (32768 * 32768 + 32768 + 32768 * 16 + 16) * 4
    w.run_to_end()
    assert w.session.error is None


def test_refused_combinations(llama_file, tmp_path):
    ir = tmp_path / "m.py"
    ir.write_text("from tvm.script import ir as I, relax as R\n\n@I.ir_module\nclass M:\n"
                  "    @R.function\n    def main(x: R.Tensor((2,), 'float32')):\n        return x\n")
    with pytest.raises(RequestError, match="--no-weights is for PyTorch models"):
        Workspace().open(str(ir), no_weights=True)
    with pytest.raises(IRImportError, match="exported_program importer only"):
        Workspace().open(llama_file, importer="course", capture="symbolic_trace", no_weights=True)


class _Chan:
    def __init__(self):
        self.sent = []

    def send(self, msg):
        json.dumps(msg)
        self.sent.append(msg)


def test_the_engine_opens_without_weights_and_run_says_structure_only(llama_file):
    import irviz.engine as engine_mod

    e = engine_mod.Engine(_Chan())

    def call(cmd, **args):
        reply = e.handle({"id": 1, "cmd": cmd, "args": args})
        json.dumps(reply, allow_nan=False)
        return reply

    opened = call("open", spec=llama_file, pipeline="LegalizeOps", no_weights=True)
    assert opened["ok"], opened
    state = opened["result"]
    assert state["structure_only"] is True and len(state["steps"]) == 1
    assert call("step")["ok"]
    ran = call("build_run")
    assert not ran["ok"] and ran["error"]["stage"] == "run"
    assert ran["error"]["message"].startswith(STRUCTURE_ONLY)
    after = call("state")["result"]  # the session is kept, at the same step
    assert after["cursor"] == 1 and after["structure_only"] is True and after["error"] is None
    memory = call("memory")
    assert memory["ok"] and memory["result"]["planned_bytes"] > 0


@pytest.mark.parametrize("name, parameters", [
    ("llama3_8b_shape", 8_030_261_248),     # Llama-3-8B's published count
    ("qwen2_7b_shape", 7_615_616_512),      # Qwen2-7B's
    ("mixtral_8x7b_shape", 46_702_792_704),  # Mixtral-8x7B's
    ("llama3_8b_1layer", 1_268_789_248),
])
def test_full_size_samples_have_the_published_sizes_and_no_weights(name, parameters):
    from irviz.core.frontend.model_file import load_model

    m = load_model(f"sample:{name}", no_weights=name == "llama3_8b_1layer")
    assert m.structure_only and all(p.is_meta for p in m.module.parameters())
    assert sum(p.numel() for p in m.module.parameters()) == parameters
    assert m.example_inputs[0].dtype == torch.int64 and tuple(m.example_inputs[0].shape) == (1, 128)


@pytest.mark.slow
def test_llama3_8b_shape_passes_check(capsys):
    """The full-size graph (about 35 s on 2 busy cores, well under 1 GB of RSS)."""
    from irviz.cli.main import main

    # the estimate times the full-size kernels (minutes the first time on this CPU): not here
    assert main(["check", "sample:llama3_8b_shape", "--no-estimate", "--json", "-"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["structure_only"] and summary["failed_stage"] is None
    assert len(summary["steps"]) == 5 and summary["build_seconds"] > 0
    assert summary["memory"]["weights_dtypes"]["float32"] >= 8_030_261_248 * 4


def test_compare_builds_both_pipelines_without_running(llama_file, tmp_path, capsys):
    from irviz.cli.main import main

    code = main(["compare", llama_file, "--no-weights", "--pipeline", "zero", "--pipeline",
                 "LegalizeOps", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    rows = json.loads((tmp_path / "compare.json").read_text())["pipelines"]
    assert all(r["structure_only"] and r["build_seconds"] > 0 and r["error"] is None for r in rows)
    assert out.count("structure only: no weights to run with") == 2


def test_bfloat16_weights_are_counted_at_their_dtype(tmp_path):
    path = tmp_path / "bf16.py"
    path.write_text("import torch\nfrom torch import nn\n\n\ndef get_model():\n"
                    "    return nn.Linear(64, 32, bias=False).to(torch.bfloat16), "
                    "(torch.randn(4, 64, dtype=torch.bfloat16),)\n")
    w = Workspace()
    w.open(str(path), planned=["LegalizeOps"], no_weights=True)
    assert w.loaded.example_inputs[0].dtype == torch.bfloat16
    assert weights_of(w.session.steps[0].mod)["dtypes"] == {"bfloat16": 64 * 32 * 2}
    w.run_to_end()
    assert w.build_step().seconds > 0


def test_a_model_too_big_for_the_machine_stops_before_allocating_and_suggests_no_weights(
        tmp_path, monkeypatch):
    from irviz.core.errors import LoadError
    from irviz.core.frontend import structure_only
    from irviz.core.frontend.model_file import load_model

    path = tmp_path / "big.py"
    path.write_text("import torch\nfrom torch import nn\n\n\ndef get_model():\n"
                    "    return nn.Sequential(nn.Linear(1000, 1000), nn.Linear(1000, 1000)), "
                    "(torch.randn(1, 1000),)\n")
    monkeypatch.setattr(structure_only, "memory_budget", lambda: 6_000_000)  # this machine: 6 MB
    with pytest.raises(LoadError) as info:
        load_model(str(path))
    assert "allocated more than 5.7 MB" in info.value.message and "before it starts swapping" \
        in info.value.message
    assert "--no-weights" in info.value.hint
    assert load_model(str(path), no_weights=True).structure_only  # nothing allocated: it opens
    monkeypatch.setattr(structure_only, "memory_budget", lambda: 10_000_000)
    assert not load_model(str(path)).structure_only  # 8 MB of weights fit in 10
