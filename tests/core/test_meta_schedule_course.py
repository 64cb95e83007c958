"""MetaSchedule on the modules the course writes: a module of one PrimFunc called main is tuned and
its result runs right; a kernel MetaSchedule cannot sample is said so in plain words, with whose
schedule stays (the learner's, irviz's rules', or none)."""
import importlib.util
import logging
import sys

import numpy as np
import pytest

tvm_ffi = pytest.importorskip("tvm_ffi")
if getattr(tvm_ffi, "__version__", "").startswith("0.1.15"):
    pytest.skip("apache-tvm-ffi 0.1.15 segfaults in save_json, which MetaSchedule calls: install "
                "constraints.txt's 0.1.14.post1", allow_module_level=True)
for _mod in ("psutil", "xgboost", "cloudpickle", "tornado"):
    pytest.importorskip(_mod, reason="pip install 'irviz[tune]'")

import tvm
from tvm import relax, s_tir

from irviz.core import passes
from irviz.core.schedules.rules import with_functions
from irviz.core.tuning import measuring
from irviz.core.tuning import meta_schedule as M
from irviz.core.tuning import meta_schedule_space as S
from irviz.core.tvm_compat import host_target

# course style: an IR file whose module holds one PrimFunc, named main, and nothing else
PRIMFUNC_ONLY = '''
import numpy as np
from tvm.script import ir as I
from tvm.script import tirx as T


@I.ir_module
class Module:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((48, 32), "float32"), B: T.Buffer((32, 40), "float32"),
             D: T.Buffer((48, 40), "float32")):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        Y = T.alloc_buffer((48, 40), dtype="float32")
        for i, j, k in T.grid(48, 40, 32):
            with T.sblock("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(48, 40):
            with T.sblock("D"):
                vi, vj = T.axis.remap("SS", [i, j])
                D[vi, vj] = T.max(Y[vi, vj], T.float32(0))
{schedule}

_rng = np.random.default_rng(3)
_a = _rng.standard_normal((48, 32)).astype("float32")
_b = _rng.standard_normal((32, 40)).astype("float32")


def get_inputs():
    return _a, _b


def reference(a, b):
    return np.maximum(a @ b, 0)
'''

LEARNER_SCHEDULE = '''

def schedule(sch):
    y = sch.get_sblock("Y", func_name="main")
    i, j, k = sch.get_loops(y)
    j0, j1 = sch.split(j, factors=[None, 8])
    sch.reorder(j0, k, j1)
    sch.reverse_compute_at(sch.get_sblock("D", "main"), j0)
    sch.parallel(i)
    sch.vectorize(sch.get_loops(sch.get_sblock("D", "main"))[-1])
    sch.decompose_reduction(y, k)
'''


def _ir_file(tmp_path, schedule: str = ""):
    path = tmp_path / ("scheduled.py" if schedule else "primfunc_only.py")
    path.write_text(PRIMFUNC_ONLY.replace("{schedule}", schedule))
    name = f"_ms_course_{path.stem}_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # TVMScript's parser finds the source through the module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return path, module


def _matches_numpy(mod):
    """main run alone on random operands, against numpy's matmul + relu."""
    single, inputs = measuring.kernel_module(mod, mod.get_global_var("main"))
    _, out = measuring.build_and_time(single, inputs)
    a, b = (np.asarray(x) for x in inputs)
    np.testing.assert_allclose(np.asarray(out), np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)


def _learner_scheduled(tmp_path):
    _, source = _ir_file(tmp_path, LEARNER_SCHEDULE)
    sch = s_tir.Schedule(source.Module)
    source.schedule(sch)
    return sch.mod


