"""BindParams on a hand-written module: get_inputs() gives all of main's parameters (by position
or by name), get_params() the weights; every step runs with what its main still takes, and
check, bisect and compare work across the BindParams step."""
from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("tvm")

from test_ir_files import INPUTS, MY_MODULE, REFERENCE, _write

from irviz.cli.main import main
from irviz.core.backend.step_bisect import bisect, check_module, reference_for
from irviz.core.errors import RunError
from irviz.core.passes import parse_pipeline
from irviz.core.workspace import Workspace

WEIGHTS = '''
def get_params():
    x, w0, b0, w1, b1 = get_inputs()
    return {"w0": w0, "b0": b0, "w1": w1, "b1": b1}
'''

ONLY_DATA = '''
def get_inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((1, 20)).astype("float32"),)


def get_params():
    rng = np.random.default_rng(0)
    rng.standard_normal((1, 20))
    return {n: rng.standard_normal(s).astype("float32")
            for n, s in [("w0", (7, 20)), ("b0", (7,)), ("w1", (3, 7)), ("b1", (3,))]}
'''

BY_NAME = '''
def get_inputs():
    rng = np.random.default_rng(0)
    x, w0, b0, w1, b1 = (rng.standard_normal(s).astype("float32")
                         for s in [(1, 20), (7, 20), (7,), (3, 7), (3,)])
    return {"w1": w1, "b1": b1, "x": x, "w0": w0, "b0": b0}


def get_params():
    return {k: v for k, v in get_inputs().items() if k != "x"}
'''


def _weights_npz(tmp_path, scale=1):
    rng = np.random.default_rng(0)
    _, w0, b0, w1, b1 = (rng.standard_normal(s).astype("float32")
                         for s in [(1, 20), (7, 20), (7,), (3, 7), (3,)])
    path = tmp_path / f"w{scale}.npz"
    np.savez(path, w0=w0 * scale, b0=b0, w1=w1, b1=b1)
    return path


def _every_step_matches(ws):
    ref = reference_for(ws)
    checks = [check_module(st.mod, ref, index=st.index) for st in ws.session.steps]
    assert all(c.ok for c in checks), [(c.pass_name, c.reason) for c in checks]
    return ref


def test_all_inputs_by_position_and_a_bind_params_step(tmp_path):
    path = _write(tmp_path, "mixture.py", MY_MODULE, INPUTS, REFERENCE)
    ws = Workspace()
    ws.open(str(path), planned=parse_pipeline(f"BindParams(params={_weights_npz(tmp_path)}),LegalizeOps"))
    ws.run_to_end()
    assert [p.name for p in ws.session.steps[0].mod["main"].params] == ["x", "w0", "b0", "w1", "b1"]
    assert [p.name for p in ws.session.steps[1].mod["main"].params] == ["x"]
    for i in (0, 1, 2):
        _, res = ws.build_run(step=i, repeats=1)
        assert res.allclose is True and res.max_abs_error < 1e-4, i
    _every_step_matches(ws)
    assert bisect(ws.session, reference_for(ws)).first_bad is None


def test_bisect_finds_a_bind_params_step_that_binds_other_weights(tmp_path):
    path = _write(tmp_path, "mixture.py", MY_MODULE, INPUTS, REFERENCE)
    ws = Workspace()
    ws.open(str(path), planned=parse_pipeline(
        f"BindParams(params={_weights_npz(tmp_path, scale=2)}),LegalizeOps"))
    ws.run_to_end()
    res = bisect(ws.session, reference_for(ws))
    assert res.first_bad is not None and res.first_bad.index == 1
    assert res.first_bad.pass_name == "BindParams" and res.first_bad.stage == "compare"


def test_get_params_gives_the_weights_bind_params_binds_without_a_file(tmp_path):
    """get_inputs() gives only the data; get_params() the weights, as after --keep-params."""
    path = _write(tmp_path, "mixture.py", MY_MODULE, ONLY_DATA, REFERENCE)
    ws = Workspace()
    ws.params_dir = tmp_path
    ws.open(str(path), planned=["BindParams", "LegalizeOps"])
    assert ws.session.pipeline[0].params["params"] == ws.params_file
    assert set(np.load(ws.params_file).files) == {"w0", "b0", "w1", "b1"}
    _, before = ws.build_run(step=0, repeats=1)
    ws.run_to_end()
    _, after = ws.build_run(repeats=1)
    assert before.allclose is True and after.allclose is True
    _every_step_matches(ws)


