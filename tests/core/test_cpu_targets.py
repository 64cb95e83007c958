"""The CPU pipelines' schedules follow the target, with no code change: the same conv2d + matmul
model scheduled and compiled for an AVX-512, an AVX2 and a NEON CPU gets 16-, 8- and 4-lane vectors
(checked in the rules' notes and in the machine code). Compiled only: this machine cannot run
another CPU's code, and the tile searches, which time candidates, are not part of it."""
from __future__ import annotations

import re

import numpy as np
import pytest
import tvm
from tvm import relax

from irviz.core.passes.registry import PassInvocation, apply_pass

STEPS = ("LegalizeOps", "AnnotateTIROpPattern", "FoldConstant", "FuseOps", "FuseTIR", "CPUTileConv2d",
         "CPUInlineElementwise", "CPUTileReductions", "CPUParallelVectorize", "CPUPrepackWeights")


def _conv_matmul():
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 16, 14, 14), "float32"))
    rng = np.random.default_rng(0)
    w = relax.const(rng.standard_normal((32, 16, 3, 3)).astype("float32"))
    m = relax.const(rng.standard_normal((32 * 14 * 14, 64)).astype("float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.relu(relax.op.nn.conv2d(x, w, padding=(1, 1))))
            o = bb.emit_output(relax.op.matmul(relax.op.reshape(y, (1, 32 * 14 * 14)), m))
        bb.emit_func_output(o)
    return bb.get()


def _notes(mod) -> str:
    return " ".join(str(dict(f.attrs["irviz.schedule_notes"])) for f in mod.functions.values()
                    if isinstance(f, tvm.tirx.PrimFunc) and f.attrs is not None and "irviz.schedule_notes" in f.attrs)


@pytest.mark.parametrize("target, lanes, vector_register", [
    ({"kind": "llvm", "mcpu": "skylake-avx512", "mtriple": "x86_64-linux-gnu"}, 16, r"%zmm\d+"),
    ({"kind": "llvm", "mcpu": "haswell", "mtriple": "x86_64-linux-gnu"}, 8, r"%ymm\d+"),
    ({"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mcpu": "cortex-a72"}, 4, r"\bv\d+\.4s\b"),
])
def test_the_schedules_take_the_vector_width_from_the_target(target, lanes, vector_register):
    target = tvm.target.Target(target)
    mod = _conv_matmul()
    for step in STEPS:
        mod = apply_pass(PassInvocation(step), mod, target=target)
    notes = _notes(mod)
    assert f"{lanes} output channels per vector" in notes and f"{lanes} float32 lanes" in notes
    assert f"matmul: tiled {lanes}," in notes
    asm = "".join(lib.inspect_source("asm") for lib in tvm.compile(mod, target=target).mod.imports)
    assert re.search(vector_register, asm), f"no {vector_register} in the {target} code"
    if lanes < 16:
        assert "zmm" not in asm  # nothing wider than the CPU has
