"""irviz.core.pipeline_compare: two pipelines on one import, step-aligned, diffed and measured."""
import pytest

from irviz.core.errors import RequestError
from irviz.core.passes.pipeline_text import PipelineTextError
from irviz.core import pipeline_compare as C

NO_FOLD = "LegalizeOps,AnnotateTIROpPattern,FuseOps,FuseTIR"


def test_align_steps_pairs_common_passes_and_leaves_the_rest_one_sided():
    a = ["import", "LegalizeOps", "FoldConstant", "FuseOps", "FuseTIR"]
    b = ["import", "LegalizeOps", "LibraryDispatch", "FuseOps", "FuseTIR", "DeadCodeElimination"]
    assert C.align_steps(a, b) == [(0, 0), (1, 1), (2, None), (None, 2), (3, 3), (4, 4), (None, 5)]
    assert C.align_steps(["import"], ["import", "X"]) == [(0, 0), (None, 1)]


@pytest.fixture(scope="module")
def mlp():
    from irviz.core.workspace import Workspace

    ws = Workspace()
    ws.open("sample:mlp", planned=[])
    return ws, C.compare_pipelines(ws, ["zero", NO_FOLD])


def test_pipelines_differing_in_one_pass_align_with_one_one_sided_row(mlp):
    _, cmp = mlp
    names_a = [s.pass_name for s in cmp.steps[0]]
    names_b = [s.pass_name for s in cmp.steps[1]]
    assert names_b == ["import", *NO_FOLD.split(",")]
    assert cmp.aligned == [(0, 0), (1, 1), (2, 2), (3, None), (4, 3), (5, 4)]
    one_sided = [(i, j) for i, j in cmp.aligned if i is None or j is None]
    assert [names_a[i] for i, _ in one_sided] == ["FoldConstant"]
    # both start from the very same import
    assert cmp.steps[0][0].mod.same_as(cmp.steps[1][0].mod)


def test_graph_diff_of_the_final_steps_names_what_folding_removed(mlp):
    _, cmp = mlp
    d = C.pair_diff(cmp, 5, 4)
    funcs = d["graph"]["functions"]
    # without FoldConstant the weight transposes stay kernels of their own
    assert funcs["only_b"] == ["transpose", "transpose1"] and funcs["only_a"] == []
    assert "main" in funcs["changed"]
    main = d["graph"]["nodes"]["main"]
    from irviz.core.views.graph import relax_digraph

    ga, gb = relax_digraph(cmp.steps[0][5].mod), relax_digraph(cmp.steps[1][4].mod)
    assert sorted(gb.nodes[n]["callee"] for n in main["only_b"] if gb.nodes[n]["kind"] == "call_tir") \
        == ["transpose", "transpose1"]
    # A has the transposed weights as constants instead of the original ones
    assert {ga.nodes[n]["shape"] for n in main["only_a"]} == {(784, 128), (128, 10)}
    assert {gb.nodes[n]["shape"] for n in main["only_b"] if gb.nodes[n]["kind"] == "const"} \
        == {(128, 784), (10, 128)}
    # the two fused kernels are the same on both sides
    assert main["same"] >= 2 and main["changed"] == []
    assert "+++ b/transpose" in d["unified"] and d["functions"]


def test_diff_of_diffs(mlp):
    _, cmp = mlp
    same = C.pass_diff(cmp, 1, 1)   # LegalizeOps on the same import: the same effect
    assert same["same_effect"] and same["unified"] == "" and same["functions"] == []
    fuse = C.pass_diff(cmp, 4, 3)   # FuseOps after folding against FuseOps without it
    assert not fuse["same_effect"]
    assert fuse["a"]["pass"] == fuse["b"]["pass"] == "FuseOps"
    assert "transpose" in fuse["unified"] and fuse["functions"][0]["rows"]
    with pytest.raises(RequestError):
        C.pass_diff(cmp, 0, 0)
    with pytest.raises(RequestError):
        C.pair_diff(cmp, 9, 0)


def test_measure_gives_one_row_per_pipeline(mlp):
    ws, cmp = mlp
    rows = C.measure(ws, cmp, repeats=1)
    assert [r["pipeline"] for r in rows] == ["zero", NO_FOLD]
    for r in rows:
        assert r["error"] is None and r["tvm_ms"] > 0 and r["build_seconds"] > 0
        assert r["max_abs_error"] < 1e-4
    # two fused kernels, plus the two transposes folding would have removed
    assert [r["kernels"] for r in rows] == [2, 4]
    out = C.comparison_dict(cmp)
    assert out["aligned"][3] == [3, None]
    assert set(out["pipelines"][0]) >= {"pipeline", "steps", "tvm_ms", "max_abs_error", "kernels",
                                        "build_seconds"}


def test_changed_node_when_the_callee_body_differs():
    from tests.core.test_diff import _mod

    g = C.graph_diff(_mod(2.0), _mod(3.0))
    assert g["functions"]["changed"] == ["scale_fn"]
    assert g["nodes"]["main"]["changed"] == [["a", "a"]]
    assert g["nodes"]["main"]["only_a"] == g["nodes"]["main"]["only_b"] == []


def test_reuses_the_open_session_and_rejects_bad_input(mlp):
    from irviz.core.passes import get_pipeline
    from irviz.core.workspace import Workspace

    ws = Workspace()
    ws.open("sample:mlp", planned=get_pipeline("zero"))
    ws.run_to_end()
    cmp = C.compare_pipelines(ws, ["zero", "LegalizeOps"])
    assert all(x is y for x, y in zip(cmp.steps[0], ws.session.steps))
    with pytest.raises(PipelineTextError):
        C.compare_pipelines(ws, ["zero", "LegalizeOps,NoSuchPass("])
    with pytest.raises(RequestError):
        C.compare_pipelines(ws, ["zero"])
    with pytest.raises(RequestError):
        C.compare_pipelines(Workspace(), ["zero", "zero"])


def test_pair_graphs_lay_out_both_mains_with_the_node_diff(mlp):
    _, cmp = mlp
    g = C.pair_graphs(cmp, 5, 4)
    main = C.pair_diff(cmp, 5, 4)["graph"]["nodes"]["main"]
    assert {k: g[k] for k in ("only_a", "only_b", "changed", "same")} == main
    ids_a = {n["id"] for n in g["graph_a"]["nodes"]}
    ids_b = {n["id"] for n in g["graph_b"]["nodes"]}
    # every node the diff names is drawn on its side, and laid out
    assert set(main["only_a"]) <= ids_a and set(main["only_b"]) <= ids_b and main["only_b"]
    assert all({"x", "y", "w", "h"} <= set(n) for n in g["graph_b"]["nodes"])
    callees_b = {n["id"]: n.get("callee") for n in g["graph_b"]["nodes"]}
    assert sorted(callees_b[i] for i in main["only_b"] if callees_b[i]) == ["transpose", "transpose1"]
    assert (g["a"], g["b"], g["func"]) == (5, 4, "main")
    with pytest.raises(RequestError, match="No Relax function 'nope'"):
        C.pair_graphs(cmp, 5, 4, func="nope")
