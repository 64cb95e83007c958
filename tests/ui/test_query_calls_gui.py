"""The Relax pane's query box on the course's mixture of call_dps_packed calls, against a real
engine: the chain through the extern functions is highlighted, an unknown name says what there is."""
import os

import pytest

T = 120_000


@pytest.fixture
def win(qtbot, real_window):
    return real_window


def _shot(widget, name):
    folder = os.environ.get("IRVIZ_SHOTS")
    if folder:
        widget.grab().save(os.path.join(folder, name))


def test_mixture_chain_highlighted_and_unknown_name_explained(qtbot, win):
    win.open_spec("sample:course_mixture", pipeline="zero")
    qtbot.waitUntil(lambda: win.all_filled() or win.last_error is not None, timeout=T)
    assert win.last_error is None, win.last_error
    relax = win.relax
    relax.query_box.setText("linear0 -> env.relu")
    relax.run_query()
    qtbot.waitUntil(lambda: relax.query_result is not None, timeout=T)
    assert relax.matches_here() == [["lv0", "lv1"]]
    assert relax.graph.highlighted("found") == {"lv0", "lv1"}
    relax.goto_match(+1)
    assert relax.graph.selected() == "lv1"
    assert relax.query_info.text().startswith("1/1 here")
    _shot(relax, "relax_query_mixture.png")

    relax.query_box.setText("* -> *")
    relax.run_query()
    qtbot.waitUntil(lambda: (relax.query_result or {}).get("pattern") == "* -> *", timeout=T)
    assert relax.matches_here() == [["lv0", "lv1"], ["lv1", "out"]]
    assert relax.graph.highlighted("found") == {"lv0", "lv1", "out"}

    relax.query_box.setText("linear0 -> env.relux")
    relax.run_query()
    qtbot.waitUntil(lambda: relax.query_result is None and "column" in relax.query_info.text(), timeout=T)
    assert "did you mean 'env.relu'" in relax.query_info.text()
    assert "extern functions: env.linear, env.relu, linear0" in relax.query_info.toolTip()
    assert not relax.graph.highlighted("found")
    _shot(relax, "relax_query_mixture_error.png")
    relax.query_box.setText("")
    relax.run_query()


def test_matches_inside_fused_functions_found_where_they_are_inlined(qtbot, win):
    # after FuseOps main calls fused_matmul_add_relu directly; the graph draws its bindings
    # inlined under the call (lv/lv1, ...), and the call binding lv#1 by its result node lv/gv
    win.open_spec("sample:mlp", pipeline="LegalizeOps,AnnotateTIROpPattern,FuseOps,FuseTIR")
    qtbot.waitUntil(lambda: bool(win.state.get("model")) or win.last_error is not None, timeout=T)
    assert win.last_error is None, win.last_error
    win.bridge.request("jump", index=3)
    qtbot.waitUntil(lambda: win.state.get("cursor") == 3, timeout=T)
    qtbot.waitUntil(lambda: win.all_filled() or win.last_error is not None, timeout=T)
    relax = win.relax
    relax.query_box.setText("matmul -> add -> relu")
    relax.run_query()
    qtbot.waitUntil(lambda: relax.query_result is not None, timeout=T)
    assert relax.matches_here() == [["fused_matmul_add_relu:lv1", "fused_matmul_add_relu:lv2",
                                     "fused_matmul_add_relu:gv"]]
    assert relax.graph.highlighted("found") == {"lv/lv1", "lv/lv2", "lv/gv"}

    relax.query_box.setText("fused_* -> fused_*")
    relax.run_query()
    qtbot.waitUntil(lambda: (relax.query_result or {}).get("pattern") == "fused_* -> fused_*", timeout=T)
    assert relax.matches_here() == [["lv#1", "lv1"]]
    assert relax.graph.highlighted("found") == {"lv/gv", "lv1/gv"}
    relax.goto_match(+1)
    assert relax.graph.selected() == "lv1/gv"
    _shot(relax, "relax_query_fused.png")
    relax.query_box.setText("")
    relax.run_query()
