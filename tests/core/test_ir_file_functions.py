"""IR files with several Relax functions and extern calls: any function runs (--func), its sizes
are known before a build, every function is in the Relax graph, an extern that is not registered
is flagged, and one that raises is named without taking the engine down."""
from __future__ import annotations

import json
import textwrap

import pytest

pytest.importorskip("tvm")

from irviz.cli.main import main
from irviz.core.errors import RunError
from irviz.core.workspace import Workspace

# the course's MyModule, cut down: one prim_func, main and a second public function
MODULE = '''
import numpy as np
import tvm
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T


@I.ir_module
class MyModule:
    @T.prim_func(s_tir=True)
    def relu0(x: T.handle, y: T.handle):
        n = T.int64()
        X = T.match_buffer(x, (1, n), "float32")
        Y = T.match_buffer(y, (1, n), "float32")
        for i, j in T.grid(1, n):
            with T.sblock("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.max(X[vi, vj], T.float32(0))

    @R.function
    def main(x: R.Tensor((1, "m"), "float32"), w: R.Tensor(("n", "m"), "float32")):
        m, n = T.int64(), T.int64()
        with R.dataflow():
            lv0 = R.matmul(x, R.permute_dims(w))
            out = R.call_dps_packed("relu0", (lv0,), R.Tensor((1, n), "float32"))
            R.output(out)
        return out

    @R.function
    def doubled(x: R.Tensor((1, "m"), "float32"), w: R.Tensor(("n", "m"), "float32")):
        m, n = T.int64(), T.int64()
        with R.dataflow():
            lv0 = R.matmul(x, R.permute_dims(w))
            lv1 = R.add(lv0, lv0)
            R.output(lv1)
        return lv1
'''

INPUTS = '''
def get_inputs():
    rng = np.random.default_rng(0)
    return rng.standard_normal((1, 6)).astype("float32"), rng.standard_normal((4, 6)).astype("float32")


def reference(x, w):
    return np.maximum(x @ w.T, 0)
'''

# MyModuleWithExternCall: main calls two functions that only Python can provide
EXTERN = '''
import numpy as np
import tvm
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T
{register}

@I.ir_module
class MyModuleWithExternCall:
    @R.function
    def main(x: R.Tensor((1, "m"), "float32"), w0: R.Tensor(("n", "m"), "float32"),
             b0: R.Tensor(("n",), "float32")):
        m, n = T.int64(), T.int64()
        with R.dataflow():
            lv0 = R.call_dps_packed("{name}.linear", (x, w0, b0), R.Tensor((1, n), "float32"))
            out = R.call_dps_packed("{name}.relu", (lv0,), R.Tensor((1, n), "float32"))
            R.output(out)
        return out


def get_inputs():
    rng = np.random.default_rng(0)
    return tuple(rng.standard_normal(s).astype("float32") for s in [(1, 5), (3, 5), (3,)])
'''

REGISTER = '''
@tvm.register_global_func("{name}.linear", override=True)
def _linear(x, w, b, out):
    out.copyfrom(x.numpy() @ w.numpy().T + b.numpy())


@tvm.register_global_func("{name}.relu", override=True)
def _relu(x, out):
    {relu_body}
'''


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def _extern_file(tmp_path, name, registered=True, raises=False):
    relu_body = ("raise ValueError('relu got a bad tensor')" if raises else
                 "out.copyfrom(np.maximum(x.numpy(), 0))")
    register = REGISTER.format(name=name, relu_body=relu_body) if registered else ""
    return _write(tmp_path, f"{name}.py", EXTERN.replace("{register}", register).replace("{name}", name))


def _check(*argv, capsys):
    code = main(["check", *map(str, argv), "--json", "-", "--repeats", "1"])
    return code, json.loads(capsys.readouterr().out)


# --------------------------------------------------------------------------------------------
# any Relax function runs


def test_check_runs_the_function_named_by_func(tmp_path, capsys):
    path = _write(tmp_path, "two_funcs.py", MODULE + INPUTS)
    code, summary = _check(path, capsys=capsys)
    assert code == 0 and summary["func"] == "main" and summary["allclose"] is True
    # doubled computes 2 x @ w.T, which reference() does not: a mismatch proves doubled ran
    code, summary = _check(path, "--func", "doubled", capsys=capsys)
    assert code == 1 and summary["func"] == "doubled" and summary["failed_stage"] == "compare"


def test_func_without_reference_runs_on_made_up_inputs(tmp_path, capsys):
    path = _write(tmp_path, "bare.py", MODULE)
    code, summary = _check(path, "--func", "doubled", "--dim", "m=6,n=4", capsys=capsys)
    assert code == 0 and summary["func"] == "doubled" and summary["reference"] == "none"
    assert summary["tvm_ms"] > 0


