"""What a kernel's figure from `measuring.build_and_time` holds besides the kernel: the call into the
VM's main and back, measured on this machine.

A kernel timed alone is timed as a whole run of a one-call main: Python calling the VM, the VM
calling the kernel (dispatch, output allocation), and the return. A model's run pays the first and
last once, not once per kernel: summing 23 one-call figures of a few µs counted it 23 times (the
hf_llama sample under fast-cpu: 0.078 ms estimated against 0.057 ms measured). So main calling a
kernel that does next to nothing is timed once (t1) and as a chain of CHAIN calls (tN): one more
call costs (tN - t1) / (CHAIN - 1), and the entry, what each kernel's figure holds once too often,
is t1 less that. The figures are kept in the decision cache under this CPU's key.

    entry_ms, call_ms = vm_call_overhead()
"""
from __future__ import annotations

import numpy as np
from tvm import relax, te

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


def measure() -> tuple[float, float]:
    """(entry ms, ms per extra call), timed now as the estimate times a kernel."""
    x = np.zeros(1, "float32")
    t1 = measuring.build_and_time(chain_module(1), [x], output=False)[0]
    tn = measuring.build_and_time(chain_module(CHAIN), [x], output=False)[0]
    call = max(0.0, (tn - t1) / (CHAIN - 1))
    return max(0.0, t1 - call), call


def vm_call_overhead(fresh: bool = False) -> tuple[float, float]:
    """(entry ms, ms per call) on this machine: from the decision cache, else measured and kept."""
    key = f"vm-call-overhead {host_target()}"
    cache = DecisionCache.shared()
    rec = None if fresh else cache.get(key)
    if rec is None:
        entry, call = measure()
        rec = {"kind": "vm_call_overhead", "entry_ms": entry, "call_ms": call}
        cache.put(key, rec)
    return float(rec["entry_ms"]), float(rec["call_ms"])