def test_irviz_tune_finds_and_tunes_a_primfunc_only_main(tmp_path, capsys):
    from irviz.cli import main as cli
    from irviz.core.workspace import Workspace

    path, _ = _ir_file(tmp_path)
    db = tmp_path / "db"
    assert cli.main(["tune", str(path), "--trials", "4", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "nothing to tune" not in out
    assert "chosen by largest measured time share (main 100%)" in out
    (row,) = [ln.split() for ln in out.splitlines() if ln.startswith("main ")]
    assert int(row[4]) >= 1  # candidates measured now
    # the database's schedule put back into the module (whose kernel is called main) builds and is right
    ws = Workspace()
    ws.open(str(path), planned="zero")
    ws.run_to_end()  # the module as `irviz tune` tuned it (its default pipeline)
    mod, target = ws.session.current.mod, M.tuning_target(host_target())
    new = M.scheduled(M.open_db(db), mod["main"], target)
    assert new is not None and not tvm_ffi.structural_equal(new, mod["main"])
    _matches_numpy(with_functions(mod, {mod.get_global_var("main"): new}))
    # tune_module on the same records measures nothing new and assembles a module that still runs right
    tuned, (rep,) = M.tune_module(mod, host_target(), db, trials=4)
    assert rep["kernel"] == "main" and rep["measured_now"] == 0 and rep["after_ms"] is not None
    _matches_numpy(tuned)


def test_a_learners_kernel_that_cannot_be_sampled_keeps_the_learners_schedule(tmp_path):
    mod = _learner_scheduled(tmp_path)
    out, (rep,) = M.tune_module(mod, host_target(), tmp_path / "db", trials=4, kernels=["main"])
    assert rep["measured_now"] == 0 and not rep["applied"]
    assert "RewriteParallelVectorizeUnroll" in rep["sample_error"]  # TVM's postprocessor that refuses it
    words = S.outcome(rep)
    assert words.startswith("MetaSchedule could not sample this kernel's space: TVM's postprocessor ")
    assert "already scheduled (loop" in words
    assert words.endswith("kept the learner's schedule") and "irviz's rules" not in words
    assert out["main"].same_as(mod["main"])


def _rules_scheduled_matmul():
    """A matmul as irviz's rules leave it: weight packed into panels, tiled, vector and unrolled loops."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((32, 96), "float32"))
    w = relax.Var("w", relax.TensorType((96, 80), "float32"))
    with bb.function("main", [x, w]):
        with bb.dataflow():
            out = bb.emit_output(bb.emit(relax.op.matmul(x, w)))
        bb.emit_func_output(out)
    mod = relax.transform.LegalizeOps()(bb.get())
    for rule in ("CPUTileReductions", "CPUParallelVectorize"):
        mod = passes.apply_pass_noted(passes.PassInvocation(rule, {}), mod, host_target())[0]
    return mod


def test_the_pass_says_when_irviz_rules_schedule_cannot_be_sampled(tmp_path):
    mod = _rules_scheduled_matmul()
    tune = passes.PassInvocation("MetaScheduleTune", {"trials": 4, "kernels": "matmul", "db": str(tmp_path / "db")})
    out, notes = passes.apply_pass_noted(tune, mod, host_target())
    (note,) = [n for n in notes if n.startswith("matmul:")]
    assert note.startswith("matmul: MetaSchedule could not sample this kernel's space: TVM's postprocessor")
    assert note.endswith("kept irviz's rules' schedule") and "learner" not in note
    assert out["matmul"].same_as(mod["matmul"])


def test_a_search_that_samples_nothing_says_tvms_reason(tmp_path, monkeypatch):
    """TVM's own search failing to sample (which irviz's replay did not foresee) is reported with
    the warning TVM logged, and the unscheduled kernel is said to stay unscheduled."""
    from tvm.s_tir import meta_schedule as ms

    def search_that_samples_nothing(tasks, **kwargs):
        logging.getLogger("irviz.meta_schedule.main").warning(
            "[evolutionary_search.cc:744] Cannot sample enough initial population, evolutionary search failed.")

    monkeypatch.setattr(S, "sampling_failure", lambda ctx, seed=1: None)
    monkeypatch.setattr(ms.tune, "tune_tasks", search_that_samples_nothing)
    _, source = _ir_file(tmp_path)
    out, (rep,) = M.tune_module(source.Module, host_target(), tmp_path / "db", trials=4, kernels=["main"])
    assert rep["sample_error"] == "TVM: Cannot sample enough initial population, evolutionary search failed."
    assert S.outcome(rep) == ("MetaSchedule could not sample this kernel's space: TVM: Cannot sample enough "
                              "initial population, evolutionary search failed.; kept the kernel unscheduled")
    assert out["main"].same_as(source.Module["main"])


def test_irviz_tune_searches_a_learners_kernel_from_before_their_schedule(tmp_path):
    from irviz.core.tuning.meta_schedule_space import unscheduled_sources
    from irviz.core.schedules.rules import user_scheduled
    from irviz.core.workspace import Workspace

    path, _ = _ir_file(tmp_path, LEARNER_SCHEDULE)
    ws = Workspace()
    ws.open(str(path))
    ws.run_to_end()
    sources, authored = unscheduled_sources(ws.session)
    assert list(authored) == ["main"]
    assert user_scheduled(ws.session.current.mod["main"]) is not None
    assert user_scheduled(sources["main"]) is None  # plain loops, which MetaSchedule's rules expect
    assert isinstance(sources["main"], tvm.tirx.PrimFunc)
