"""irviz.core.session: stepping, pipeline changes, failures, listeners, provenance."""
import pytest
import torch
import tvm

from irviz.core import passes
from irviz.core.errors import PassError
from irviz.core.frontend.importer import Imported
from irviz.core.session import Session
from irviz.core.views.provenance import carry_provenance, relax_to_callee
from irviz.core.tvm_compat import I, R, T


def _small_module():
    @I.ir_module
    class Mod:
        @R.function
        def main(x: R.Tensor((4, 4), "float32"), y: R.Tensor((4, 4), "float32")) -> R.Tensor((4, 4), "float32"):
            with R.dataflow():
                a = R.add(x, y)
                b = R.nn.relu(a)
                c = R.multiply(b, y)
                R.output(c)
            return c

    return Mod


@pytest.fixture
def session():
    mod = _small_module()
    imp = Imported(mod=mod, provenance={"x": ["x"], "add": ["a"], "relu": ["b"], "mul": ["c"]},
                   importer="test", seconds=0.0)
    return Session(imp)


def _names(s):
    return [st.pass_name for st in s.steps]


def test_step_back_jump_run_to_end(session):
    s = session
    assert _names(s) == ["import"] and s.cursor == 0 and s.current is s.steps[0]
    assert s.step_forward() is None and s.error is None  # nothing planned
    s.set_pipeline(passes.get_pipeline("zero"))
    assert s.pipeline_remaining() == 5
    st = s.step_forward()
    assert st.index == 1 and st.pass_name == "LegalizeOps" and st.changed and s.cursor == 1
    assert "main" in st.changes.changed and st.changes.added
    assert st.mod is s.module() and s.module(0) is s.steps[0].mod
    assert s.step_back().index == 0 and s.cursor == 0
    assert s.step_back() is None
    # moving forward over a recorded step re-uses the snapshot
    assert s.step_forward() is st and len(s.steps) == 2
    end = s.run_to_end()
    assert _names(s) == ["import", "LegalizeOps", "AnnotateTIROpPattern", "FoldConstant", "FuseOps", "FuseTIR"]
    assert end is s.steps[-1] and s.cursor == 5 and s.pipeline == [] and s.pipeline_remaining() == 0
    # FoldConstant on a module without constants changes nothing
    fold = s.steps[3]
    assert fold.changed is False and not fold.changes.changed_any
    assert all(x.changed for i, x in enumerate(s.steps) if i != 3)
    assert s.jump(2).index == 2 and s.cursor == 2
    assert s.jump(-1).index == 5
    with pytest.raises(IndexError):
        s.jump(9)
    unified, sbs = s.diff(3, 4)
    assert "fused_" in unified and any(f.status == "added" for f in sbs)
    assert s.diff(2, 3) == ("", [])


def test_jump_applies_planned_passes(session):
    s = session
    s.set_pipeline(passes.get_pipeline("zero"))
    assert s.jump(2).pass_name == "AnnotateTIROpPattern" and len(s.steps) == 3 and s.cursor == 2


def test_listeners(session):
    s = session
    events = []
    unsub = s.subscribe(lambda e, p: events.append((e, p)))
    s.subscribe(lambda e, p: 1 / 0)  # a broken listener is ignored
    s.set_pipeline(["LegalizeOps"])
    s.step_forward()
    s.step_back()
    assert [e for e, _ in events] == ["pipeline_changed", "applying", "stepped", "stepped"]
    assert events[1][1] == {"pass": "LegalizeOps", "index": 1}
    assert events[2][1]["applied"] is True and events[2][1]["step"].index == 1
    assert events[3][1]["applied"] is False and events[3][1]["cursor"] == 0
    unsub()
    s.step_forward()
    assert len(events) == 4


@pytest.fixture
def boom_pass():
    @tvm.ir.transform.module_pass(opt_level=0, name="Boom")
    def boom(mod, ctx):
        raise ValueError("boom at the test pass")

    spec = passes.PassSpec(name="TestBoom", description="always fails", params=[],
                           make=lambda: boom, category="user")
    passes.register_pass(spec, replace=True)
    yield "TestBoom"
    passes.unregister_pass("TestBoom")


