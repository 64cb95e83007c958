"""Query matches find their nodes in every view of the Relax graph the engine draws: main with
fused functions inlined, a fused function on its own, and all functions at once."""
import pytest

from irviz.core.passes import parse_pipeline
from irviz.core.views import graph_query as query
from irviz.core.workspace import Workspace
from irviz.protocol.commands import ALL_FUNCTIONS
from irviz.engine.views import StepViews
from irviz.ui.panes.relax import match_node_ids

FUSED = "fused_matmul_add_relu"


@pytest.fixture(scope="module")
def after_fuse_ops():
    ws = Workspace()
    ws.open("sample:mlp", planned=parse_pipeline("LegalizeOps,AnnotateTIROpPattern,FuseOps"))
    ws.run_to_end()
    views = StepViews(ws, lambda *a, **k: None)
    step = ws.session.steps[-1]

    def matches(pattern):
        (row,) = query.query_steps([step], pattern)["steps"]
        return row["bindings"]

    def nodes(func):
        return views.relax_graph(step.index, func)["nodes"]

    return matches, nodes


def test_inner_bindings_of_a_fused_function(after_fuse_ops):
    matches, nodes = after_fuse_ops
    (chain,) = matches("matmul -> add -> relu")
    assert chain == [f"{FUSED}:lv1", f"{FUSED}:lv2", f"{FUSED}:gv"]
    # main inlines the fused function under its call, lv (the first of two bindings named lv)
    assert match_node_ids(chain, nodes("main"), "main") == ["lv/lv1", "lv/lv2", "lv/gv"]
    assert match_node_ids(chain, nodes(FUSED), FUSED) == ["lv1", "lv2", "gv"]
    assert match_node_ids(chain, nodes(ALL_FUNCTIONS), ALL_FUNCTIONS) == ["lv/lv1", "lv/lv2", "lv/gv"]


def test_calls_of_fused_functions_are_their_result_nodes(after_fuse_ops):
    matches, nodes = after_fuse_ops
    (chain,) = matches("fused_* -> fused_*")
    assert chain == ["lv#1", "lv1"]
    assert match_node_ids(chain, nodes("main"), "main") == ["lv/gv", "lv1/gv"]
    assert match_node_ids(chain, nodes(ALL_FUNCTIONS), ALL_FUNCTIONS) == ["lv/gv", "lv1/gv"]
    # main's bindings are not the fused function's, whatever their names
    assert match_node_ids(chain, nodes(FUSED), FUSED) == []
    # transpose, transpose1: the first is the other binding named lv
    assert [match_node_ids(c, nodes("main"), "main") for c in matches("transpose")] == [["lv"], ["lv4"]]
