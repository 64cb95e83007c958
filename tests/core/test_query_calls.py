"""Query elements that name what a binding calls: module functions and extern functions, however
they are called (call_tir, call_dps_packed, directly), globs of them, and `*` through them all."""
import json

import pytest
from tvm import relax
from tvm.relax import dpl
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

from irviz.cli.main import main
from irviz.core.passes import parse_pipeline
from irviz.core.views import graph_query as query
from irviz.core.views.graph import relax_digraph
from irviz.core.workspace import Workspace


@pytest.fixture(scope="module")
def mixture_steps():
    ws = Workspace()
    ws.open("sample:course_mixture", planned=[])
    return ws.session.steps


@pytest.fixture(scope="module")
def fused_steps():
    ws = Workspace()
    ws.open("sample:mlp", planned=parse_pipeline("LegalizeOps,AnnotateTIROpPattern,FuseOps,FuseTIR"))
    ws.run_to_end()
    return {st.pass_name: st for st in ws.session.steps}


def _direct(func, pattern) -> list[str]:
    """The bindings of `func` whose value `pattern` matches, as dpl itself says."""
    var2val = relax.analysis.get_var2val(func)
    return [b.var.name for block in func.body.blocks for b in block.bindings
            if not isinstance(b.value, relax.Var) and pattern.match(b.value, var2val)]


def _only_step(found) -> list[list[str]]:
    (row,) = found["steps"]
    assert row["matches"] == len(row["bindings"])
    return row["bindings"]


def test_mixture_chain_through_call_dps_packed(mixture_steps):
    # the chapter's module: lv0 = call_dps_packed("linear0"), lv1 = ("env.relu", lv0), out = ("env.linear", lv1)
    assert _only_step(query.query_steps(mixture_steps, "linear0 -> env.relu")) == [["lv0", "lv1"]]
    assert _only_step(query.query_steps(mixture_steps, "linear0 -> env.relu -> env.linear")) == [["lv0", "lv1", "out"]]
    assert _only_step(query.query_steps(mixture_steps, "env.relu -> linear0")) == []
    shaped = query.query_steps(mixture_steps, "env.relu(dtype=float32) -> env.linear(dtype=float16)")
    assert _only_step(shaped) == []

    w = dpl.wildcard
    by_hand = dpl.is_call_dps_packed("env.relu", [dpl.is_call_dps_packed("linear0", [w(), w(), w()])])
    assert _direct(mixture_steps[0].mod["main"], by_hand) == ["lv1"]


def test_star_matches_through_call_dps_packed(mixture_steps):
    assert _only_step(query.query_steps(mixture_steps, "* -> *")) == [["lv0", "lv1"], ["lv1", "out"]]
    assert _only_step(query.query_steps(mixture_steps, "* -> * -> *")) == [["lv0", "lv1", "out"]]
    assert _only_step(query.query_steps(mixture_steps, "env.* -> *")) == [["lv1", "out"]]
    assert _only_step(query.query_steps(mixture_steps, "call_dps_packed -> call_dps_packed")) == \
        [["lv0", "lv1"], ["lv1", "out"]]


def test_unknown_name_lists_what_the_module_has(mixture_steps):
    with pytest.raises(query.QueryError) as info:
        query.query_steps(mixture_steps, "linear0 -> env.relux")
    err = info.value
    assert err.column == 12
    assert err.message.startswith("unknown name 'env.relux' (did you mean 'env.relu'?) at column 12")
    assert "'env.relux' is not a Relax op, a function or an extern function of any step" in err.hint
    assert "ops: call_dps_packed;" in err.hint
    assert "functions: linear0, main;" in err.hint
    assert "extern functions: env.linear, env.relu, linear0" in err.hint
    with pytest.raises(query.QueryError) as info:
        query.query_steps(mixture_steps, "fused_*")
    assert "'fused_*' matches no Relax op, function or extern function" in info.value.hint


