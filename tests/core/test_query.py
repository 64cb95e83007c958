"""Pattern queries over the Relax graph agree with tvm.relax.dpl written out by hand."""
import json

import pytest
from tvm import relax
from tvm.relax import dpl

from irviz.cli.main import main
from irviz.core.passes import parse_pipeline
from irviz.core.views import graph_query as query
from irviz.core.workspace import Workspace


@pytest.fixture(scope="module")
def resnet_steps():
    ws = Workspace()
    ws.open("sample:resnet18", planned=parse_pipeline("LegalizeOps,AnnotateTIROpPattern,FuseOps,FuseTIR"))
    ws.run_to_end()
    return ws.session.steps


def _count_direct(func, pattern) -> list[str]:
    """The bindings of `func` whose value `pattern` matches, as dpl itself says."""
    var2val = relax.analysis.get_var2val(func)
    return [b.var.name for block in func.body.blocks for b in block.bindings
            if not isinstance(b.value, relax.Var) and pattern.match(b.value, var2val)]


def test_conv_bn_relu_before_fuseops_matches_dpl(resnet_steps):
    found = query.query_steps(resnet_steps, "conv2d -> batch_norm -> relu")
    by_pass = {row["pass"]: row for row in found["steps"]}

    w = dpl.wildcard
    conv = dpl.is_op("relax.nn.conv2d")(w(), w())
    bn = dpl.is_op("relax.nn.batch_norm")(conv, w(), w(), w(), w())
    direct = dpl.is_op("relax.nn.relu")(dpl.is_tuple_get_item(bn, 0))
    expected = _count_direct(resnet_steps[0].mod["main"], direct)
    # ResNet-18: the stem, and the first conv of each of the 8 basic blocks
    assert len(expected) == 9
    assert by_pass["import"]["matches"] == len(expected)
    assert [chain[-1] for chain in by_pass["import"]["bindings"]] == expected

    # after LegalizeOps the same chain is three call_tir calls of conv2d*, batch_norm*, relu*
    legal = resnet_steps[1].mod
    assert by_pass["LegalizeOps"]["matches"] == 9
    ct = lambda name, *args: dpl.is_call_tir(name, list(args))
    direct_tir = [ct(r, dpl.is_tuple_get_item(ct(b, ct(c, w(), w()), w(), w(), w(), w()), 0))
                  for c in ("conv2d", "conv2d1", "conv2d2", "conv2d3", "conv2d4")
                  for b in [g.name_hint for g in legal.get_global_vars() if g.name_hint.startswith("batch_norm")]
                  for r in [g.name_hint for g in legal.get_global_vars() if g.name_hint.startswith("relu")]
                  if c in [g.name_hint for g in legal.get_global_vars()]]
    any_tir = direct_tir[0]
    for p in direct_tir[1:]:
        any_tir = any_tir | p
    assert len(_count_direct(legal["main"], any_tir)) == 9
    # FuseTIR leaves only TensorIR kernels: no Relax op is left to match
    assert by_pass["FuseTIR"]["matches"] == 0


def test_add_relu_chains_and_constraints(resnet_steps):
    found = query.query_steps(resnet_steps[:1], "conv2d -> * -> add -> relu")
    assert found["steps"][0]["matches"] == 8  # one residual add per basic block
    w = dpl.wildcard
    direct = dpl.is_op("relax.nn.relu")(dpl.is_op("relax.add")(w(), w()))
    assert len(_count_direct(resnet_steps[0].mod["main"], direct)) == 8
    shaped = query.query_steps(resnet_steps[:1], "conv2d(shape=[1,512,7,7], dtype=float32)")
    wrong = query.query_steps(resnet_steps[:1], "conv2d(dtype=float16)")
    assert shaped["steps"][0]["matches"] == 5 and wrong["steps"][0]["matches"] == 0


@pytest.mark.parametrize("text, column", [
    ("conv2d -> ", 11),
    ("conv2d -> relu(dtype float32)", 22),
    ("conv2d $ relu", 8),
    ("conv2d(size=3)", 8),
    ("matmul ->> relu", 10),
])
def test_malformed_pattern_names_the_column(text, column):
    with pytest.raises(query.QueryError) as info:
        query.parse(text)
    assert info.value.column == column
    assert f"column {column}" in info.value.message
    assert info.value.caret.splitlines()[1] == " " * (column - 1) + "^"


def test_unknown_name_is_an_error_at_its_column(resnet_steps):
    with pytest.raises(query.QueryError) as info:
        query.query_steps(resnet_steps[:2], "conv2d -> frobnicate")
    assert info.value.column == 11
    # what the steps have, LegalizeOps' numbered kernels folded into one entry per family
    assert "functions: add…add4, batch_norm…batch_norm4, conv2d…conv2d10, main," in info.value.hint
    assert "ops: add, batch_norm, call_tir, conv2d," in info.value.hint


def test_cli_query_json(capsys):
    assert main(["query", "sample:mlp", "--pipeline", "zero", "matmul -> add -> relu", "--json", "-"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["pattern"] == "matmul -> add -> relu"
    assert [s["matches"] for s in out["steps"]] == [1, 1, 1, 1, 1, 0]
    assert out["steps"][4]["pass"] == "FuseOps"
    assert out["steps"][0]["bindings"] == [["lv1", "lv2", "lv3"]]
    assert main(["query", "sample:mlp", "matmul -> -> relu"]) == 2
    assert "column 11" in capsys.readouterr().err