def test_a_missing_function_lists_the_ones_there_are(tmp_path, capsys):
    path = _write(tmp_path, "two_funcs.py", MODULE + INPUTS)
    code, summary = _check(path, "--func", "mian", capsys=capsys)
    assert code == 1 and summary["failed_stage"] == "run"
    assert "'mian'" in summary["error"] and "main, doubled" in summary["error"]
    # the prim_func is not a Relax function to run
    assert "relu0" not in summary["error"].split("it has:")[1].split("\n")[0]


def test_export_reports_the_function_it_ran(tmp_path, capsys):
    path = _write(tmp_path, "two_funcs.py", MODULE + INPUTS)
    out = tmp_path / "trace"
    assert main(["export", str(path), "--func", "doubled", "--out", str(out)]) == 0
    steps = json.loads((out / "steps.json").read_text())
    runs = [s["run"] for s in steps["steps"] if s.get("run")]
    assert runs and runs[-1]["func"] == "doubled"
    assert "(doubled)" in (out / "report.html").read_text()


def test_run_sizes_in_order_of_appearance_and_where_inputs_come_from(tmp_path):
    ws = Workspace()
    ws.open(str(_write(tmp_path, "bare.py", MODULE)))
    assert ws.run_sizes(func="doubled") == {"func": "doubled", "sizes": ["m", "n"], "inputs": "random",
                                            "dims": {}}
    with pytest.raises(RunError, match="m, n"):
        ws.build_run(repeats=1)
    _, res = ws.build_run(repeats=1, dims={"m": 6, "n": 4})
    assert res.func == "main" and res.allclose is None and res.tvm_ms > 0
    ws.open(str(_write(tmp_path, "with_inputs.py", MODULE + INPUTS)))
    assert ws.run_sizes()["inputs"] == "get_inputs"


def test_dims_for_another_function_are_asked_before_the_build(tmp_path):
    ws = Workspace()
    ws.open(str(_write(tmp_path, "bare.py", MODULE)))
    with pytest.raises(RunError, match="doubled has symbolic sizes with no value: m, n"):
        ws.build_run(repeats=1, func="doubled")
    assert ws._last_build is None   # nothing was built for a run that could not start


def test_get_inputs_that_do_not_fit_name_the_parameter_for_any_function(tmp_path):
    bad = INPUTS.replace("(4, 6)", "(4, 5)")
    ws = Workspace()
    ws.open(str(_write(tmp_path, "bad.py", MODULE + bad)))
    with pytest.raises(RunError) as info:
        ws.build_run(repeats=1, func="doubled")
    msg = info.value.user_message()
    assert "w has shape (4, 5)" in msg and "doubled expects (n, m)" in msg and "m = 6 (from x)" in msg


# --------------------------------------------------------------------------------------------
# what the panes get


def _engine():
    from irviz.engine import Engine

    return Engine(type("Chan", (), {"send": lambda self, msg: json.dumps(msg)})())


def _ok(eng, cmd, **args):
    reply = eng.handle({"id": 1, "cmd": cmd, "args": args})
    json.dumps(reply, allow_nan=False)
    assert reply["ok"], reply.get("error")
    return reply["result"]


def test_the_all_functions_graph_has_every_function_in_its_own_group(tmp_path):
    eng = _engine()
    _ok(eng, "open", spec=str(_write(tmp_path, "two_funcs.py", MODULE + INPUTS)), pipeline="zero")
    graph = _ok(eng, "relax_graph", step=0, func="*")
    by_func = {}
    for n in graph["nodes"]:
        by_func.setdefault(n["function"], set()).add(n["id"])
    assert set(by_func) == {"main", "doubled"}
    # main keeps the ids of its own graph (selection links by them); the other is prefixed
    main_ids = {n["id"] for n in _ok(eng, "relax_graph", step=0, func="main")["nodes"]}
    assert by_func["main"] == main_ids
    assert {"doubled/lv0", "doubled/lv1", "doubled/x"} <= by_func["doubled"]
    assert {g["label"] for g in graph["groups"]} >= {"main", "doubled"}
    text = _ok(eng, "function_text", step=0, name="*")["text"]
    assert "def main(" in text and "def doubled(" in text and "def relu0" not in text
    # after FuseOps (step 4 of zero), fused groups nest inside their function's group
    _ok(eng, "run_to_end")
    graph = _ok(eng, "relax_graph", step=4, func="*")
    groups = {n["group"] for n in graph["nodes"]}
    assert any(g.startswith("doubled.fused_") for g in groups), groups


def test_a_function_with_several_blocks_has_a_group_per_block():
    from tvm.script import ir as I
    from tvm.script import relax as R

    from irviz.core.views.graph import module_relax_digraph

    @I.ir_module
    class Blocks:
        @R.function
        def main(x: R.Tensor((2, 3), "float32")):
            with R.dataflow():
                lv0 = R.add(x, x)
                R.output(lv0)
            gv = R.multiply(lv0, lv0)    # outside any dataflow block: the blocks stay apart
            with R.dataflow():
                lv1 = R.add(gv, x)
                R.output(lv1)
            return lv1

    assert len(Blocks["main"].body.blocks) == 3
    g = module_relax_digraph(Blocks)
    assert g.nodes["lv0"]["group"] == "main.dataflow 1"
    assert g.nodes["gv"]["group"] == "main.block 2"
    assert g.nodes["lv1"]["group"] == "main.dataflow 3"
    assert g.nodes["x"]["group"] == "main"


