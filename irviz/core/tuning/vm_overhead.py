"""What a kernel's figure from `measuring.build_and_time` holds besides the kernel: the call into the
VM's main and back, measured on this machine.

A kernel timed alone is timed as a whole run of a one-call main: Python calling the VM, the VM
calling the kernel (dispatch, output allocation), and the return. A model's run pays the first and
last once, not once per kernel: summing 23 one-call figures of a few µs counted it 23 times (the
hf_llama sample under fast-cpu: 0.078 ms estimated against 0.057 ms measured). So main calling a
kernel that does next to nothing is timed once (t1) and as a chain of CHAIN calls (tN): one more
call costs (tN - t1) / (CHAIN - 1), and the entry, what each kernel's figure holds once too often,
is t1 less that. The figures are kept in the decision cache under this CPU's key.

A model's main runs more than its kernel calls (each with its output's allocation and kill): views
(reshape), storage allocations, shape checks and, with symbolic sizes, shape computations. Those are
counted as VM instructions of the lowered main, at what one instruction of the chain costs
(instr_ms): hf_llama's main runs 224 for its 56 kernel calls, the chain 3 a call.

    rec = vm_call_overhead()   # {"entry_ms", "call_ms", "instr_ms", "call_instrs", "base_instrs"}
"""
from __future__ import annotations

import numpy as np
from tvm import relax, te

from irviz.core.backend.build import DEFAULT_BUILD_PASSES, lower_until
from irviz.core.tuning import measuring
from irviz.core.tuning.decision_cache import DecisionCache
from irviz.core.tvm_compat import host_target

CHAIN = 64


def _trivial_kernel():
    a = te.placeholder((1,), "float32", name="a")
    b = te.compute((1,), lambda i: a[i] + 1.0, name="b")
    return te.create_prim_func([a, b]).without_attr("global_symbol")  # not "main"


def chain_module(calls: int):
    """main(x) calls a one-element kernel `calls` times, each on the last one's output."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1,), "float32"))
    with bb.function("main", [x]):
        gv = bb.add_func(_trivial_kernel(), "plus_one")
        with bb.dataflow():
            v = x
            for _ in range(calls):
                v = bb.emit(relax.call_tir(gv, [v], relax.TensorType((1,), "float32")))
            out = bb.emit_output(v)
        bb.emit_func_output(out)
    return bb.get()


def vm_instructions(mod, func: str = "main") -> int:
    """How many VM instructions `func` of `mod` runs once the build has lowered it (kernel calls,
    allocations, kills, views, shape checks and computations): every call left in it then."""
    lowered = lower_until(mod, DEFAULT_BUILD_PASSES[-1], including=True)
    n = [0]
    relax.analysis.post_order_visit(lowered[func], lambda e: n.__setitem__(0, n[0] + isinstance(e, relax.Call)))
    return n[0]


def measure() -> dict:
    """The chains timed now as the estimate times a kernel: {"entry_ms", "call_ms" (one more call
    of the chain), "instr_ms" (one more VM instruction), "call_instrs" (instructions per call),
    "base_instrs" (those of a main around its calls)}."""
    x = np.zeros(1, "float32")
    one, chain = chain_module(1), chain_module(CHAIN)
    t1 = measuring.build_and_time(one, [x], output=False)[0]
    tn = measuring.build_and_time(chain, [x], output=False)[0]
    n1, nn = vm_instructions(one), vm_instructions(chain)
    call = max(0.0, (tn - t1) / (CHAIN - 1))
    call_instrs = (nn - n1) / (CHAIN - 1)
    return {"entry_ms": max(0.0, t1 - call), "call_ms": call, "instr_ms": call / call_instrs,
            "call_instrs": call_instrs, "base_instrs": n1 - call_instrs}


def vm_call_overhead(fresh: bool = False) -> dict:
    """measure()'s figures on this machine: from the decision cache, else measured and kept."""
    key = f"vm-call-overhead {host_target()}"
    cache = DecisionCache.shared()
    rec = None if fresh else cache.get(key)
    if rec is None or "instr_ms" not in rec:
        rec = {"kind": "vm_call_overhead", **measure()}
        cache.put(key, rec)
    return rec
