"""A depthwise 7x7 convolution whose result is transposed to channels-last in the same kernel
(ConvNeXt's blocks): vectors over channels, the write-back as contiguous stores, and the numbers
torch's, for 16- and 8-lane vectors, channel counts that are not a multiple of the vector, and the
host and x86-avx2 targets."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tvm")

import torch
import tvm
from tvm import s_tir, te, tirx, topi

from irviz.core.schedules.depthwise import depthwise_blocks, schedule_depthwise
from irviz.core.target import as_target, not_runnable_here, target_spec
from irviz.core.tvm_compat import host_target


def _conv_bias_transpose(channels: int, size: int, stride: int = 1, kernel: int = 7):
    data = te.placeholder((1, channels, size, size), name="data")
    weight = te.placeholder((channels, 1, kernel, kernel), name="weight")
    bias = te.placeholder((1, channels, 1, 1), name="bias")
    conv = topi.nn.group_conv2d_nchw(data, weight, stride, kernel // 2, 1, channels, "float32")
    out = topi.transpose(topi.add(conv, bias), (0, 2, 3, 1))
    return te.create_prim_func([data, weight, bias, out])


def _targets():
    out = [("host", host_target())]
    avx2 = as_target(tvm.target.Target(target_spec("x86-avx2")[1]))
    if not_runnable_here(avx2) is None:
        out.append(("x86-avx2", avx2))
    return out


def _run(func, target, arrays):
    lib = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}), target=target)
    args = [tvm.runtime.tensor(a) for a in arrays]
    lib["main"](*args)
    return args[-1].numpy()


def _expected(x, w, b, stride):
    with torch.no_grad():
        y = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b.reshape(-1)),
                                       stride=stride, padding=w.shape[-1] // 2, groups=x.shape[1])
    return y.permute(0, 2, 3, 1).numpy()


def _always_parallel(sch, loop, block) -> bool:
    sch.parallel(loop)  # the channel blocks of a small test shape run on threads too
    return True


def _stores_into_output(func) -> list[bool]:
    """For each block that stores into the kernel's output: whether its last (channel) index moves
    with the innermost vectorized loop around it, i.e. whether the store is one contiguous vector."""
    out_name = str(func.params[-1].name)
    found = []

    def walk(stmt, vector_var):
        if isinstance(stmt, tirx.For):
            inner = stmt.loop_var if stmt.kind == tirx.ForKind.VECTORIZED else vector_var
            walk(stmt.body, inner)
        elif isinstance(stmt, tirx.SeqStmt):
            for x in stmt.seq:
                walk(x, vector_var)
        elif isinstance(stmt, s_tir.SBlockRealize):
            block = stmt.block
            store = block.body
            if isinstance(store, tirx.BufferStore) and str(store.buffer.name) == out_name:
                binding = dict(zip((iv.var for iv in block.iter_vars), stmt.iter_values))
                last = binding.get(store.indices[-1], store.indices[-1])
                found.append(vector_var is not None and _uses(last, vector_var))
            else:
                walk(block.body, vector_var)

    walk(func.body, None)
    return found


def _uses(expr, var) -> bool:
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, tirx.Var) and e.same_as(var):
            return True
        stack.extend(c for c in (getattr(e, n, None) for n in ("a", "b")) if isinstance(c, tirx.Expr))
    return False


@pytest.mark.parametrize("lanes", [16, 8])
@pytest.mark.parametrize("channels,size,stride,vec", [
    (24, 10, 1, {16: 8, 8: 8}),   # 24 channels: no 16-lane vector, 8 lanes do
    (20, 9, 1, {16: 4, 8: 4}),    # 20 channels: 4 lanes; a row of 9 in tiles of 3
    (32, 8, 2, {16: 16, 8: 8}),   # stride 2
])
def test_channels_last_depthwise_vectors_channels_and_keeps_the_numbers(lanes, channels, size, stride, vec):
    func = _conv_bias_transpose(channels, size, stride)
    sch = s_tir.Schedule(func)
    assert len(depthwise_blocks(sch)) == 1
    notes = schedule_depthwise(sch, lanes, _always_parallel)
    assert len(notes) == 1 and "written channels-last" in notes[0], notes
    assert f"{vec[lanes]} channels per vector" in notes[0], notes
    assert "2 epilogue block(s) fused into the write-back as contiguous stores" in notes[0], notes
    scheduled = sch.mod["main"]
    stores = _stores_into_output(scheduled)
    assert stores and all(stores), scheduled.script()
    rng = np.random.default_rng(channels)
    x = rng.standard_normal((1, channels, size, size)).astype("float32")
    w = rng.standard_normal((channels, 1, 7, 7)).astype("float32")
    b = rng.standard_normal((1, channels, 1, 1)).astype("float32")
    expected = _expected(x, w, b, stride)
    for name, target in _targets():
        got = _run(scheduled, target, [x, w, b, np.zeros(expected.shape, "float32")])
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5, err_msg=name)


def test_channels_without_a_vector_keep_the_row_schedule():
    func = _conv_bias_transpose(6, 9)
    sch = s_tir.Schedule(func)
    notes = schedule_depthwise(sch, 16, lambda sch, loop, block: False)
    assert len(notes) == 1 and "written channels-last" not in notes[0] and "depthwise" in notes[0], notes
    rng = np.random.default_rng(1)
    x, w, b = (rng.standard_normal(s).astype("float32") for s in ((1, 6, 9, 9), (6, 1, 7, 7), (1, 6, 1, 1)))
    expected = _expected(x, w, b, 1)
    got = _run(sch.mod["main"], host_target(), [x, w, b, np.zeros(expected.shape, "float32")])
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_a_result_kept_channels_first_keeps_the_row_schedule():
    data = te.placeholder((1, 32, 14, 14), name="data")
    weight = te.placeholder((32, 1, 7, 7), name="weight")
    conv = topi.nn.group_conv2d_nchw(data, weight, 1, 3, 1, 32, "float32")
    sch = s_tir.Schedule(te.create_prim_func([data, weight, topi.nn.relu(conv)]))
    notes = schedule_depthwise(sch, 16, lambda sch, loop, block: False)
    assert len(notes) == 1 and "written channels-last" not in notes[0] and "as one vector" in notes[0], notes
