"""The engine after a failed import: it keeps the capture (FX graph with the failing node marked),
converter files (load_converters) and reimport without re-capturing; big FX graphs fold."""
from __future__ import annotations

import json
import textwrap

import pytest

pytest.importorskip("tvm")

import irviz.engine as engine_mod
from irviz.engine import views as step_views
from irviz.core.frontend.sample_files import sample_path

EXAMPLE = str(sample_path("example_converter"))


class _Chan:
    def __init__(self):
        self.sent = []

    def send(self, msg):
        json.dumps(msg)          # what the real channel writes must be JSON
        self.sent.append(msg)


def _engine():
    return engine_mod.Engine(_Chan())


def _call(e, cmd, **args):
    reply = e.handle({"id": 1, "cmd": cmd, "args": args})
    json.dumps(reply, allow_nan=False)   # strict JSON, as on the wire
    return reply


@pytest.fixture(scope="module")
def failed():
    """An engine that opened sample:unsupported_op (import fails at erfinv)."""
    e = _engine()
    reply = _call(e, "open", spec="sample:unsupported_op")
    return e, reply


def test_failed_import_reply_names_node_and_op_and_keeps_the_capture(failed):
    e, reply = failed
    assert reply["ok"] is False
    err = reply["error"]
    assert err["stage"] == "import"
    assert err["node"] == "erfinv" and err["op"] == "aten.erfinv.default"
    assert "gauss" in err["message"] and "(4, 32)" in err["message"]
    st = reply["state"]
    assert st["model"] is None and st["spec"] == "sample:unsupported_op"
    assert st["import_error"]["node"] == "erfinv"
    assert st["import_error"]["op"] == "aten.erfinv.default"
    assert st["import_error"]["model"] == "unsupported_op"
    assert "erfinv" in st["import_error"]["message"] and st["import_error"]["hint"]
    assert [p["name"] for p in st["planned"]][:2] == ["LegalizeOps", "AnnotateTIROpPattern"]
    assert e.ws.captured is not None and e.ws.session is None
    # state keeps saying so
    assert _call(e, "state")["result"]["import_error"]["node"] == "erfinv"


def test_fx_graph_is_viewable_with_the_failing_node_marked(failed):
    e, _ = failed
    g = _call(e, "fx_graph")["result"]
    assert g["failed_node"] == "erfinv"
    marked = [n for n in g["nodes"] if n.get("failed")]
    assert [n["id"] for n in marked] == ["erfinv"]
    assert marked[0]["kind"] == "failed" and "erfinv" in marked[0]["error"]
    assert g["import_error"]["op"] == "aten.erfinv.default"
    assert len(g["nodes"]) == g["total_nodes"] > 5
    # views that need a Relax module say so (and do not crash)
    r = _call(e, "relax_graph")
    assert r["ok"] is False and r["error"]["stage"] == "request"


def test_load_converters_then_reimport_without_recapture(failed):
    e, _ = failed
    captured = e.ws.captured
    res = _call(e, "load_converters", path=EXAMPLE)["result"]
    assert res["ops"] == ["erfinv.default"] and res["files"] == [res["path"]]
    reply = _call(e, "reimport")
    assert reply["ok"], reply.get("error")
    st = reply["result"]
    assert e.ws.captured is captured                     # no re-capture
    assert st["model"] == "unsupported_op" and st["import_error"] is None
    assert st["cursor"] == 0 and [s["pass"] for s in st["steps"]] == ["import"]
    assert [p["name"] for p in st["planned"]][:2] == ["LegalizeOps", "AnnotateTIROpPattern"]
    assert st["converter_files"] == res["files"]
    assert "main" in st["relax_functions"]
    g = _call(e, "fx_graph")["result"]
    assert g["failed_node"] is None and not any(n.get("failed") for n in g["nodes"])
    # the Relax graph has the converter's bindings (several per erfinv: log, sqrt, where, ...)
    rg = _call(e, "relax_graph")["result"]
    ops = " ".join(str(n.get("label")) for n in rg["nodes"])
    assert "where" in ops and "log" in ops
    # step, and a reimport from a live session starts again at 0 with applied + planned passes
    assert _call(e, "step")["ok"]
    st = _call(e, "reimport")["result"]
    assert st["cursor"] == 0 and st["planned"][0]["name"] == "LegalizeOps"
    assert e.ws.captured is captured


def test_converter_file_is_executed_afresh(tmp_path):
    """Edits to a converter file are picked up when it is loaded again / at re-import."""
    e = _engine()
    assert _call(e, "open", spec="sample:unsupported_op")["ok"] is False
    conv = tmp_path / "conv.py"
    conv.write_text(textwrap.dedent('''
        def convert(node, importer):
            raise ValueError("not yet")
        CONVERTERS = {"aten.erfinv.default": convert}
    '''))
    assert _call(e, "load_converters", path=str(conv))["ok"]
    bad = _call(e, "reimport")
    assert bad["ok"] is False and bad["error"]["stage"] == "import"
    assert "not yet" in bad["error"]["message"] and bad["error"]["node"] == "erfinv"
    assert bad["state"]["import_error"]["node"] == "erfinv"
    conv.write_text(open(EXAMPLE).read())          # fixed in place: no need to load it again
    good = _call(e, "reimport")
    assert good["ok"], good.get("error")
    assert good["result"]["model"] == "unsupported_op"
    broken = tmp_path / "broken.py"
    broken.write_text("CONVERTERS = {'aten.erfinv.default': 1}\n")
    r = _call(e, "load_converters", path=str(broken))
    assert r["ok"] is False and r["error"]["stage"] == "load" and "broken.py" in r["error"]["message"]
    assert e.ws.converter_files == [str(conv)]        # a broken file is not kept


