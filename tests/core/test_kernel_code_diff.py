"""One kernel's code against itself on another target or at another step: the course MLP's matmul
is ymm code for x86-avx2 and zmm code for x86-avx512 (both cross-compiled, no AVX-512 needed)."""
from __future__ import annotations

import pytest

from irviz.core import passes
from irviz.core.backend.kernel_code_diff import kernel_code_diff
from irviz.core.errors import RequestError
from irviz.core.workspace import Workspace

MATMUL = "fused_matmul_add_relu"
PREPACKED = MATMUL + "_prepacked"  # its name once CPUPrepackWeights moved its weight re-layout out


@pytest.fixture(scope="module")
def steps():
    ws = Workspace()
    ws.open("sample:mlp", planned=passes.parse_pipeline("tir-cpu"))
    ws.run_to_end()
    return ws.session.steps


def _side_text(d, side):
    col = 1 if side == "a" else 3
    return "\n".join(r[col] or "" for r in d["functions"][0]["rows"])


def test_avx2_against_avx512_of_one_step_is_ymm_against_zmm(steps):
    mod = steps[-1].mod
    d = kernel_code_diff(mod, mod, PREPACKED, "x86-avx2", "x86-avx512")
    assert d["format"] == "asm" and d["language"] == "gas"
    assert [f["name"] for f in d["functions"]] == [PREPACKED] and d["functions"][0]["status"] == "changed"
    assert "%ymm" in _side_text(d, "a") and "%zmm" not in _side_text(d, "a")
    assert "%zmm" in _side_text(d, "b")
    assert "512" in d["b"]["counts"]["vector_bits"] and "512" not in d["a"]["counts"]["vector_bits"]
    assert d["unified"].startswith("--- a\n+++ b")


def test_a_kernel_first_made_by_a_later_step_is_added(steps):
    import tvm

    first = next(s for s in steps if any(gv.name_hint == MATMUL and isinstance(f, tvm.tirx.PrimFunc)
                                         for gv, f in s.mod.functions.items()))
    before = steps[first.index - 1]
    d = kernel_code_diff(before.mod, first.mod, MATMUL, "x86-avx2", "x86-avx2", "ll")
    assert d["functions"][0]["status"] == "added" and d["format"] == "ll" and d["language"] == "llvm"
    assert all(r[0] is None for r in d["functions"][0]["rows"])


def test_no_such_kernel_on_either_side_is_a_request_error(steps):
    with pytest.raises(RequestError, match="no kernel 'nope'"):
        kernel_code_diff(steps[0].mod, steps[-1].mod, "nope", "host", "host")
