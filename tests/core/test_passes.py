"""irviz.core.passes: registry, parameters forwarded to TVM, pipelines == TVM's, PassError,
round-trip claims, user pass files."""
from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import relax
from tvm.ir.instrument import pass_instrument
from tvm.script import from_source
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

from irviz.core import passes as P
from irviz.core.errors import PassError
from irviz.core.passes import PassInvocation, apply_pass
from irviz.core.tvm_compat import host_target, structural_hash

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_PASSES = REPO / "examples" / "my_passes.py"


@pytest.fixture(scope="module")
def target():
    return host_target()


@pytest.fixture
def clean_user_passes():
    before = {s.name for s in P.list_passes()}
    yield
    for s in P.list_passes():
        if s.name not in before:
            P.unregister_pass(s.name)


@I.ir_module
class Small:
    @R.function
    def main(x: R.Tensor((2, 4), "float32"), w: R.Tensor((3, 4), "float32")):
        with R.dataflow():
            lv = R.permute_dims(w)
            lv1 = R.matmul(x, lv)
            lv2 = R.add(lv1, R.const(np.arange(3, dtype="float32")))
            lv3 = R.nn.relu(lv2)
            lv4 = R.reshape(lv3, (3, 2))
            R.output(lv4)
        return lv4


# ---------------------------------------------------------------------------------------------
# registry


REQUIRED = [
    "LegalizeOps", "AnnotateTIROpPattern", "FoldConstant", "FuseOps", "FuseTIR",
    "DeadCodeElimination", "BindParams", "CanonicalizeBindings", "EliminateCommonSubexpr",
    "ConvertToDataflow", "ToNonDataflow", "DispatchSampling", "DispatchSortScan",
    "RewriteDataflowReshape", "RemovePurityChecking", "CallTIRRewrite", "StaticPlanBlockMemory",
    "RewriteCUDAGraph", "LowerAllocTensor", "KillAfterLastUse", "LowerRuntimeBuiltin",
    "ComputePrimValue", "VMShapeLower", "AttachGlobalSymbol", "EwiseFMA", "MatmulAddFuse",
    "LowerToTensorIR",
]


def test_registry_has_required_passes_with_metadata():
    names = [s.name for s in P.list_passes()]
    assert len(names) == len(set(names))
    for n in REQUIRED:
        spec = P.get_pass(n)
        assert spec.description and "\n" not in spec.description
        assert spec.category in {"tvm", "course", "cpu", "build"}
    assert {P.get_pass(n).category for n in ("EwiseFMA", "MatmulAddFuse", "LowerToTensorIR")} == {"course"}
    assert P.get_pass("CallTIRRewrite").category == "build"
    assert P.get_pass("FuseOps").params[0].name == "fuse_opt_level"
    assert P.get_pass("FuseOps").params[0].kind == "int"


def test_every_pass_without_required_params_makes_a_tvm_pass(target):
    for spec in P.list_passes():
        if spec.category == "user" or spec.name == "BindParams":
            continue
        with target:
            made = spec.make(**P.resolve_params(spec, {}))
        assert isinstance(made, tvm.ir.transform.Pass), spec.name


def test_pipelines_are_data_with_descriptions():
    assert set(P.PIPELINES) >= {"zero", "course", "default_build"}
    for desc, invs in P.PIPELINES.values():
        assert desc and "\n" not in desc
        for inv in invs:
            P.get_pass(inv.name)
    assert [i.name for i in P.get_pipeline("zero")] == [
        "LegalizeOps", "AnnotateTIROpPattern", "FoldConstant", "FuseOps", "FuseTIR"]
    assert [i.name for i in P.get_pipeline("course")][:4] == [
        "EwiseFMA", "MatmulAddFuse", "LowerToTensorIR", "FuseTIR"]
    fresh = P.get_pipeline("zero")
    fresh[0].params["x"] = 1
    assert P.get_pipeline("zero")[0].params == {}
    with pytest.raises(PassError, match="unknown pipeline") as ei:
        P.get_pipeline("nope")
    assert "default_build" in ei.value.hint