def test_get_inputs_by_name_in_any_order(tmp_path):
    path = _write(tmp_path, "mixture.py", MY_MODULE, BY_NAME, REFERENCE)
    ws = Workspace()
    ws.open(str(path), planned=["BindParams"])
    ws.run_to_end()
    assert [p.name for p in ws.session.steps[1].mod["main"].params] == ["x"]
    for i in (0, 1):
        assert ws.build_run(step=i, repeats=1)[1].allclose is True


def test_check_and_compare_across_bind_params(tmp_path, capsys):
    path = _write(tmp_path, "mixture.py", MY_MODULE, INPUTS, REFERENCE, WEIGHTS)
    code = main(["check", str(path), "--pipeline", "BindParams,zero", "--json", "-", "--repeats", "1"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["allclose"] is True, summary["error"]
    assert summary["steps"][0]["pass"] == "BindParams"
    code = main(["compare", str(path), "--pipeline", "BindParams,zero", "--pipeline", "zero",
                 "--repeats", "1", "--out", str(tmp_path / "cmp")])
    rows = json.loads((tmp_path / "cmp" / "compare.json").read_text())["pipelines"]
    assert code == 0 and [r["allclose"] for r in rows] == [True, True], rows


def test_too_few_inputs_name_the_parameters_and_the_weights(tmp_path):
    path = _write(tmp_path, "mixture.py", MY_MODULE, '''
def get_inputs():
    return np.zeros((1, 20), "float32"), np.zeros((7, 20), "float32")
''', REFERENCE)
    ws = Workspace()
    ws.open(str(path))
    with pytest.raises(RunError, match=r"returned 2 values; main takes 5 \(x, w0, b0, w1, b1\)"):
        ws.build_run(repeats=1)
    bad = _write(tmp_path, "bad.py", MY_MODULE, INPUTS, 'def get_params():\n    return {"w9": 1}\n')
    with pytest.raises(Exception, match="get_params\\(\\) gives w9, which main does not take"):
        ws.open(str(bad))
    assert ws.ir_file.path.name == "mixture.py"  # the failed open kept the open file


def test_repeated_parameter_names_go_by_position(tmp_path):
    path = tmp_path / "dup.py"
    path.write_text('''
import numpy as np
from tvm import relax


def get_irmodule():
    bb = relax.BlockBuilder()
    a, b = (relax.Var("x", relax.TensorType((2,), "float32")) for _ in range(2))
    with bb.function("main", [a, b]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.subtract(a, b))
        bb.emit_func_output(out)
    return bb.get()


def get_inputs():
    return np.array([3, 4], "float32"), np.array([1, 1], "float32")


def reference(a, b):
    return a - b
''')
    ws = Workspace()
    ws.open(str(path))
    _, res = ws.build_run(repeats=1)
    assert res.allclose is True
    ref = reference_for(ws)
    np.testing.assert_array_equal(ref.expected[0], [2, 3])
    assert check_module(ws.session.steps[0].mod, ref).ok


def test_bind_params_without_weights_says_where_they_come_from(tmp_path):
    path = _write(tmp_path, "mixture.py", MY_MODULE, INPUTS, REFERENCE)
    ws = Workspace()
    ws.open(str(path), planned=["BindParams"])
    with pytest.raises(Exception) as info:
        ws.run_to_end()
    assert "get_params()" in info.value.user_message()
    assert len(ws.session.steps) == 1  # step 0 stays, and still runs
    assert ws.build_run(step=0, repeats=1)[1].allclose is True


def test_the_engine_runs_both_sides_of_bind_params(tmp_path):
    """What the app asks: the state names the weights file; Build & Run before and after."""
    from irviz.engine import Engine

    eng = Engine(type("Chan", (), {"send": lambda self, msg: json.dumps(msg)})())

    def ok(cmd, **args):
        reply = eng.handle({"id": 1, "cmd": cmd, "args": args})
        assert reply["ok"], reply.get("error")
        return reply["result"]

    path = _write(tmp_path, "mixture.py", MY_MODULE, INPUTS, REFERENCE, WEIGHTS)
    state = ok("open", spec=str(path), pipeline="BindParams,LegalizeOps")
    assert state["params_file"] and state["planned"][0]["params"]["params"] == state["params_file"]
    assert ok("build_run", step=0, repeats=1)["allclose"] is True
    ok("run_to_end")
    for step in (1, 2):
        assert ok("build_run", step=step, repeats=1)["allclose"] is True, step
