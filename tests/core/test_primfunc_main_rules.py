"""Course-style kernels written by hand (`@T.prim_func(s_tir=True)` with `T.sblock`, the matmul's
result in a buffer from `T.alloc_buffer`) go through every tir-cpu rule, build, and match numpy.

`T.alloc_buffer` in a hand-written function is an allocation statement, where TE puts the buffer
in the root block; the rules' cache_write on such a buffer used to allocate the local copy twice
and the original nowhere."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

pytest.importorskip("tvm")

from irviz.core.schedules import rules as S
from irviz.core.passes import get_pipeline
from irviz.core.workspace import Workspace


def _source(n: int = 64, inter: str = "Y", out: str = "C", init: bool = True, bias: bool = False) -> str:
    """A module holding one PrimFunc `main`: `out` = relu(A @ B [+ bias]), the matmul's result in the
    temporary buffer `inter`; without `init`, the zeros come from a block of their own."""
    bias_param = 'bias: T.Buffer((N,), "float32"), ' if bias else ""
    lines = [
        "@T.prim_func(s_tir=True)",
        f'def main(A: T.Buffer((N, N), "float32"), B: T.Buffer((N, N), "float32"), {bias_param}'
        f'{out}: T.Buffer((N, N), "float32")):',
        '    T.func_attr({"global_symbol": "main", "tirx.noalias": True})',
        f'    {inter} = T.alloc_buffer((N, N), dtype="float32")',
    ]
    if bias:
        lines.append('    Z = T.alloc_buffer((N, N), dtype="float32")')
    if not init:
        lines += [
            "    for i, j in T.grid(N, N):",
            '        with T.sblock("zero"):',
            '            vi, vj = T.axis.remap("SS", [i, j])',
            f"            {inter}[vi, vj] = T.float32(0)",
        ]
    lines += [
        "    for i, j, k in T.grid(N, N, N):",
        f'        with T.sblock("{inter}"):',
        "            vi = T.axis.spatial(N, i)",
        "            vj = T.axis.spatial(N, j)",
        "            vk = T.axis.reduce(N, k)",
    ]
    if init:
        lines += ["            with T.init():", f"                {inter}[vi, vj] = T.float32(0)"]
    lines.append(f"            {inter}[vi, vj] = {inter}[vi, vj] + A[vi, vk] * B[vk, vj]")
    relu_in = inter
    if bias:
        lines += [
            "    for i, j in T.grid(N, N):",
            '        with T.sblock("Z"):',
            '            vi, vj = T.axis.remap("SS", [i, j])',
            f"            Z[vi, vj] = {inter}[vi, vj] + bias[vj]",
        ]
        relu_in = "Z"
    lines += [
        "    for i, j in T.grid(N, N):",
        f'        with T.sblock("{out}"):',
        "            vi = T.axis.spatial(N, i)",
        "            vj = T.axis.spatial(N, j)",
        f"            {out}[vi, vj] = T.max({relu_in}[vi, vj], T.float32(0))",
    ]
    # N stands for the size: no name in the kernel has a capital N
    func = textwrap.indent("\n".join(lines), "    ").replace("N", str(n))
    inputs = ", ".join(["_rng.standard_normal((N, N)).astype('float32')"] * 2
                       + (["_rng.standard_normal(N).astype('float32')"] if bias else [])).replace("N", str(n))
    ref_args = "a, b, bias" if bias else "a, b"
    ref = "np.maximum(a @ b + bias, 0)" if bias else "np.maximum(a @ b, 0)"
    return (
        "import numpy as np\n"
        "from tvm.script import ir as I\n"
        "from tvm.script import tirx as T\n\n\n"
        "@I.ir_module\n"
        "class Course:\n"
        f"{func}\n\n\n"
        "_rng = np.random.default_rng(0)\n\n\n"
        f"def get_inputs():\n    return {inputs}\n\n\n"
        f"def reference({ref_args}):\n    return {ref}\n"
    )


def _run_tir_cpu(tmp_path, **shape):
    path = tmp_path / "course_main.py"
    path.write_text(_source(**shape), encoding="utf-8")
    ws = Workspace()
    ws.open(str(path), planned=get_pipeline("tir-cpu"))
    ws.run_to_end()
    assert ws.session.error is None, ws.session.error.user_message()
    return ws


def _notes(ws) -> dict[str, str]:
    func = ws.session.steps[-1].mod["main"]
    return {str(k): str(v) for k, v in func.attrs[S.NOTES_ATTR].items()}


def test_a_hand_written_matmul_relu_called_main_is_tiled_built_and_matches_numpy(tmp_path):
    ws = _run_tir_cpu(tmp_path)
    notes = _notes(ws)
    tiled = notes["CPUTileReductions"]
    assert tiled.startswith("Y: tiled") and "accumulated in registers" in tiled, notes
    if "padded" not in tiled:  # a measured tile may pad the rows, and then the relu stays a loop
        assert "1 epilogue block(s) fused into the write-back" in tiled, notes
    # the rule after the tiling could read what the tiling made of the function
    assert "spatial block(s) vectorized" in notes["CPUParallelVectorize"], notes
    _, res = ws.build_run(repeats=1)
    assert res.func == "main" and res.allclose is True and res.max_abs_error < 1e-3, res
    # and against numpy directly, not only the file's own reference()
    from irviz.core.backend import prim_run

    mod = ws.session.steps[-1].mod
    pa = prim_run.prim_args(mod, "main")
    got = prim_run.call_prim(prim_run.build_prim(mod, "main"), pa)[0]
    np.testing.assert_allclose(got, np.maximum(pa.args[0] @ pa.args[1], 0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("n", "inter", "out", "init", "bias"), [
    (64, "C", "D", True, False),
    (64, "out", "C", True, False),
    (128, "Y", "C", True, False),
    (64, "Y", "C", False, False),
    (64, "Y", "C", True, True),
    (128, "out", "relu", False, True),
], ids=["named-C", "named-out", "128", "no-init", "bias", "128-no-init-bias"])
def test_learner_variations_run_every_rule_and_match_numpy(tmp_path, n, inter, out, init, bias):
    ws = _run_tir_cpu(tmp_path, n=n, inter=inter, out=out, init=init, bias=bias)
    notes = _notes(ws)
    assert all("not applied" not in v for v in notes.values()), notes
    tiled = notes["CPUTileReductions"]
    if not init:  # the zeros' own block becomes the reduction's init, or TVM sees nothing to tile
        assert tiled.startswith(f"zero: its zeros are now {inter}'s T.init; "), notes
    assert f"{inter}: tiled" in tiled, notes
    _, res = ws.build_run(repeats=1)
    assert res.allclose is True and res.max_abs_error < 1e-3, res


@pytest.mark.parametrize(("old", "new", "folds"), [
    ("T.grid(64, 64):\n", "T.grid(64, 64):\n", True),
    ("T.grid(64, 64):\n", "T.grid(32, 64):\n", False),  # half the buffer zeroed: not an init
    ("= T.float32(0)\n", "= T.float32(1)\n", True),  # any constant is the init's value
], ids=["whole-buffer", "half-the-buffer", "ones"])
def test_a_zero_block_becomes_the_init_only_when_it_covers_the_whole_buffer(tmp_path, old, new, folds):
    import importlib.util
    import sys

    from irviz.core.schedules.allocs import hoist_root_allocs
    from irviz.core.schedules.zero_init import zero_blocks_as_init

    path = tmp_path / "zeros.py"
    path.write_text(_source(init=False).replace(old, new, 1), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("zeros_under_test", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # TVMScript reads the source through the module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    func = hoist_root_allocs(module.Course["main"])
    folded_func, folded = zero_blocks_as_init(func)
    assert folded == ([("zero", "Y")] if folds else []), folded
    if folds:
        import tvm

        lib = tvm.compile(tvm.IRModule({"main": folded_func}), target="llvm")
        a, b = module.get_inputs()
        out = tvm.runtime.tensor(np.zeros((64, 64), "float32"))
        lib["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), out)
        start = 1.0 if "float32(1)" in new else 0.0
        np.testing.assert_allclose(out.numpy(), np.maximum(a @ b + start, 0), rtol=1e-4, atol=1e-4)
