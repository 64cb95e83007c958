"""The bindings to mark in the bad pass's diff: after bisect finds a pass that rewrites one R.add
into R.subtract, the first diverging binding is that subtract, at that step and not before."""
from __future__ import annotations

from pathlib import Path

from irviz.core import passes
from irviz.core.backend.step_bisect import bisect, reference_for
from irviz.core.backend.diverging import diverging_at
from irviz.core.tvm_compat import relax, var_name
from irviz.core.workspace import Workspace

PASSES = Path(__file__).resolve().parent / "data" / "bisect_passes.py"
PIPELINE = ("CanonicalizeBindings,ConvertToDataflow,WrongAddToSubtract,LegalizeOps,"
            "AnnotateTIROpPattern,FoldConstant,FuseOps,FuseTIR")


def _bindings(mod) -> dict:
    return {var_name(b.var): b.value for block in mod["main"].body.blocks for b in block.bindings}


def test_diverging_bindings_at_the_bad_step_start_at_the_subtract():
    passes.load_pass_file(PASSES)
    ws = Workspace()
    ws.open("sample:small_cnn", planned=passes.parse_pipeline(PIPELINE))
    ws.run_to_end()
    fb = bisect(ws.session, reference_for(ws)).first_bad
    assert fb is not None and fb.pass_name == "WrongAddToSubtract"

    marks = diverging_at(ws, fb.index)
    values = _bindings(ws.step_at(fb.index).mod)
    assert marks["step"] == fb.index and marks["first"] is not None
    first = values[marks["first"]]
    assert isinstance(first, relax.Call) and first.op.name == "relax.subtract"
    assert marks["bindings"][marks["first"]]["fx_node"] == marks["first_fx"]
    assert set(marks["bindings"]) <= set(values)          # every mark is a binding of main
    assert all(m["max_abs"] > 0 for m in marks["bindings"].values())

    before = diverging_at(ws, fb.index - 1)
    assert before["bindings"] == {} and before["first"] is None and before["compared"] > 0
