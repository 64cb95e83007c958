"""CPU schedule rules: each changes the TensorIR it can, keeps the numbers, and says why when it can't."""
import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import relax, te, topi

from irviz.core.schedules import rules as S


def _te_matmul(A, B):
    k = te.reduce_axis((0, A.shape[1]), name="k")
    return te.compute((A.shape[0], B.shape[1]), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="mm")


def _add_scale_relu(x, y):
    return topi.nn.relu(topi.multiply(topi.add(x, y), 2.0))


def _module(n=64, m=48, k=32):
    bb = relax.BlockBuilder()
    a = relax.Var("a", relax.TensorType((n, k), "float32"))
    b = relax.Var("b", relax.TensorType((k, m), "float32"))
    c = relax.Var("c", relax.TensorType((n, m), "float32"))
    with bb.function("main", [a, b, c]):
        with bb.dataflow():
            mm = bb.emit_te(_te_matmul, a, b)
            # an elementwise chain in one prim_func, as FuseTIR leaves batch-norm epilogues
            ew = bb.emit_te(_add_scale_relu, mm, c)
            out = bb.emit_output(ew)
        bb.emit_func_output(out)
    return bb.get()


def _run(mod, args):
    target = tvm.target.Target.from_device(tvm.cpu())
    vm = relax.VirtualMachine(tvm.compile(mod, target=target), tvm.cpu())
    return vm["main"](*(tvm.runtime.tensor(x) for x in args)).numpy()


def _notes(mod, name):
    return {str(k): str(v) for k, v in mod[name].attrs[S.NOTES_ATTR].items()}


def test_rules_change_the_tensorir_and_keep_the_numbers(monkeypatch):
    monkeypatch.setattr(S, "PARALLEL_MIN_WORK", 0)  # the toy kernels are below the threshold
    mod = _module()
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype("float32") for s in [(64, 32), (32, 48), (64, 48)]]
    ref = _run(mod, args)
    stepped = mod
    for make in (S.inline_elementwise, S.tile_reductions, S.parallel_vectorize):
        before = stepped
        stepped = make()(stepped)
        assert not tvm_ffi.structural_equal(before, stepped), make.__name__
    text = stepped.script()
    assert "T.parallel" in text and "T.vectorized" in text and "T.unroll" in text
    assert _notes(stepped, "_add_scale_relu")["CPUInlineElementwise"] == "inlined 2 block(s)"
    np.testing.assert_allclose(_run(stepped, args), ref, rtol=1e-4, atol=1e-4)


def test_rule_that_cannot_tile_says_why():
    mod = _module(n=5, m=7, k=3)  # 7 has no vector factor
    out = S.tile_reductions()(mod)
    assert "inner extent 7 has no vector factor" in _notes(out, "_te_matmul")["CPUTileReductions"]


def test_rules_are_idempotent_and_do_not_touch_relax_functions():
    once = S.tile_reductions()(_module())
    twice = S.tile_reductions()(once)
    tvm.ir.assert_structural_equal(once, twice)
    assert once["main"].script() == _module()["main"].script()


def test_dlight_pass_does_not_mutate_its_input():
    # dlight's ApplyDefaultSchedule changes its input in place; the registered pass must not
    from irviz.core.passes import PassInvocation, apply_pass

    mod = _module()
    snapshot = mod.script()
    apply_pass(PassInvocation("DlightCPUSchedule"), mod, tvm.target.Target.from_device(tvm.cpu()))
    assert mod.script() == snapshot


def test_small_kernels_stay_on_one_thread():
    out = S.parallel_vectorize()(S.tile_reductions()(S.inline_elementwise()(_module(n=8, m=16, k=8))))
    text = out.script()
    assert "T.parallel" not in text and "T.vectorized" in text
    assert "one thread (small)" in _notes(out, "_te_matmul")["CPUTileReductions"]


def _conv_module(out_channels, weight):
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 8, 14, 14), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            c = bb.emit(relax.op.nn.conv2d(x, relax.const(weight), padding=[1, 1, 1, 1]))
            b = bb.emit(relax.op.add(c, relax.const(np.ones((1, out_channels, 1, 1), "float32"))))
            out = bb.emit_output(relax.op.nn.relu(b))
        bb.emit_func_output(out)
    return relax.get_pipeline("zero")(bb.get())