# ---------------------------------------------------------------------------------------------
# pipelines stepped == TVM's closures


@pass_instrument
class _Recorder:
    def __init__(self):
        self.depth, self.names = 0, []

    def run_before_pass(self, mod, info):
        self.depth += 1

    def run_after_pass(self, mod, info):
        self.depth -= 1
        if self.depth == 2:  # 0: closure, 1: Sequential, 2: the real passes
            self.names.append(info.name)


@pytest.mark.parametrize("name", ["zero", "default_build"])
def test_pipeline_steps_mirror_tvm(name, target):
    rec = _Recorder()
    with target, tvm.transform.PassContext(opt_level=3, instruments=[rec]):
        expected = relax.get_pipeline(name)(Small)
    assert [i.name for i in P.get_pipeline(name)] == rec.names

    cur = Small
    for inv in P.get_pipeline(name):
        cur = apply_pass(inv, cur, target)
    tvm.ir.assert_structural_equal(cur, expected)


def test_default_build_after_zero_equals_tvm(target):
    with target, tvm.transform.PassContext(opt_level=3):
        expected = relax.get_pipeline("default_build")(relax.get_pipeline("zero")(Small))
    cur = Small
    for inv in P.get_pipeline("zero") + P.get_pipeline("default_build"):
        cur = apply_pass(inv, cur, target)
    tvm.ir.assert_structural_equal(cur, expected)
    ex = tvm.compile(cur, target=target, relax_pipeline=None)
    x = np.random.rand(2, 4).astype("float32")
    w = np.random.rand(3, 4).astype("float32")
    out = relax.VirtualMachine(ex, tvm.cpu())["main"](tvm.runtime.tensor(x), tvm.runtime.tensor(w))
    ref = np.maximum(x @ w.T + np.arange(3, dtype="float32"), 0).reshape(3, 2)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5)


# ---------------------------------------------------------------------------------------------
# round trip: roundtrip_ok says whether TVM's printed script parses back


def _constants_in_print_order(mod):
    order = []

    def visit(e):
        if (isinstance(e, tvm.ir.GenericConst) and isinstance(e.value, tvm.runtime.Tensor)
                and not any(e.same_as(o) for o in order)):
            order.append(e)

    for gv in sorted(mod.get_global_vars(), key=lambda g: g.name_hint):
        if isinstance(mod[gv], relax.Function):
            relax.analysis.post_order_visit(mod[gv], visit)
    return order


def _roundtrips(mod) -> bool:
    try:
        back = from_source(mod.script(), extra_vars={
            "metadata": {"ir.GenericConst": _constants_in_print_order(mod)}, "I": I, "R": R, "T": T})
    except Exception:
        return False
    return tvm_ffi.structural_equal(back, mod)


@I.ir_module
class Tiny:
    @R.function
    def main(x: R.Tensor((2, 3), "float32")):
        with R.dataflow():
            lv = R.nn.relu(x)
            lv1 = R.reshape(lv, (3, 2))
            R.output(lv1)
        return lv1


def test_roundtrip_ok_matches_reality(target):
    """(The parser is slow, ~0.3 s per module even this small: keep the module tiny.)"""
    cur = Tiny
    seen = {}
    for inv in P.get_pipeline("zero") + P.get_pipeline("default_build"):
        cur = apply_pass(inv, cur, target)
        seen[inv.name] = _roundtrips(cur)
        assert seen[inv.name] == P.get_pass(inv.name).roundtrip_ok, inv.name
    assert [n for n, ok in seen.items() if not ok] == [
        "CallTIRRewrite", "StaticPlanBlockMemory", "RewriteCUDAGraph"]


# ---------------------------------------------------------------------------------------------
# parameters forwarded: Before/Expected