def test_failing_pass_keeps_last_good_step(session, boom_pass):
    s = session
    events = []
    s.subscribe(lambda e, p: events.append((e, p)))
    s.set_pipeline(["LegalizeOps", boom_pass, "AnnotateTIROpPattern"])
    assert s.step_forward().index == 1
    assert s.step_forward() is None
    assert isinstance(s.error, PassError) and "boom" in s.error.user_message()
    assert s.cursor == 1 and len(s.steps) == 2 and s.current.pass_name == "LegalizeOps"
    assert [i.name for i in s.pipeline] == [boom_pass, "AnnotateTIROpPattern"]
    assert events[-1][0] == "error" and events[-1][1]["pass"] == boom_pass
    assert events[-1][1]["error"] is s.error
    assert s.run_to_end() is None and s.cursor == 1
    # replacing the rest of the pipeline clears the error and carries on
    s.set_pipeline(["AnnotateTIROpPattern"])
    assert s.error is None and s.step_forward().pass_name == "AnnotateTIROpPattern"


def test_set_pipeline_midway_truncates(session):
    s = session
    s.set_pipeline(passes.get_pipeline("zero"))
    s.run_to_end()
    s.jump(2)
    events = []
    s.subscribe(lambda e, p: events.append((e, p)))
    s.set_pipeline(["FuseOps"])  # differs from the recorded FoldConstant: drop steps 3..5
    assert len(s.steps) == 3 and s.cursor == 2 and [i.name for i in s.pipeline] == ["FuseOps"]
    assert events[0][0] == "pipeline_changed" and events[0][1]["dropped"] == 3
    st = s.step_forward()
    assert st.index == 3 and st.pass_name == "FuseOps" and len(s.steps) == 4
    # the same passes as recorded: snapshots are kept
    s.jump(1)
    kept = s.steps[2]
    s.set_pipeline(["AnnotateTIROpPattern", "FuseOps", "FuseTIR"])
    assert len(s.steps) == 4 and s.steps[2] is kept and [i.name for i in s.pipeline] == ["FuseTIR"]
    assert [x.name for x in s.full_pipeline()] == ["LegalizeOps", "AnnotateTIROpPattern", "FuseOps", "FuseTIR"]


def test_provenance_small_module(session):
    s = session
    s.set_pipeline(passes.get_pipeline("zero"))
    s.run_to_end()
    leg = s.steps[1].provenance
    assert leg == {"x": ["x"], "add": ["a"], "relu": ["b"], "mul": ["c"]}
    fused = s.steps[4]
    callees = relax_to_callee(fused)
    names = set(callees)
    # every op maps to a binding of main that calls a fused function
    for fx in ("add", "relu", "mul"):
        (v,) = fused.provenance[fx]
        assert v in names and callees[v].startswith("fused_")
    last = s.steps[5]
    tir = {gv.name_hint for gv, f in last.mod.functions.items() if isinstance(f, tvm.tirx.PrimFunc)}
    for fx in ("add", "relu", "mul"):
        (v,) = last.provenance[fx]
        assert relax_to_callee(last)[v] in tir


class _CNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 4, 3, padding=1)
        self.fc = torch.nn.Linear(4 * 4 * 4, 3)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        return self.fc(torch.flatten(y, 1))


@pytest.fixture(scope="module")
def torch_session():
    from irviz.core.frontend import capture
    from irviz.core.frontend import importer
    from irviz.core.frontend.model_file import LoadedModel

    torch.manual_seed(0)
    loaded = LoadedModel(module=_CNN().eval(), example_inputs=(torch.randn(1, 2, 4, 4),),
                         spec="test", name="cnn")
    cap = capture.capture(loaded)
    imp = importer.import_model(cap)
    s = Session(imp, cap)
    s.set_pipeline(passes.get_pipeline("zero"))
    s.run_to_end()
    assert s.error is None
    return s


def _main_vars(mod):
    main = mod["main"]
    return {b.var.name for blk in main.body.blocks for b in blk.bindings} | {p.name for p in main.params}


