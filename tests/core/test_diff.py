"""irviz.core.views.module_diff on small hand-written modules."""
import tvm

from irviz.core.views import module_diff as diff
from irviz.core.tvm_compat import I, R, T


def _mod(scale: float):
    @I.ir_module
    class Mod:
        @T.prim_func(private=True)
        def scale_fn(x: T.Buffer((4,), "float32"), y: T.Buffer((4,), "float32")):
            for i in range(4):
                y[i] = x[i] * T.float32(scale)

        @T.prim_func(private=True)
        def add_one(x: T.Buffer((4,), "float32"), y: T.Buffer((4,), "float32")):
            for i in range(4):
                y[i] = x[i] + T.float32(1)

        @R.function
        def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
            cls = Mod
            with R.dataflow():
                a = R.call_tir(cls.scale_fn, (x,), out_ty=R.Tensor((4,), "float32"))
                b = R.call_tir(cls.add_one, (a,), out_ty=R.Tensor((4,), "float32"))
                R.output(b)
            return b

    return Mod


def test_compare_modules_and_unified_diff_only_changed_function():
    a, b = _mod(2.0), _mod(3.0)
    ch = diff.compare_modules(a, b)
    assert ch.changed == ["scale_fn"] and not ch.added and not ch.removed and ch.changed_any
    text = diff.unified_diff(a, b)
    assert "--- a/scale_fn" in text and "+++ b/scale_fn" in text
    assert "add_one" not in text and "main" not in text
    minus = [l for l in text.splitlines() if l.startswith("-") and not l.startswith("---")]
    plus = [l for l in text.splitlines() if l.startswith("+") and not l.startswith("+++")]
    assert len(minus) == 1 and "2" in minus[0] and len(plus) == 1 and "3" in plus[0]
    # identical modules: nothing
    assert not diff.compare_modules(a, _mod(2.0)).changed_any
    assert diff.unified_diff(a, _mod(2.0)) == ""
    assert diff.side_by_side(a, _mod(2.0)) == []


def test_added_removed_functions():
    a = _mod(2.0)
    b = tvm.IRModule({gv: f for gv, f in a.functions.items() if gv.name_hint != "add_one"})
    ch = diff.compare_modules(a, b)
    assert ch.removed == ["add_one"] and not ch.added and not ch.changed
    assert diff.compare_modules(b, a).added == ["add_one"]
    text = diff.unified_diff(b, a)
    assert "--- /dev/null" in text and "+++ b/add_one" in text
    fds = diff.side_by_side(b, a)
    assert [(f.name, f.status) for f in fds] == [("add_one", "added")]
    assert all(r[4] == "insert" and r[0] is None and r[5] == r[6] == [] for r in fds[0].rows)


def test_function_text_is_clean_and_cached():
    m = _mod(2.0)
    t = diff.function_text(m, "scale_fn")
    assert t.startswith("@T.prim_func") and "def scale_fn(" in t
    assert "# from tvm.script" not in t and "Metadata omitted" not in t
    assert diff.function_text(m, "scale_fn") is t  # cached
    main = diff.function_text(m, "main")
    assert main.startswith("@R.function") and "def main(" in main
    assert diff.function_names(m) == ["main", "add_one", "scale_fn"]


def test_intraline_ranges_simple_pair():
    left = "    lv1 = R.add(x, y)"
    right = "    lv1 = R.multiply(x, y)"
    lr, rr = diff.intraline_ranges(left, right)
    assert lr == [[12, 15]] and left[12:15] == "add"
    assert rr == [[12, 20]] and right[12:20] == "multiply"
    # identifiers are compared whole
    lr, rr = diff.intraline_ranges("a = lv1 + b", "a = lv12 + b")
    assert lr == [[4, 7]] and rr == [[4, 8]]


def test_side_by_side_rows_collapse_context():
    a = [f"line {i}" for i in range(100)]
    b = list(a)
    b[50] = "line fifty"
    rows, starts = diff.function_rows(a, b, context=2)
    assert starts == [0] and len(rows) == 5
    tags = [r[4] for r in rows]
    assert tags == ["equal", "equal", "replace", "equal", "equal"]
    r = rows[2]
    assert r[0] == 51 and r[2] == 51 and r[1] == "line 50" and r[3] == "line fifty"
    assert r[5] == [[5, 7]] and r[6] == [[5, 10]]
    # two far-apart changes -> two hunks
    b[5] = "changed"  # unlike "line 5": shown as a deleted and an inserted line, not a pair
    rows, starts = diff.function_rows(a, b, context=2)
    assert len(starts) == 2 and len(rows) == 11
    assert [r[4] for r in rows[:6]] == ["equal", "equal", "delete", "insert", "equal", "equal"]
    # similar lines are paired even when a block has a different number of lines
    rows, _ = diff.function_rows(["a = f(x)", "b = g(a)", "c = h(b)"],
                                 ["b = g(x)", "c = h(b, 1)"], context=0)
    assert [(r[0], r[2], r[4]) for r in rows] == [(1, None, "delete"), (2, 1, "replace"),
                                                  (3, 2, "replace")]
    # unequal replace blocks produce delete/insert rows
    rows, _ = diff.function_rows(["x", "y = 1", "z"], ["x", "y = 2"], context=1)
    assert [r[4] for r in rows] == ["equal", "replace", "delete"]


def test_side_by_side_on_modules():
    fds = diff.side_by_side(_mod(2.0), _mod(3.0))
    assert [(f.name, f.status) for f in fds] == [("scale_fn", "changed")]
    rep = [r for r in fds[0].rows if r[4] == "replace"]
    assert len(rep) == 1
    lno, ltext, rno, rtext, _, lr, rr = rep[0]
    assert lno == rno and ltext[lr[0][0]:lr[0][1]] == "2.0" and rtext[rr[0][0]:rr[0][1]] == "3.0"
    d = fds[0].to_dict()
    assert set(d) >= {"name", "status", "rows"}


def _const_mod(values):
    import numpy as np

    from irviz.core.tvm_compat import relax

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((3,), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            gv = bb.emit_output(relax.op.add(x, relax.const(np.array(values, dtype="float32"))))
        bb.emit_func_output(gv)
    return bb.get()


def test_constant_values_count_as_changes():
    a, same, other = _const_mod([1, 2, 3]), _const_mod([1, 2, 3]), _const_mod([1, 2, 4])
    assert not diff.compare_modules(a, same).changed_any  # distinct objects, equal content
    assert diff.compare_modules(a, other).changed == ["main"]
    assert diff.function_hashes(a)["main"] != diff.function_hashes(other)["main"]