def test_an_unregistered_extern_is_flagged_before_any_build(tmp_path):
    eng = _engine()
    _ok(eng, "open", spec=str(_extern_file(tmp_path, "irviz_unreg", registered=False)), pipeline="zero")
    nodes = {n["id"]: n for n in _ok(eng, "relax_graph", step=0, func="main")["nodes"]}
    for nid, name in (("lv0", "irviz_unreg.linear"), ("out", "irviz_unreg.relu")):
        assert nodes[nid]["extern"] == name and nodes[nid]["registered"] is False
        assert nodes[nid]["failed"] is True and nodes[nid]["sublabel"] == f"not registered: {name}"
    # the same module with the functions registered by the file: nothing is flagged
    eng2 = _engine()
    _ok(eng2, "open", spec=str(_extern_file(tmp_path, "irviz_reg")), pipeline="zero")
    nodes = {n["id"]: n for n in _ok(eng2, "relax_graph", step=0, func="main")["nodes"]}
    assert nodes["lv0"]["registered"] is True and not nodes["lv0"].get("failed")
    # the course's own prim_funcs called through call_dps_packed count as found
    eng3 = _engine()
    _ok(eng3, "open", spec=str(_write(tmp_path, "two_funcs.py", MODULE + INPUTS)), pipeline="zero")
    nodes = {n["id"]: n for n in _ok(eng3, "relax_graph", step=0, func="main")["nodes"]}
    assert nodes["out"]["extern"] == "relu0" and nodes["out"]["registered"] is True


def test_tir_functions_list_their_symbolic_sizes(tmp_path):
    eng = _engine()
    _ok(eng, "open", spec=str(_write(tmp_path, "two_funcs.py", MODULE + INPUTS)), pipeline="zero")
    funcs = {f["name"]: f for f in _ok(eng, "tir_functions", step=0)}
    assert funcs["relu0"]["sizes"] == ["n"] and "(1, n)" in funcs["relu0"]["signature"]


def test_an_ir_file_has_no_fx_graph_and_says_so(tmp_path):
    eng = _engine()
    _ok(eng, "open", spec=str(_write(tmp_path, "two_funcs.py", MODULE + INPUTS)), pipeline="zero")
    reply = eng.handle({"id": 2, "cmd": "fx_graph", "args": {}})
    assert not reply["ok"] and "no FX graph for an IR file" in reply["error"]["message"]


def test_a_registered_function_that_raises_is_named_and_the_engine_lives_on(tmp_path):
    """In the engine process, as the app runs it: the error names the extern, then it answers."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    path = _extern_file(tmp_path, "irviz_boom", raises=True)
    env = dict(os.environ, PYTHONPATH=str(root), IRVIZ_ENGINE_NO_PREWARM="1")
    requests = [{"id": 1, "cmd": "open", "args": {"spec": str(path), "pipeline": ""}},
                {"id": 2, "cmd": "build_run", "args": {"repeats": 1}},
                {"id": 3, "cmd": "build_run", "args": {"repeats": 1}},
                {"id": 4, "cmd": "ping", "args": {}},
                {"id": 5, "cmd": "state", "args": {}}]
    proc = subprocess.run([sys.executable, "-m", "irviz.engine"], cwd=str(root), env=env, text=True,
                          input="".join(json.dumps(r) + "\n" for r in requests),
                          capture_output=True, timeout=300)
    replies = {m["id"]: m for m in map(json.loads, proc.stdout.splitlines())
               if "id" in m and "progress" not in m}
    assert replies[1]["ok"], replies[1]
    for rid in (2, 3):   # the same answer twice: the first failure left nothing broken
        err = replies[rid]["error"]
        assert not replies[rid]["ok"] and err["stage"] == "run"
        assert "irviz_boom.relu" in err["message"] and "ValueError: relu got a bad tensor" in err["message"]
        assert "register_global_func" in err["hint"]
    assert replies[4]["ok"] and replies[4]["result"]["pid"] > 0
    assert replies[5]["result"]["model"] == "irviz_boom:MyModuleWithExternCall"
    assert proc.returncode == 0


def test_kernel_times_of_another_function_name_its_own_bindings(tmp_path):
    ws = Workspace()
    ws.open(str(_write(tmp_path, "two_funcs.py", MODULE + INPUTS)))
    _, res = ws.build_run(repeats=1, func="doubled")
    by_binding = {k.binding: k.name for k in res.kernels}
    # the add exists only in doubled, bound to its lv1 (main's bindings would leave it unnamed)
    assert any("add" in name for b, name in by_binding.items() if b == "lv1"), res.kernels