def test_globs_over_fused_functions(fused_steps):
    fuse_ops, fuse_tir = fused_steps["FuseOps"], fused_steps["FuseTIR"]
    # FuseOps: main calls the fused Relax functions directly; FuseTIR: through call_tir. FuseOps
    # gives two bindings the name lv; the match names them as the graph does (lv, lv#1)
    found = query.query_steps([fuse_ops, fuse_tir], "fused_* -> fused_*")
    assert [r["bindings"] for r in found["steps"]] == [[["lv#1", "lv1"]], [["lv#1", "gv"]]]
    for st, (chain,) in zip((fuse_ops, fuse_tir), (r["bindings"] for r in found["steps"])):
        assert set(chain) <= set(relax_digraph(st.mod, "main").nodes)

    gv, w = fuse_ops.mod.get_global_var, dpl.wildcard
    by_hand = dpl.CallPattern(dpl.ExprPattern(gv("fused_matmul1_add1")),
                              [dpl.CallPattern(dpl.ExprPattern(gv("fused_matmul_add_relu")), [w(), w(), w()]),
                               w(), w()])
    assert _direct(fuse_ops.mod["main"], by_hand) == ["lv1"]
    exact = query.query_steps([fuse_ops], "fused_matmul_add_relu -> fused_matmul1_add1")
    assert _only_step(exact) == [["lv#1", "lv1"]]
    # an exact name is that function (or name + digits), not every function whose name holds it:
    # relu after FuseOps is only the call inside the fused function, not main's call of it
    assert _only_step(query.query_steps([fuse_ops], "relu")) == [["fused_matmul_add_relu:gv"]]
    assert sorted(_only_step(query.query_steps([fuse_ops], "*relu"))) == [["fused_matmul_add_relu:gv"], ["lv#1"]]


@I.ir_module
class Helpers:
    @T.prim_func(s_tir=True)
    def double(a: T.Buffer((4,), "float32"), b: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.sblock("b"):
                vi = T.axis.spatial(4, i)
                b[vi] = a[vi] * T.float32(2)

    @R.function
    def helper(x: R.Tensor((4,), "float32"), y: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        with R.dataflow():
            s = R.add(x, y)
            R.output(s)
        return s

    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        cls = Helpers
        with R.dataflow():
            d = R.call_tir(cls.double, (x,), R.Tensor((4,), "float32"))
            h = cls.helper(x, d)
            r = R.nn.relu(h)
            R.output(r)
        return r


class _Step:
    def __init__(self, mod):
        self.index, self.pass_name, self.mod = 0, "import", mod


def test_direct_call_of_a_relax_function():
    steps = [_Step(Helpers)]
    # d feeds helper as its second argument, and helper's result feeds relu
    assert _only_step(query.query_steps(steps, "double -> helper -> relu")) == [["d", "h", "r"]]
    assert _only_step(query.query_steps(steps, "helper")) == [["h"]]
    assert _only_step(query.query_steps(steps, "add")) == [["helper:s"]]
    assert _only_step(query.query_steps(steps, "* -> * -> *")) == [["d", "h", "r"]]


def test_pattern_names_may_be_globs():
    assert [(n.name, n.constraints) for n in query.parse("fused_*(dtype=float32) -> * -> env.re?u")] == \
        [("fused_*", {"dtype": "float32"}), ("*", {}), ("env.re?u", {})]


def test_cli_mixture_query(capsys):
    assert main(["query", "sample:course_mixture", "linear0 -> env.relu", "--json", "-"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {tuple(map(tuple, s["bindings"])) for s in out["steps"]} == {(("lv0", "lv1"),)}
    assert main(["query", "sample:course_mixture", "--pipeline", "zero", "linear0 -> relu1"]) == 2
    err = capsys.readouterr().err
    assert "unknown name 'relu1'" in err and "'relu1' is not a Relax op" in err and "extern functions: env.linear, env.relu, linear0" in err
