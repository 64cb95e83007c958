"""Pass files with TVM's own kinds of pass (module_pass / function_pass / dataflowblock_pass classes,
Pass instances, Sequentials), a built-in's name taken by a user pass, and a pass that raises."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest
from tvm.script import ir as I
from tvm.script import relax as R

from irviz.core import passes as P
from irviz.core.errors import PassError
from irviz.core.passes import PassInvocation, apply_pass, parse_pipeline, pipeline_text
from irviz.core.tvm_compat import host_target


@pytest.fixture
def user_passes():
    """Every user pass the test registers is gone afterwards (uncovering the built-ins)."""
    before = {id(s) for s in P.list_passes()}
    yield
    for s in P.list_passes():
        if s.category == "user" and id(s) not in before:
            P.unregister_pass(s.name)


@pytest.fixture(scope="module")
def target():
    return host_target()


@I.ir_module
class MulAdd:
    @R.function
    def main(x: R.Tensor((3, 4), "float32"), y: R.Tensor((3, 4), "float32")):
        with R.dataflow():
            lv0 = R.multiply(x, y)
            gv0 = R.add(lv0, y)
            R.output(gv0)
        return gv0


KINDS = '''\
import tvm
from tvm import relax
from tvm.relax.transform import FuseOps as ImportedFuseOps  # noqa: F401 - imported, not defined


@tvm.ir.transform.module_pass(opt_level=2, name="TagModule")
class TagModulePass:
    """Tag the module with a number."""

    def __init__(self, factor: int = 2, label="plain", scale: float = 0.5):
        self.factor, self.label, self.scale = factor, label, scale

    def transform_module(self, mod, ctx):
        return mod.with_attr("irviz_factor", self.factor * 10)


@relax.transform.function_pass(opt_level=0)
class TagFunctions:
    def __init__(self, tag: str = "x"):
        self.tag = tag

    def transform_function(self, func, mod, ctx):
        return func.with_attr("irviz_tag", self.tag)


@relax.transform.dataflowblock_pass(opt_level=0, name="MulToAdd")
class MulToAddPass:
    def transform_dataflowblock(self, block, mod, ctx):
        mul = tvm.ir.Op.get("relax.multiply")
        return relax.DataflowBlock([
            relax.VarBinding(b.var, relax.op.add(*b.value.args))
            if isinstance(b.value, relax.Call) and b.value.op == mul else b
            for b in block.bindings])


@tvm.ir.transform.module_pass(opt_level=0)
def drop_tag(mod, ctx):
    return mod.without_attr("irviz_factor")


both = tvm.transform.Sequential([TagModulePass(factor=7), MulToAddPass()])
named = tvm.transform.Sequential([drop_tag], name="DropAgain")
instance = TagModulePass(factor=3)  # the class's own pass: not a second one
fuse = relax.transform.FuseOps()  # TVM's pass, already built in
'''


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def _line(path, text):
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_each_kind_of_tvm_pass_is_a_pass_with_its_name_line_and_params(tmp_path, user_passes, target):
    p = _write(tmp_path, "kinds.py", KINDS)
    specs = P.load_pass_file(p)
    assert [s.name for s in specs] == ["TagModule", "TagFunctions", "MulToAdd", "drop_tag", "both",
                                       "DropAgain"]
    by = {s.name: s for s in specs}
    assert by["TagModule"].source == f"{p}:{_line(p, 'class TagModulePass')}"
    assert by["drop_tag"].source == f"{p}:{_line(p, 'def drop_tag')}"
    assert by["both"].source == f"{p}:{_line(p, 'both = ')}"
    assert all(s.category == "user" for s in specs)
    assert by["TagModule"].description == "Tag the module with a number."
    assert [(q.name, q.kind, q.default) for q in by["TagModule"].params] == [
        ("factor", "int", 2), ("label", "str", "plain"), ("scale", "float", 0.5)]
    assert [(q.name, q.kind) for q in by["TagFunctions"].params] == [("tag", "str")]
    assert P.get_pass("FuseOps").category == "tvm"  # fuse = FuseOps() did not take its name

    # __init__ parameters in the pipeline text reach the class
    invs = parse_pipeline("TagModule(factor=3),TagFunctions(tag=y),MulToAdd")
    assert pipeline_text(invs) == "TagModule(factor=3),TagFunctions(tag=y),MulToAdd"
    mod = MulAdd
    for inv in invs:
        mod = apply_pass(inv, mod, target)
    assert int(mod.attrs["irviz_factor"]) == 30
    assert str(mod["main"].attrs["irviz_tag"]) == "y"
    assert "R.multiply" not in mod.script() and mod.script().count("R.add(") == 2
    assert int(apply_pass(PassInvocation("TagModule"), MulAdd, target).attrs["irviz_factor"]) == 20

    # Sequentials run their passes; a function-decorated pass is an instance
    both = apply_pass(PassInvocation("both"), MulAdd, target)
    assert int(both.attrs["irviz_factor"]) == 70 and "R.multiply" not in both.script()
    dropped = apply_pass(PassInvocation("DropAgain"), both, target)
    assert dropped.attrs is None or "irviz_factor" not in dropped.attrs


def test_a_pass_class_parameter_without_default_must_be_given(tmp_path, user_passes, target):
    p = _write(tmp_path, "needs.py", '''\
        import tvm

        @tvm.ir.transform.module_pass(opt_level=0, name="Needs")
        class NeedsFactor:
            def __init__(self, factor: int):
                self.factor = factor

            def transform_module(self, mod, ctx):
                return mod.with_attr("irviz_factor", self.factor)
        ''')
    (spec,) = P.load_pass_file(p)
    assert [(q.name, q.kind, q.default) for q in spec.params] == [("factor", "int", None)]
    with pytest.raises(PassError, match="Needs needs factor") as ei:
        apply_pass(PassInvocation("Needs"), MulAdd, target)
    assert "Needs(factor=VALUE)" in ei.value.hint
    out = apply_pass(parse_pipeline("Needs(factor=4)")[0], MulAdd, target)
    assert int(out.attrs["irviz_factor"]) == 4


def test_a_user_pass_takes_a_builtins_name_and_the_builtin_stays_reachable(tmp_path, user_passes, target):
    p = _write(tmp_path, "mine.py", '''\
        import tvm

        @tvm.ir.transform.module_pass(opt_level=2, name="MatmulAddFuse")
        class MyFuse:
            def transform_module(self, mod, ctx):
                return mod.with_attr("irviz_mine", 1)
        ''')
    P.load_pass_file(p)
    mine = P.get_pass("MatmulAddFuse")
    assert mine.category == "user" and mine.source == f"{p}:4"
    builtin = P.get_pass("builtin:MatmulAddFuse")
    assert builtin.category == "course" and builtin.name == "builtin:MatmulAddFuse"
    names = [s.name for s in P.list_passes()]
    assert names.count("MatmulAddFuse") == 1 and "builtin:MatmulAddFuse" in names

    # a named pipeline is built-in passes
    assert [i.name for i in parse_pipeline("course")][:3] == ["EwiseFMA", "builtin:MatmulAddFuse",
                                                             "LowerToTensorIR"]
    invs = parse_pipeline("MatmulAddFuse, builtin:MatmulAddFuse")
    assert [i.name for i in invs] == ["MatmulAddFuse", "builtin:MatmulAddFuse"]
    assert pipeline_text(invs) == "MatmulAddFuse,builtin:MatmulAddFuse"

    @I.ir_module
    class Linear:
        @R.function
        def main(x: R.Tensor((2, 3), "float32"), w: R.Tensor((3, 4), "float32")):
            with R.dataflow():
                lv = R.matmul(x, w)
                gv = R.add(lv, R.const(np.ones(4, "float32")))
                R.output(gv)
            return gv

    ours = apply_pass(invs[0], Linear, target)
    assert int(ours.attrs["irviz_mine"]) == 1 and "fused_matmul_add" not in ours.script()
    theirs = apply_pass(invs[1], Linear, target)
    assert "fused_matmul_add0" in theirs.script()
    with pytest.raises(PassError, match="builtin:"):
        P.register_pass(P.PassSpec("builtin:X", "", [], make=lambda: None))

    # without the user's pass the plain name is the built-in again
    P.unregister_pass("MatmulAddFuse")
    assert P.get_pass("MatmulAddFuse").category == "course"
    assert "builtin:MatmulAddFuse" not in [s.name for s in P.list_passes()]


def test_a_raising_pass_names_itself_and_its_line(tmp_path, user_passes, target):
    p = _write(tmp_path, "boom.py", '''\
        import tvm

        @tvm.ir.transform.module_pass(opt_level=0, name="Boom")
        class BoomPass:
            def transform_module(self, mod, ctx):
                raise ValueError("no fusion for you")

        @tvm.ir.transform.module_pass(opt_level=0, name="BadInit")
        class BadInit:
            def __init__(self, size: int = 0):
                raise RuntimeError(f"size {size} is not allowed")
        ''')
    P.load_pass_file(p)
    with pytest.raises(PassError) as ei:
        apply_pass(PassInvocation("Boom"), MulAdd, target)
    assert ei.value.message.startswith("Boom failed at ")
    assert f"{p}:6" in ei.value.message and "no fusion for you" in ei.value.message
    assert str(p) in ei.value.hint
    with pytest.raises(PassError) as ei:
        apply_pass(PassInvocation("BadInit", {"size": 3}), MulAdd, target)
    assert "BadInit: cannot create the pass" in ei.value.message and f"{p}:11" in ei.value.message


def test_two_passes_of_one_name_are_refused_with_their_lines(tmp_path, user_passes):
    p = _write(tmp_path, "twice.py", '''\
        import tvm

        @tvm.ir.transform.module_pass(opt_level=0, name="Same")
        class A:
            def transform_module(self, mod, ctx):
                return mod

        @tvm.ir.transform.module_pass(opt_level=0, name="Same")
        class B:
            def transform_module(self, mod, ctx):
                return mod
        ''')
    with pytest.raises(PassError, match="pass names used twice: Same at 4, 9"):
        P.load_pass_file(p)
    assert P.find_pass("Same") is None


def test_the_engine_keeps_applied_builtins_when_a_file_takes_their_names(user_passes):
    from irviz.engine import Engine

    eng = Engine(type("C", (), {"send": lambda self, m: None})())
    pipeline = "MatmulAddFuse,LowerToTensorIR,FuseTIR"
    assert eng.handle({"id": 1, "cmd": "open", "args": {"spec": "sample:course_mymodule",
                                                         "pipeline": pipeline}})["ok"]
    assert eng.handle({"id": 2, "cmd": "step"})["ok"]
    rep = eng.handle({"id": 3, "cmd": "load_pass_file", "args": {"path": "sample:course_chapter_passes"}})
    assert rep["ok"], rep
    listed = {p["name"]: p for p in rep["result"]}
    assert listed["MatmulAddFuse"]["shadows"] == "builtin:MatmulAddFuse"
    assert listed["MatmulAddFuse"]["source"].endswith("course_chapter_passes.py:107")
    assert listed["builtin:MatmulAddFuse"]["category"] == "course"
    state = eng.handle({"id": 4, "cmd": "state"})["result"]
    assert [s["pass"] for s in state["steps"]] == ["import", "builtin:MatmulAddFuse"]
    assert [p["name"] for p in state["planned"]] == ["builtin:LowerToTensorIR", "FuseTIR"]
    assert state["pipeline_text"] == "builtin:MatmulAddFuse,builtin:LowerToTensorIR,FuseTIR"