def test_open_and_replay_use_the_stored_converters():
    e = _engine()
    assert _call(e, "load_converters", path=EXAMPLE)["ok"]
    st = _call(e, "open", spec="sample:unsupported_op")
    assert st["ok"], st.get("error")
    # a fresh engine (as after a crash) gets the converter files with replay
    e2 = _engine()
    r = _call(e2, "replay", spec="sample:unsupported_op", applied=[{"name": "LegalizeOps"}],
              planned=[], cursor=1, converter_files=[EXAMPLE])
    assert r["ok"], r.get("error")
    assert r["result"]["cursor"] == 1 and r["result"]["model"] == "unsupported_op"
    # without them the replay ends in the import-error state
    e3 = _engine()
    r = _call(e3, "replay", spec="sample:unsupported_op", applied=[], planned=[{"name": "LegalizeOps"}])
    assert r["ok"] is False and r["state"]["import_error"]["node"] == "erfinv"
    assert r["state"]["planned"] == [{"name": "LegalizeOps", "params": {}}]


def test_fx_graph_has_dim_names_for_dynamic_shapes():
    e = _engine()
    assert _call(e, "open", spec="sample:dynamic_mlp")["ok"]
    g = _call(e, "fx_graph")["result"]
    assert set(g["dim_names"].values()) == {"batch", "seq"}
    assert all(k.startswith("s") for k in g["dim_names"])


DEEP_GPT2 = '''
from irviz.core.frontend import hf


def get_model():
    transformers = hf.require_transformers()
    cfg = transformers.GPT2Config(n_layer=6, n_embd=32, n_head=2, vocab_size=128, n_positions=32,
                                  bos_token_id=0, eos_token_id=0)
    model = hf.causal_lm(transformers.GPT2LMHeadModel, cfg)
    return model, (hf.token_ids(cfg.vocab_size, seq=8),)
'''


def test_big_real_graph_folds_by_module_and_unfolds(tmp_model_file):
    """A 6-layer transformers GPT-2 (> 400 FX nodes) is folded by module path by default; the
    GUI's unfold (fold_depth=None, folded = the others) shows the members of that group."""
    pytest.importorskip("transformers")
    path = tmp_model_file(DEEP_GPT2, name="deep_gpt2.py")
    e = _engine()
    r = _call(e, "open", spec=str(path))
    assert r["ok"], r.get("error")
    g = _call(e, "fx_graph")["result"]
    assert g["total_nodes"] > step_views.FX_FOLD_THRESHOLD
    assert g["fold_depth"] is not None
    assert len(g["nodes"]) <= step_views.FX_FOLD_THRESHOLD
    groups = [n for n in g["nodes"] if n["kind"] == "group"]
    assert groups and all(n["id"].startswith("group:") and n["members"] for n in groups)
    # unfold one group, as a double-click in the FX pane does
    paths = sorted(n["id"][len("group:"):] for n in groups)
    target = next(n for n in groups if len(n["members"]) > 3)
    rest = [p for p in paths if p != target["id"][len("group:"):]]
    u = _call(e, "fx_graph", fold_depth=None, folded=rest)["result"]
    ids = {n["id"] for n in u["nodes"]}
    assert target["id"] not in ids
    assert set(target["members"]) <= ids
    assert len(u["nodes"]) == len(g["nodes"]) - 1 + len(target["members"])


def test_samples_list_only_openable_files():
    from irviz.core.frontend.sample_files import list_samples

    names = [n for n, _ in list_samples()]
    assert "example_converter" not in names
    assert {"unsupported_op", "dynamic_mlp", "mlp"} <= set(names)
    assert {"course_te", "course_mymodule"} <= set(names)  # IR files open as samples too
    assert [s["name"] for s in _call(_engine(), "list_samples")["result"]] == names
    # the converter file is still reachable by path (the docs and tests point at it)
    assert sample_path("example_converter").name == "example_converter.py"


def test_cli_samples_output_lists_models_only(capsys):
    from irviz.cli.main import main

    assert main(["samples"]) == 0
    listed = [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()]
    assert "example_converter" not in listed and "unsupported_op" in listed


def test_load_error_from_get_model_passes_through(tmp_model_file):
    from irviz.core.errors import LoadError
    from irviz.core.frontend.model_file import load_model

    path = tmp_model_file('''
        from irviz.core.errors import LoadError

        def get_model():
            raise LoadError("transformers is not installed", hint="pip install 'irviz[hf]'")
    ''')
    with pytest.raises(LoadError) as info:
        load_model(str(path))
    assert info.value.message == "transformers is not installed"
    assert info.value.hint == "pip install 'irviz[hf]'"
