"""Weights as inputs: a --keep-params import, its params file, BindParams' own step, and runs that
feed the weights to a step that still takes them."""
import numpy as np
import pytest

from irviz.core.errors import IRImportError, RequestError
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


def test_keep_params_is_refused_for_ir_modules_and_the_course_importer(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("from tvm.script import ir as I, relax as R\n\n@I.ir_module\nclass M:\n"
                 "    @R.function\n    def main(x: R.Tensor((2,), 'float32')):\n        return x\n")
    w = Workspace()
    with pytest.raises(RequestError, match="--keep-params is for PyTorch models"):
        w.open(str(f), keep_params=True)
    with pytest.raises(IRImportError, match="exported_program importer"):
        w.open("sample:mlp", importer="course", keep_params=True)


def test_replay_imports_with_the_weights_as_inputs_again(ws):
    """What a restarted engine does with the GUI's recipe: the same steps, BindParams included."""
    applied = ws.applied()
    again = Workspace()
    again.params_dir = ws.params_dir
    again.replay("sample:mlp", applied=applied, planned=ws.planned(), cursor=1, keep_params=True)
    assert [st.pass_name for st in again.session.steps] == [st.pass_name for st in ws.session.steps]
    assert again.keep_params and again.session.cursor == 1
    assert [p.name for p in again.session.steps[0].mod["main"].params][1:] == list(again.kept_params)
