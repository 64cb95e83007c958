"""CPU schedule rules for the TensorIR that remains after lowering, one pass per rule: the rules
and what they share in `rules`, conv2d and matmul tiles in `matmul_tile`, `depthwise`, `epilogue`,
the Relax-level weight prepacking in `prepack`, reshapes and transposes made fusable into the kernel
before them in `layout_fusion`, and the learner-written forms the rules first
normalise (`allocs`, `zero_init`)."""