def test_provenance_through_legalize_and_fuse(torch_session):
    s = torch_session
    ops = [n.name for n in s.captured.graph.nodes if n.kind == "op"]
    assert ops
    p0 = s.steps[0].provenance
    assert all(p0[n] for n in ops)
    by = {st.pass_name: st for st in s.steps}
    # LegalizeOps keeps every binding var: provenance unchanged
    assert by["LegalizeOps"].provenance == p0
    for name in ("FuseOps", "FuseTIR"):
        st = by[name]
        present = _main_vars(st.mod)
        callees = relax_to_callee(st)
        for n in ops:
            vs = st.provenance[n]
            assert vs, (name, n)
            assert set(vs) <= present, (name, n, vs)
            assert all(v in callees for v in vs), (name, n, vs)
    fuse = by["FuseOps"]
    conv = next(n.name for n in s.captured.graph.nodes if "conv" in n.target)
    relu = next(n.name for n in s.captured.graph.nodes if "relu" in n.target)
    # conv and relu fused into one call; its callee's name says so
    assert fuse.provenance[conv] == fuse.provenance[relu]
    assert "conv2d" in relax_to_callee(fuse)[fuse.provenance[conv][0]]


def test_carry_provenance_identity_when_module_unchanged(torch_session):
    st = torch_session.steps[1]
    assert carry_provenance(st.mod, st.mod, st.provenance) == st.provenance


def test_relax_to_callee_kinds():
    @I.ir_module
    class Mod:
        @T.prim_func(private=True)
        def add_one(x: T.Buffer((4,), "float32"), y: T.Buffer((4,), "float32")):
            for i in range(4):
                y[i] = x[i] + T.float32(1)

        @R.function
        def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
            cls = Mod
            with R.dataflow():
                a = R.call_tir(cls.add_one, (x,), out_ty=R.Tensor((4,), "float32"))
                b = R.call_dps_packed("my_ext", (a,), out_ty=R.Tensor((4,), "float32"))
                c = R.add(b, a)
                R.output(c)
            return c

    assert relax_to_callee(Mod) == {"a": "add_one", "b": "my_ext"}
    s = Session(Imported(mod=Mod, provenance={}, importer="test", seconds=0.0))
    s.set_pipeline(["LegalizeOps", "ToNonDataflow", "RemovePurityChecking", "CallTIRRewrite"])
    assert s.run_to_end() is not None, s.error
    callees = s.relax_to_callee()
    # after CallTIRRewrite main calls the PrimFuncs directly, destination-passing style:
    # `alloc = alloc_tensor(...); add_one(x, alloc); a = alloc`
    assert callees.get("a") == "add_one" and callees.get("b") == "my_ext" and callees.get("c") == "add"
    assert callees.get("alloc") == "add_one"


def test_caches_released_with_the_session():
    import gc

    from irviz.core.views import module_diff as diff

    s = Session(Imported(mod=_small_module(), provenance={}, importer="test", seconds=0.0))
    s.set_pipeline(["LegalizeOps"])
    s.run_to_end()
    assert diff._HASHES._d
    del s
    gc.collect()
    assert not diff._HASHES._d and not diff._CONST_HASHES._d


def test_a_step_that_changed_only_attributes_says_so(session, tmp_path):
    # AnnotateTIROpPattern only adds op_pattern to each PrimFunc: "changed", but not the code
    from irviz.protocol import commands as protocol
    from irviz.core.export.trace import export_trace

    s = session
    s.set_pipeline(["LegalizeOps", "AnnotateTIROpPattern"])
    s.run_to_end()
    legalized, annotated = s.steps[1], s.steps[2]
    assert legalized.changed and legalized.changed_what == "ir"
    assert annotated.changed and annotated.changed_what == "attrs"
    assert annotated.changes.attrs_only == annotated.changes.changed
    entry = protocol.step_entry(annotated.index, annotated.pass_name, annotated.params,
                                annotated.seconds, annotated.changed, changed_what=annotated.changed_what)
    assert entry["changed"] is True and entry["changed_what"] == "attrs"
    s.set_pipeline(["FoldConstant"])  # changes nothing here
    s.run_to_end()
    assert s.steps[3].changed_what == "none"
    out = export_trace(s, tmp_path)
    import json

    recs = json.loads((out / "steps.json").read_text())["steps"]
    assert [r["changed_what"] for r in recs[1:]] == ["ir", "attrs", "none"]
    assert "attributes only" in (out / "report.html").read_text()
