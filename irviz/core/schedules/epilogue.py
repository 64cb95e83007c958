"""The elementwise ops after a kernel's accumulator, computed as it is written back."""
from __future__ import annotations


def inline_epilogue(sch, acc) -> int:
    """Inline each single elementwise consumer of `acc` (bias, batch norm, relu, clip...) into its
    write-back, as long as there is one; how many were inlined. A consumer that is not simple
    elementwise stays a loop of its own."""
    inlined = 0
    while True:
        consumers = sch.get_consumers(acc)
        if len(consumers) != 1:
            return inlined
        try:
            sch.reverse_compute_inline(consumers[0])
        except Exception:  # not a simple elementwise consumer: leave it
            return inlined
        inlined += 1