@I.ir_module
class Legalized:
    @T.prim_func(private=True, s_tir=True)
    def add(x: T.Buffer((T.int64(2), T.int64(3)), "float32"), b: T.Buffer((T.int64(3),), "float32"), T_add: T.Buffer((T.int64(2), T.int64(3)), "float32")):
        T.func_attr({"op_pattern": 0, "tirx.noalias": True})
        for ax0, ax1 in T.grid(T.int64(2), T.int64(3)):
            with T.sblock("T_add"):
                v_ax0, v_ax1 = T.axis.remap("SS", [ax0, ax1])
                T.reads(x[v_ax0, v_ax1], b[v_ax1])
                T.writes(T_add[v_ax0, v_ax1])
                T_add[v_ax0, v_ax1] = x[v_ax0, v_ax1] + b[v_ax1]

    @T.prim_func(private=True, s_tir=True)
    def relu(lv: T.Buffer((T.int64(2), T.int64(3)), "float32"), compute: T.Buffer((T.int64(2), T.int64(3)), "float32")):
        T.func_attr({"op_pattern": 0, "tirx.noalias": True})
        for i0, i1 in T.grid(T.int64(2), T.int64(3)):
            with T.sblock("compute"):
                v_i0, v_i1 = T.axis.remap("SS", [i0, i1])
                T.reads(lv[v_i0, v_i1])
                T.writes(compute[v_i0, v_i1])
                compute[v_i0, v_i1] = T.max(lv[v_i0, v_i1], T.float32(0.0))

    @R.function
    def main(x: R.Tensor((2, 3), "float32"), b: R.Tensor((3,), "float32")) -> R.Tensor((2, 3), "float32"):
        cls = Legalized
        with R.dataflow():
            lv = R.call_tir(cls.add, (x, b), out_ty=R.Tensor((2, 3), "float32"))
            lv1 = R.call_tir(cls.relu, (lv,), out_ty=R.Tensor((2, 3), "float32"))
            R.output(lv1)
        return lv1


def test_fuse_ops_param_forwarded(target):
    @I.ir_module
    class Fused:
        @T.prim_func(private=True, s_tir=True)
        def add(x: T.Buffer((T.int64(2), T.int64(3)), "float32"), b: T.Buffer((T.int64(3),), "float32"), T_add: T.Buffer((T.int64(2), T.int64(3)), "float32")):
            T.func_attr({"op_pattern": 0, "tirx.noalias": True})
            for ax0, ax1 in T.grid(T.int64(2), T.int64(3)):
                with T.sblock("T_add"):
                    v_ax0, v_ax1 = T.axis.remap("SS", [ax0, ax1])
                    T.reads(x[v_ax0, v_ax1], b[v_ax1])
                    T.writes(T_add[v_ax0, v_ax1])
                    T_add[v_ax0, v_ax1] = x[v_ax0, v_ax1] + b[v_ax1]

        @T.prim_func(private=True, s_tir=True)
        def relu(lv: T.Buffer((T.int64(2), T.int64(3)), "float32"), compute: T.Buffer((T.int64(2), T.int64(3)), "float32")):
            T.func_attr({"op_pattern": 0, "tirx.noalias": True})
            for i0, i1 in T.grid(T.int64(2), T.int64(3)):
                with T.sblock("compute"):
                    v_i0, v_i1 = T.axis.remap("SS", [i0, i1])
                    T.reads(lv[v_i0, v_i1])
                    T.writes(compute[v_i0, v_i1])
                    compute[v_i0, v_i1] = T.max(lv[v_i0, v_i1], T.float32(0.0))

        @R.function(private=True)
        def fused_add_relu(x: R.Tensor((2, 3), "float32"), b: R.Tensor((3,), "float32")) -> R.Tensor((2, 3), "float32"):
            R.func_attr({"Primitive": True})
            cls = Fused
            with R.dataflow():
                lv = R.call_tir(cls.add, (x, b), out_ty=R.Tensor((2, 3), "float32"))
                gv = R.call_tir(cls.relu, (lv,), out_ty=R.Tensor((2, 3), "float32"))
                R.output(gv)
            return gv

        @R.function
        def main(x: R.Tensor((2, 3), "float32"), b: R.Tensor((3,), "float32")) -> R.Tensor((2, 3), "float32"):
            cls = Fused
            with R.dataflow():
                gv = cls.fused_add_relu(x, b)
                R.output(gv)
            return gv

    tvm.ir.assert_structural_equal(apply_pass(PassInvocation("FuseOps"), Legalized, target), Fused)
    # fuse_opt_level=0 (given as the GUI's text) switches fusion off: module unchanged
    off = apply_pass(PassInvocation("FuseOps", {"fuse_opt_level": "0"}), Legalized, target)
    tvm.ir.assert_structural_equal(off, Legalized)