@pytest.mark.parametrize("out_channels, lanes", [(32, 16), (32, 8), (6, 16), (6, 8)])
def test_conv2d_rule_blocks_channels_and_prepacks_the_weight(out_channels, lanes):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((out_channels, 8, 3, 3)).astype("float32")
    x = rng.standard_normal((1, 8, 14, 14)).astype("float32")
    mod = _conv_module(out_channels, w)
    ref = _run(mod, [x])
    stepped = mod
    for make in (lambda: S.tile_conv2d(lanes), S.inline_elementwise, lambda: S.tile_reductions(lanes),
                 lambda: S.parallel_vectorize(lanes), S.prepack_weights):
        stepped = make()(stepped)
    np.testing.assert_allclose(_run(stepped, [x]), ref, rtol=1e-4, atol=1e-4)
    conv = next(gv.name_hint for gv, f in stepped.functions.items()
                if isinstance(f, tvm.tirx.PrimFunc) and "conv2d" in gv.name_hint)
    note = _notes(stepped, conv)["CPUTileConv2d"]
    main = stepped["main"].script()
    if out_channels == 32:
        # one register of float32 per vector: 16 with AVX-512, 8 with AVX2
        assert f"{lanes} output channels per vector" in note and "2 epilogue block(s)" in note, note
        assert conv.endswith("_prepacked") and "weight_prepack" not in main  # folded at compile time
        assert not any("weight_prepack" in gv.name_hint for gv in stepped.functions)
        assert S.PREPROC_ATTR not in stepped[conv].script()
    else:  # 6 output channels: no vector factor; the reduction rule takes it
        assert "no vector factor" in note and "left to CPUTileReductions" in note, note
        assert "CPUTileReductions" in _notes(stepped, conv)


def test_scheduled_functions_round_trip_through_the_printer():
    # irviz export writes each step as TVMScript: notes must survive print -> parse (ASCII only)
    from irviz.core.export.step_files import parse_script

    mod = _conv_module(32, np.ones((32, 8, 3, 3), "float32"))
    for make in (S.tile_conv2d, S.inline_elementwise, S.tile_reductions, S.parallel_vectorize):
        mod = make()(mod)
    for gv, f in mod.functions.items():
        if isinstance(f, tvm.tirx.PrimFunc):
            back = parse_script(tvm.IRModule({gv: f}).script(), [])
            tvm.ir.assert_structural_equal(back[gv.name_hint], f)


def test_a_users_own_schedule_is_left_alone_and_not_credited():
    # the learner split, reordered and parallelized mm_relu before irviz saw it (the course's
    # TensorIR chapter); tir-cpu's rules must neither reschedule it nor claim it
    from pathlib import Path

    from irviz.core.passes import get_pipeline
    from irviz.core.workspace import Workspace

    path = Path(__file__).parent / "data" / "hand_scheduled.py"
    ws = Workspace()
    ws.open(str(path), planned=get_pipeline("tir-cpu"))
    ws.run_to_end()
    s = ws.session
    assert s.error is None
    theirs = s.steps[0].mod["mm_relu"]
    assert S.user_scheduled(theirs) is not None
    for step in s.steps[1:]:
        f = step.mod["mm_relu"]
        assert f.attrs is None or S.DONE_ATTR not in f.attrs, step.pass_name
        assert tvm_ffi.structural_equal(f.body, theirs.body), step.pass_name
    notes = _notes(s.steps[-1].mod, "mm_relu")
    assert all(n.startswith("skipped: already scheduled by its author") for n in notes.values()), notes
    assert "T.parallel" in s.steps[-1].mod["mm_relu"].script()


def test_a_rule_that_changed_nothing_does_not_tag_the_function():
    # the elementwise kernel has no reduction: CPUTileReductions leaves it as it was
    mod = S.inline_elementwise()(_module())
    ew = mod["_add_scale_relu"]
    out = S.tile_reductions()(mod)["_add_scale_relu"]
    assert tvm_ffi.structural_equal(out.body, ew.body)
    assert "CPUTileReductions" not in [str(d) for d in out.attrs.get(S.DONE_ATTR, [])]


def test_tuning_measures_no_tile_for_a_users_own_schedule():
    # only sch.parallel(i) by the learner: still theirs, so no tile is measured and recorded
    import sys
    from pathlib import Path

    from irviz.core.passes import PassInvocation, apply_pass

    sys.path.insert(0, str(Path(__file__).parent / "data"))
    try:
        import hand_scheduled
    finally:
        sys.path.pop(0)
    sch = tvm.s_tir.Schedule(hand_scheduled.MyModule)
    i, _j, _k = sch.get_loops(sch.get_sblock("Y", func_name="mm_relu"))
    sch.parallel(i)
    out = apply_pass(PassInvocation("CPUTuneReductions"), sch.mod)["mm_relu"]
    assert S.REDUCTION_TILE_ATTR not in out.attrs
    assert tvm_ffi.structural_equal(out, sch.mod["mm_relu"])
