"""Weights as inputs: a --keep-params import, its params file, BindParams' own step, and runs that
feed the weights to a step that still takes them."""
import numpy as np
import pytest

from irviz.core.errors import RequestError
from irviz.core.workspace import Workspace


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    w = Workspace()
    w.params_dir = tmp_path_factory.mktemp("weights")
    w.open("sample:mlp", planned=["BindParams", "LegalizeOps"], keep_params=True)
    return w


def test_main_takes_the_weights_and_the_file_holds_them(ws):
    main = ws.session.steps[0].mod["main"]
    names = [p.name for p in main.params]
    assert names == ["x", "p_linear0_weight", "p_linear0_bias", "p_linear1_weight", "p_linear1_bias"]
    assert "params" not in main.attrs  # TVM's copy of the weights is not left in the module
    with np.load(ws.params_file) as f:
        state = ws.loaded.module.state_dict()
        np.testing.assert_array_equal(f["p_linear1_weight"], state["linear1.weight"].numpy())
    # provenance: the weight placeholders are main's parameters, not constants
    assert ws.session.steps[0].provenance["p_linear0_weight"] == ["p_linear0_weight"]
    # BindParams was planned without a file: the session filled in the one the import wrote
    assert ws.session.pipeline[0].params == {"params": ws.params_file}


def test_bind_params_step_and_runs_before_and_after(ws):
    built, before = ws.build_run(step=0, repeats=1)
    assert before.allclose is True
    ws.step()
    st = ws.session.steps[1]
    assert st.pass_name == "BindParams" and st.changed
    assert [p.name for p in st.mod["main"].params] == ["x"]
    text, _ = ws.session.diff(0, 1)
    assert "-def main(x: R.Tensor((1, 784), dtype=\"float32\"), p_linear0_weight" in text
    assert 'metadata["ir.GenericConst"]' in text
    _, after = ws.build_run(step=1, repeats=1)
    assert after.allclose is True and after.max_abs_error < 1e-5


def test_keep_params_is_refused_for_ir_modules(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("from tvm.script import ir as I, relax as R\n\n@I.ir_module\nclass M:\n"
                 "    @R.function\n    def main(x: R.Tensor((2,), 'float32')):\n        return x\n")
    w = Workspace()
    with pytest.raises(RequestError, match="--keep-params is for PyTorch models"):
        w.open(str(f), keep_params=True)


def test_course_from_fx_keeps_the_weights_and_bind_params_binds_them(tmp_path):
    """The chapter's from_fx with its own map_param (constants), weights lifted into main's
    parameters; run, intermediates and bisect work before and after the BindParams step."""
    from irviz.core.backend.step_bisect import bisect, check_module, reference_for

    w = Workspace()
    w.params_dir = tmp_path
    w.open("sample:course_fx_mlp", planned=["BindParams", "LegalizeOps"], keep_params=True)
    assert (w.capture, w.importer) == ("symbolic_trace", "course")
    main = w.session.steps[0].mod["main"]
    names = [p.name for p in main.params]
    assert names == ["x", "p_linear0_weight", "p_linear0_bias", "p_linear1_weight", "p_linear1_bias"]
    assert "R.const" not in main.script() and "metadata" not in main.script()
    state = w.loaded.module.state_dict()
    with np.load(w.params_file) as f:
        np.testing.assert_array_equal(f["p_linear0_weight"], state["linear0.weight"].numpy())
    _, before = w.build_run(step=0, repeats=1)
    assert before.allclose is True
    mid = w.compare_intermediates(step=0)
    assert mid.first_divergence is None and [n for n in mid.nodes if n.status == "ok"]

    w.run_to_end()
    assert [p.name for p in w.session.steps[1].mod["main"].params] == ["x"]
    _, after = w.build_run(step=1, repeats=1)
    assert after.allclose is True and after.max_abs_error < 1e-5
    mid = w.compare_intermediates(step=1)
    assert mid.first_divergence is None and [n for n in mid.nodes if n.status == "ok"]
    ref = reference_for(w)
    for st in w.session.steps:
        assert check_module(st.mod, ref, index=st.index).ok, st.pass_name
    assert bisect(w.session, ref).first_bad is None


def test_course_importer_on_an_export_graph_keeps_the_weights():
    w = Workspace()
    w.open("sample:mlp", importer="course", planned=["BindParams"], keep_params=True)
    main = w.session.steps[0].mod["main"]
    assert [p.name for p in main.params][1:] == list(w.kept_params)
    assert len(w.kept_params) == 4
    w.run_to_end()
    assert len(w.session.steps[1].mod["main"].params) == 1
    assert w.build_run(step=1, repeats=1)[1].allclose is True


def test_replay_imports_with_the_weights_as_inputs_again(ws):
    """What a restarted engine does with the GUI's recipe: the same steps, BindParams included."""
    applied = ws.applied()
    again = Workspace()
    again.params_dir = ws.params_dir
    again.replay("sample:mlp", applied=applied, planned=ws.planned(), cursor=1, keep_params=True)
    assert [st.pass_name for st in again.session.steps] == [st.pass_name for st in ws.session.steps]
    assert again.keep_params and again.session.cursor == 1
    assert [p.name for p in again.session.steps[0].mod["main"].params][1:] == list(again.kept_params)
