"""The one module that words machine-code counts: the CLI, report.html and the GUI read it alike."""
from irviz.core.views.counts_text import counts_comment, counts_line, widths_compact, widths_text

COUNTS = {"instructions": 812, "vector": 240, "vector_bits": {"512": 236, "128": 4}, "fma": 96,
          "vector_fma": 90, "loops": 3, "calls": 2, "callees": {"expf": 2}}


def test_the_same_counts_read_alike_in_each_place():
    assert widths_compact(COUNTS["vector_bits"]) == "512:236 128:4" and widths_compact({}) == "-"
    assert widths_text(COUNTS["vector_bits"], arm=False) == "236 zmm, 4 xmm"
    assert widths_text({"128": 7}, arm=True) == "7 NEON"
    assert counts_line("llvm", COUNTS) == ("812 instructions · 240 vector (236×512-bit, 4×128-bit) · 96 FMA "
                                           "(90 vector) · 2 calls out: expf×2")
    head = counts_comment(False, "k", COUNTS, [], {"__tvm_ffi_k": {"role": "entry", "instructions": 812}})
    assert head == ("812 instructions, 240 vector (512:236 128:4), 96 FMA (90 vector), 3 loops, 2 calls out: "
                    "expf×2\n# = entry __tvm_ffi_k 812 instructions")
    gpu = {"shared_bytes": 1024, "barriers": 2}
    launch = [{"grid": [4, 1, 1], "block": [128, 1, 1]}]
    assert counts_line("cuda", gpu, launch) == "grid 4×1×1, block 128×1×1 · 1024 B shared · 2 barriers"