def test_legalize_then_annotate_gives_legalized(target):
    @I.ir_module
    class High:
        @R.function
        def main(x: R.Tensor((2, 3), "float32"), b: R.Tensor((3,), "float32")):
            with R.dataflow():
                lv = R.add(x, b)
                lv1 = R.nn.relu(lv)
                R.output(lv1)
            return lv1

    cur = apply_pass(PassInvocation("LegalizeOps"), High, target)
    cur = apply_pass(PassInvocation("AnnotateTIROpPattern"), cur, target)
    tvm.ir.assert_structural_equal(cur, Legalized)
    # skip_ops forwarded
    skipped = apply_pass(PassInvocation("LegalizeOps", {"skip_ops": "relax.nn.relu"}), High, target)
    assert "R.nn.relu" in skipped["main"].script() and "R.add" not in skipped["main"].script()


def test_dead_code_elimination_entry_functions(target):
    """Public functions are always roots; entry_functions adds roots (here a private one)."""

    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((2,), "float32")):
            cls = Before
            with R.dataflow():
                unused = R.multiply(x, x)  # noqa: F841 - the dead binding the pass must remove
                y = cls.helper(x)
                R.output(y)
            return y

        @R.function(private=True)
        def helper(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
            return R.add(x, x)

        @R.function(private=True)
        def other(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
            return R.subtract(x, x)

    @I.ir_module
    class Expected:
        @R.function
        def main(x: R.Tensor((2,), "float32")):
            cls = Expected
            with R.dataflow():
                y = cls.helper(x)
                R.output(y)
            return y

        @R.function(private=True)
        def helper(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
            return R.add(x, x)

    tvm.ir.assert_structural_equal(apply_pass(PassInvocation("DeadCodeElimination"), Before, target), Expected)

    @I.ir_module
    class ExpectedWithOther:
        @R.function
        def main(x: R.Tensor((2,), "float32")):
            cls = ExpectedWithOther
            with R.dataflow():
                y = cls.helper(x)
                R.output(y)
            return y

        @R.function(private=True)
        def helper(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
            return R.add(x, x)

        @R.function(private=True)
        def other(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
            return R.subtract(x, x)

    kept = apply_pass(PassInvocation("DeadCodeElimination", {"entry_functions": "main, other"}), Before, target)
    tvm.ir.assert_structural_equal(kept, ExpectedWithOther)


def test_bind_params_from_npz_and_tvm_params(tmp_path, target):
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((2,), "float32"), w: R.Tensor((2,), "float32")):
            with R.dataflow():
                y = R.add(x, w)
                R.output(y)
            return y

    w = np.array([1.5, -2.0], dtype="float32")

    @I.ir_module
    class Expected:
        @R.function
        def main(x: R.Tensor((2,), "float32")):
            with R.dataflow():
                y = R.add(x, R.const(w))
                R.output(y)
            return y

    npz = tmp_path / "params.npz"
    np.savez(npz, w=w)
    after = apply_pass(PassInvocation("BindParams", {"params": str(npz)}), Before, target)
    tvm.ir.assert_structural_equal(after, Expected)

    blob = tmp_path / "params.params"
    blob.write_bytes(tvm.runtime.save_param_dict({"w": tvm.runtime.tensor(w)}))
    after2 = apply_pass(
        PassInvocation("BindParams", {"func_name": "main", "params": str(blob)}), Before, target)
    tvm.ir.assert_structural_equal(after2, Expected)

    # a name that is not a parameter: TVM's message, with the function's real parameter names
    np.savez(tmp_path / "bad.npz", weight=w)
    with pytest.raises(PassError) as ei:
        apply_pass(PassInvocation("BindParams", {"params": str(tmp_path / "bad.npz")}), Before, target)
    assert "BindParams" in ei.value.message and "weight" in ei.value.message
    assert '"x", "w"' in ei.value.message
    with pytest.raises(PassError, match="not found"):
        apply_pass(PassInvocation("BindParams", {"params": str(tmp_path / "missing.npz")}), Before)
    with pytest.raises(PassError, match="weights are already bound; open with --keep-params"):
        apply_pass(PassInvocation("BindParams"), Before)


def test_common_subexpr_and_canonicalize(target):
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((2,), "float32")):
            with R.dataflow():
                a = R.add(x, x)
                b = R.add(x, x)
                c = R.multiply(a, b)
                R.output(c)
            return c

    @I.ir_module
    class Expected:
        @R.function
        def main(x: R.Tensor((2,), "float32")):
            with R.dataflow():
                a = R.add(x, x)
                c = R.multiply(a, a)
                R.output(c)
            return c

    cur = apply_pass(PassInvocation("EliminateCommonSubexpr"), Before, target)
    cur = apply_pass(PassInvocation("CanonicalizeBindings"), cur, target)
    tvm.ir.assert_structural_equal(cur, Expected)


def test_dataflow_conversion_round_trip(target):
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((2,), "float32")):
            with R.dataflow():
                a = R.add(x, x)
                b = R.multiply(a, a)
                R.output(b)
            return b

    non_df = apply_pass(PassInvocation("ToNonDataflow"), Before, target)
    assert "R.dataflow" not in non_df.script()
    back = apply_pass(PassInvocation("ConvertToDataflow", {"min_size": 1}), non_df, target)
    assert "R.dataflow" in back.script()


# ---------------------------------------------------------------------------------------------
# apply_pass: errors, no mutation of the input


def test_unknown_pass_and_bad_params():
    with pytest.raises(PassError, match="unknown pass 'Nope'") as ei:
        apply_pass(PassInvocation("Nope"), Small)
    assert "LegalizeOps" in ei.value.hint and ei.value.stage == "pipeline"
    with pytest.raises(PassError, match="no parameter 'level'") as ei:
        apply_pass(PassInvocation("FuseOps", {"level": 1}), Small)
    assert "fuse_opt_level" in ei.value.hint
    with pytest.raises(PassError, match="must be an integer"):
        apply_pass(PassInvocation("FuseOps", {"fuse_opt_level": "three"}), Small)
    with pytest.raises(PassError, match="must be true/false"):
        apply_pass(PassInvocation("LegalizeOps", {"enable_warning": "maybe"}), Small)
    with pytest.raises(PassError, match="takes no parameters|no parameter"):
        apply_pass(PassInvocation("FoldConstant", {"x": 1}), Small)
    with pytest.raises(PassError, match="expected an IRModule"):
        apply_pass(PassInvocation("FoldConstant"), "not a module")


def test_tvm_failure_carries_real_message(target):
    with pytest.raises(PassError) as ei:
        apply_pass(PassInvocation("DeadCodeElimination", {"entry_functions": "nope"}), Small, target)
    err = ei.value
    assert err.message.startswith("DeadCodeElimination failed")
    assert 'Cannot find global var "nope"' in err.message
    assert "TVM_BACKTRACE" not in err.message
    assert err.detail and "Traceback" in err.detail
    assert err.user_message().count("hint:") == 1


def test_apply_pass_never_mutates_input(target):
    """dlight's ApplyDefaultSchedule rewrites its input module in place; apply_pass must not."""

    @I.ir_module
    class Reductions:
        @R.function
        def main(x: R.Tensor((4, 64), "float32"), w: R.Tensor((64,), "float32"), m: R.Tensor((32, 64), "float32")):
            with R.dataflow():
                a = R.sum(x, axis=[1])
                b = R.matmul(m, w)
                R.output(a, b)
            return (a, b)

    legal = apply_pass(PassInvocation("LegalizeOps"), Reductions, target)
    h = structural_hash(legal)
    funcs = dict(legal.functions)
    out = apply_pass(PassInvocation("DlightCPUSchedule"), legal, target)
    assert structural_hash(out) != h  # it did schedule something
    assert structural_hash(legal) == h
    assert all(legal[gv].same_as(f) for gv, f in funcs.items())
    assert not out.same_as(legal)
    assert P.get_pass("DlightCPUSchedule").mutates_input


def test_apply_pass_accepts_name_and_target_string():
    out = apply_pass("LegalizeOps", Small, "llvm")
    assert "R.call_tir" in out["main"].script()


# ---------------------------------------------------------------------------------------------
# user pass files


def test_example_pass_file(clean_user_passes, target):
    specs = P.load_pass_file(EXAMPLE_PASSES)
    names = {s.name for s in specs}
    assert names == {"ReluToMaximum", "CleanUp", "FoldThenCSE"}
    assert all(s.category == "user" and s.source.startswith(str(EXAMPLE_PASSES)) for s in specs)
    assert P.get_pass("CleanUp").params[0].name == "entry_functions"
    assert P.get_pass("CleanUp").params[0].kind == "str"

    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((2, 3), "float32")):
            with R.dataflow():
                lv = R.nn.relu(x)
                lv1 = R.add(lv, lv)
                R.output(lv1)
            return lv1

    @I.ir_module
    class Expected:
        @R.function
        def main(x: R.Tensor((2, 3), "float32")):
            with R.dataflow():
                lv = R.maximum(x, R.const(0, "float32"))
                lv1 = R.add(lv, lv)
                R.output(lv1)
            return lv1

    h = structural_hash(Before)
    after = apply_pass(PassInvocation("ReluToMaximum"), Before, target)
    tvm.ir.assert_structural_equal(after, Expected)
    assert structural_hash(Before) == h

    # factory pass with a parameter; Sequential from the IRVIZ_PASSES entry
    @I.ir_module
    class WithDead:
        @R.function
        def main(x: R.Tensor((2,), "float32")):
            with R.dataflow():
                a = R.add(x, x)
                b = R.add(x, x)
                dead = R.multiply(x, x)  # noqa: F841 - the dead binding the pass must remove
                c = R.multiply(a, b)
                R.output(c)
            return c

        @R.function(private=True)
        def other(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
            return x

    cleaned = apply_pass(PassInvocation("CleanUp", {"entry_functions": "main"}), WithDead, target)
    assert [gv.name_hint for gv in cleaned.get_global_vars()] == ["main"]
    assert "R.multiply(x, x)" not in cleaned.script()
    cse = apply_pass(PassInvocation("FoldThenCSE", {"call_only": True}), WithDead, target)
    assert cse["main"].script().count("R.add(x, x)") == 1

    # loading again replaces the user's own passes (edit + reload)
    P.load_pass_file(EXAMPLE_PASSES)
    assert [s.name for s in P.list_passes()].count("ReluToMaximum") == 1


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_pass_file_syntax_error(tmp_path, clean_user_passes):
    p = _write(tmp_path, "broken.py", """\
        from irviz.core.passes import irviz_pass

        @irviz_pass(name="Broken")
        def broken(mod)
            return mod
        """)
    with pytest.raises(PassError) as ei:
        P.load_pass_file(p)
    assert f"{p}:4" in ei.value.message and "syntax error" in ei.value.message


def test_reloading_a_pass_file_drops_removed_passes(tmp_path, clean_user_passes):
    p = _write(tmp_path, "mine.py", """\
        from irviz.core.passes import irviz_pass

        @irviz_pass(name="MineA")
        def a(mod):
            return mod

        @irviz_pass(name="MineB")
        def b(mod):
            return mod
        """)
    assert [s.name for s in P.load_pass_file(p)] == ["MineA", "MineB"]
    p.write_text(p.read_text().replace('"MineB"', '"MineC"'))
    assert [s.name for s in P.load_pass_file(p)] == ["MineA", "MineC"]
    names = [s.name for s in P.list_passes()]
    assert "MineB" not in names and "MineA" in names and "MineC" in names


def test_pass_file_without_passes(tmp_path, clean_user_passes):
    p = _write(tmp_path, "empty.py", "X = 1\n")
    with pytest.raises(PassError, match="defines no passes") as ei:
        P.load_pass_file(p)
    assert "IRVIZ_PASSES" in ei.value.hint


def test_pass_file_errors_name_their_line(tmp_path, clean_user_passes):
    p = _write(tmp_path, "raises.py", """\
        import math

        value = math.sqrt(-1)
        """)
    with pytest.raises(PassError) as ei:
        P.load_pass_file(p)
    assert f"{p}:3" in ei.value.message and "ValueError" in ei.value.message

    p2 = _write(tmp_path, "badlist.py", "IRVIZ_PASSES = [42]\n")
    with pytest.raises(PassError, match=r"IRVIZ_PASSES\[0\] is int"):
        P.load_pass_file(p2)

    p3 = _write(tmp_path, "clash.py", """\
        from irviz.core.passes import irviz_pass

        @irviz_pass(name="FuseOps")
        def mine(mod):
            return mod
        """)
    P.load_pass_file(p3)  # a built-in's name is the user's; the built-in is builtin:FuseOps
    assert P.get_pass("FuseOps").category == "user"
    assert P.get_pass("builtin:FuseOps").category == "tvm"
    P.unregister_pass("FuseOps")
    assert P.get_pass("FuseOps").category == "tvm"

    with pytest.raises(PassError, match="not found"):
        P.load_pass_file(tmp_path / "nope.py")


def test_user_pass_failure_names_file_and_line(tmp_path, clean_user_passes, target):
    p = _write(tmp_path, "fails.py", """\
        from irviz.core.passes import irviz_pass

        @irviz_pass(name="Fails", description="always fails")
        def fails(mod, factor: int = 2):
            raise RuntimeError(f"bad factor {factor}")

        @irviz_pass(name="ReturnsNone")
        def returns_none(mod):
            return None

        @irviz_pass
        def Bare(mod):
            '''Bare decorator: name and description from the function.'''
            return mod
        """)
    specs = P.load_pass_file(p)
    assert [s.params for s in specs if s.name == "Fails"][0][0].kind == "int"
    with pytest.raises(PassError) as ei:
        apply_pass(PassInvocation("Fails", {"factor": "3"}), Small, target)
    assert f"{p}:5" in ei.value.message and "bad factor 3" in ei.value.message
    assert str(p) in ei.value.hint
    with pytest.raises(PassError, match="return an IRModule"):
        apply_pass(PassInvocation("ReturnsNone"), Small, target)
    bare = P.get_pass("Bare")
    assert bare.description.startswith("Bare decorator") and bare.category == "user"
    assert apply_pass(PassInvocation("Bare"), Small, target) is not None
