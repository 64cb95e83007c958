"""The Relax pane's list of query matches against the fake engine: one entry per match at the
shown step, by its bindings; choosing one centres and selects it, and ◀ ▶ keep the list in step."""
import os

from fake_bridge import FakeBridge, open_mlp

MATCHES = {0: [["lv", "lv1"], ["lv1", "lv2"]], 1: []}


def _with_query(win, matches=None):
    matches = MATCHES if matches is None else matches
    bridge = win.bridge
    compute = FakeBridge._compute

    def answer(self, cmd, args):
        if cmd != "query":
            return compute(self, cmd, args)
        steps = [{"index": i, "pass": "import" if i == 0 else "LegalizeOps", "matches": len(m),
                  "bindings": m} for i, m in matches.items()]
        return {"pattern": args["pattern"], "steps": steps}

    bridge._compute = answer.__get__(bridge)


def test_matches_listed_and_chosen(qtbot, win):
    _with_query(win)
    open_mlp(qtbot, win)
    relax = win.relax
    assert not relax.query_list.isEnabled() and relax.query_list.count() == 0
    relax.query_box.setText("* -> *")
    relax.run_query()
    qtbot.waitUntil(lambda: relax.query_result is not None, timeout=5000)
    items = [relax.query_list.itemText(i) for i in range(relax.query_list.count())]
    assert items == ["1: lv → lv1", "2: lv1 → lv2"]
    assert relax.query_list.isEnabled() and relax.query_list.currentIndex() == -1
    assert "lv1 (add)" in relax.query_list.itemData(1, 3)  # 3: the tooltip role, with the ops

    relax.query_list.setCurrentIndex(1)
    relax.query_list.activated.emit(1)  # what picking it from the list sends
    assert relax.query_pos == 1 and relax.graph.selected() == "lv2"
    assert relax.query_info.text().startswith("2/2 here")
    assert relax.linked_ids() == ["lv2"]  # selected as a click would: the other panes follow
    relax.goto_match(+1)
    assert relax.query_list.currentIndex() == 0 and relax.graph.selected() == "lv1"
    relax.goto_match(-1)
    assert relax.query_list.currentIndex() == 1
    folder = os.environ.get("IRVIZ_SHOTS")
    if folder:
        relax.grab().save(os.path.join(folder, "relax_query_matches.png"))

    relax.query_box.setText("")
    relax.run_query()
    assert relax.query_list.count() == 0 and not relax.query_list.isEnabled()


def test_no_match_at_this_step_leaves_the_list_empty(qtbot, win):
    _with_query(win)
    open_mlp(qtbot, win)
    relax = win.relax
    relax.query_box.setText("* -> *")
    relax.run_query()
    qtbot.waitUntil(lambda: relax.query_list.count() == 2, timeout=5000)
    win.act_step.trigger()
    qtbot.waitUntil(lambda: win.state["cursor"] == 1 and relax.query_result is not None
                    and relax.query_list.count() == 0, timeout=5000)
    assert not relax.query_list.isEnabled()
    assert relax.query_list.placeholderText() == "0 matches here"
    relax.goto_match(+1)  # nothing to go to: nothing changes
    assert relax.query_pos == -1


def test_a_match_in_another_function_is_not_drawn_on_mains_namesake(qtbot, win):
    # fused_f:lv2 is lv2 of fused_f; main, shown here, has an lv2 of its own
    _with_query(win, {0: [["lv", "lv1"], ["fused_f:lv2"]], 1: []})
    open_mlp(qtbot, win)
    relax = win.relax
    relax.query_box.setText("* -> *")
    relax.run_query()
    qtbot.waitUntil(lambda: relax.query_list.count() == 2, timeout=5000)
    assert relax.graph.highlighted("found") == {"lv", "lv1"}
    assert relax.query_list.itemText(1) == "2: fused_f:lv2"
