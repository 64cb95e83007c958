"""The built-in passes irviz can step: TVM's, the build steps, the course's, CPU schedules and
library dispatch. Importing this module registers them (``irviz.core.passes`` does)."""
from __future__ import annotations

from tvm import relax

import irviz.core.passes.bind_params as bind_params
import irviz.core.passes.course as course_passes
import irviz.core.passes.fast_math as fast_math
import irviz.core.passes.fold_constant as fold_constant
import irviz.core.passes.fold_batch_norm as fold_batch_norm
import irviz.core.passes.library_dispatch as dispatch
import irviz.core.passes.meta_schedule_passes as ms_passes
from irviz.core.schedules import layout_fusion
from irviz.core.schedules import rules as schedules
from irviz.core.backend.gpu_schedule import GPU_RULES, default_schedule
from irviz.core.backend.legalize import CUSTOM_LEGALIZE_MAP
from irviz.core.passes.registry import PassParam, PassSpec, register_pass
from irviz.core.schedules import matvec
from irviz.core.tuning import matvec_search, tile_search


def _split_names(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value if str(v).strip()]
    return [s.strip() for s in str(value).split(",") if s.strip()]



RT = relax.transform


def _legalize(enable_warning=False, skip_ops=""):
    return RT.LegalizeOps(
        customize_legalize_map=dict(CUSTOM_LEGALIZE_MAP),
        skip_ops=_split_names(skip_ops) or None,
        enable_warning=bool(enable_warning),
    )


def _dce(entry_functions=""):
    return RT.DeadCodeElimination(_split_names(entry_functions) or None)


def _dlight_cpu():
    from tvm.s_tir import dlight as dl

    return dl.ApplyDefaultSchedule(dl.cpu.GEMV(), dl.cpu.Reduction())


def _dlight_gpu(rule_name):
    return lambda: default_schedule(rule_name)


def _spec(name, description, make, category="tvm", params=(), roundtrip_ok=True, mutates_input=False,
          check=None):
    return PassSpec(
        name=name,
        description=description,
        params=list(params),
        make=make,
        category=category,
        roundtrip_ok=roundtrip_ok,
        mutates_input=mutates_input,
        check=check,
    )


def _builtin_specs() -> list[PassSpec]:
    B = relax.backend
    return [
        # ---- general TVM passes ---------------------------------------------------------------
        _spec(
            "LegalizeOps",
            "Lower high-level Relax ops to call_tir of TOPI PrimFuncs (knows R.ewise_fma too)",
            _legalize,
            params=[
                PassParam("enable_warning", "bool", False, "warn about ops without a legalization"),
                PassParam("skip_ops", "str", "", "comma-separated op names to leave alone, e.g. relax.nn.conv2d"),
            ],
        ),
        _spec("AnnotateTIROpPattern", "Tag each PrimFunc with its op pattern kind for FuseOps", RT.AnnotateTIROpPattern),
        _spec("FoldConstant", "Evaluate calls whose inputs are all constants at compile time (small "
              "injective ones with numpy, bit-identical; the rest with TVM's LLVM build)",
              fold_constant.fold_constant),
        _spec(
            "FuseOps",
            "Group bindings into Primitive sub-functions by op pattern (needs AnnotateTIROpPattern)",
            lambda fuse_opt_level=-1: RT.FuseOps(int(fuse_opt_level)),
            params=[
                PassParam("fuse_opt_level", "int", -1, "fusion level; -1 = the PassContext opt_level, 0 = no fusion"),
            ],
        ),
        _spec("FuseTIR", "Merge each Primitive Relax function of call_tir's into one PrimFunc", RT.FuseTIR),
        _spec(
            "DeadCodeElimination",
            "Remove unused bindings, and functions unreachable from public/entry functions",
            _dce,
            params=[
                PassParam("entry_functions", "str", "", "comma-separated extra roots, e.g. a private function to keep (public functions always are)"),
            ],
        ),
        _spec(
            "BindParams",
            "Bind a function's weight parameters to constants from a .npz / .params file "
            "(a model opened with --keep-params: the params file its import wrote)",
            bind_params.make,
            params=[
                PassParam("func_name", "str", "main", "function whose parameters are bound"),
                PassParam("params", "str", "", "path to a .npz (numpy.savez) or .params (tvm save_param_dict) "
                          "file; keys = parameter names; empty: the params file a --keep-params import wrote"),
            ],
            check=bind_params.check,
        ),
        _spec("CanonicalizeBindings", "Remove trivial rebindings (y = x) and simplify match_casts", RT.CanonicalizeBindings),
        _spec(
            "EliminateCommonSubexpr",
            "Reuse the first of several identical computations",
            lambda call_only=False: RT.EliminateCommonSubexpr(bool(call_only)),
            params=[PassParam("call_only", "bool", False, "only eliminate calls")],
        ),
        _spec(
            "ConvertToDataflow",
            "Wrap runs of pure bindings into dataflow blocks",
            lambda min_size=2: RT.ConvertToDataflow(int(min_size)),
            params=[PassParam("min_size", "int", 2, "smallest run of bindings turned into a block")],
        ),
        _spec("ToNonDataflow", "Turn dataflow blocks into ordinary binding blocks", RT.ToNonDataflow),
        _spec("DecomposeOpsForInference", "Split composite ops (batch_norm, layer_norm...) into simple ones", lambda: RT.DecomposeOpsForInference()),
        _spec("FoldBatchNorm", "Fold each inference batch norm after a conv2d into its weights and a bias "
              "(constant weights only; the rest stays for DecomposeOpsForInference)", fold_batch_norm.fold_batch_norm),
        _spec("LambdaLift", "Lift local functions to module-level functions", RT.LambdaLift),
        _spec(
            "DlightCPUSchedule",
            "dlight default schedules for CPU (GEMV, Reduction) on matching PrimFuncs",
            _dlight_cpu,
            mutates_input=True,
        ),
        # ---- dlight's GPU schedule rules, one pass each (the gpu pipeline) ----------------------
        *(_spec(name, f"dlight GPU rule {rule}: {what}; kernels a rule before it took stay as they are",
                _dlight_gpu(rule), "gpu", mutates_input=True) for name, rule, what in GPU_RULES),
        # ---- default_build steps (tvm/relax/pipeline.py: default_build_pipeline) -------------
        _spec("DispatchSampling", "Lower R.multinomial_from_uniform to TIR sampling kernels", B.DispatchSampling, "build"),
        _spec("DispatchSortScan", "Lower sort/argsort/topk/cumsum to target kernels", B.DispatchSortScan, "build"),
        _spec("RewriteDataflowReshape", "Turn reshape-like call_tir into zero-copy R.reshape", RT.RewriteDataflowReshape, "build"),
        _spec("RemovePurityChecking", "Mark pure functions force_pure and unwrap pure-override ops", RT.RemovePurityChecking, "build"),
        _spec(
            "CallTIRRewrite",
            "Make call_tir explicit: allocate outputs, then call the PrimFunc in DPS style",
            RT.CallTIRRewrite,
            "build",
            roundtrip_ok=False,
        ),
        _spec(
            "StaticPlanBlockMemory",
            "Plan static storage and reuse it between tensors",
            RT.StaticPlanBlockMemory,
            "build",
            roundtrip_ok=False,
        ),
        _spec(
            "RewriteCUDAGraph",
            "Lift CUDA-graph capturable regions (no-op on CPU)",
            RT.RewriteCUDAGraph,
            "build",
            roundtrip_ok=False,
        ),
        _spec("LowerAllocTensor", "Lower remaining alloc_tensor to alloc_storage + alloc_tensor", RT.LowerAllocTensor, "build"),
        _spec("KillAfterLastUse", "Free tensors and storage right after their last use", RT.KillAfterLastUse, "build"),
        _spec("LowerRuntimeBuiltin", "Lower generic builtins to VM builtins", RT.LowerRuntimeBuiltin, "build"),
        _spec("ComputePrimValue", "Compute R.prim_value expressions with generated PrimFuncs", RT.ComputePrimValue, "build"),
        _spec("VMShapeLower", "Lower shape computations and checks to VM shape-heap code", RT.VMShapeLower, "build"),
        _spec("AttachGlobalSymbol", "Attach global_symbol to functions for codegen", RT.AttachGlobalSymbol, "build"),
        # ---- course passes -------------------------------------------------------------------
        _spec(
            "EwiseFMA",
            "Course: rewrite multiply+add into R.ewise_fma (same-shape operands)",
            course_passes.EwiseFMA,
            "course",
        ),
        _spec(
            "MatmulAddFuse",
            "Course: fuse matmul+add into Primitive functions fused_matmul_add0, 1, ...",
            course_passes.MatmulAddFuse,
            "course",
        ),
        _spec(
            "LowerToTensorIR",
            "Course: lower matmul/add/relu/permute_dims/... to call_tir of TOPI kernels via call_te",
            course_passes.LowerToTensorIR,
            "course",
        ),
        # ---- making it fast on the CPU: library calls and TensorIR schedules ---------------------
        _spec(
            "LibraryDispatch",
            "Send conv2d/matmul to torch with R.call_dps_packed (DLPack, zero copy) where it pays; the rest "
            "stays for TensorIR",
            lambda ops="conv2d,matmul", min_macs=dispatch.DEFAULT_MIN_MACS, keep_tileable_conv=False, measure=False:
                dispatch.library_dispatch(tuple(_split_names(ops)), int(min_macs), bool(keep_tileable_conv),
                                          bool(measure)),
            "cpu",
            params=[PassParam("ops", "str", "conv2d,matmul", "comma-separated ops to dispatch: conv2d, matmul"),
                    PassParam("min_macs", "int", dispatch.DEFAULT_MIN_MACS,
                              "only calls with at least this many multiply-adds go to torch (0: all); "
                              "smaller ones are faster as TensorIR than a library call"),
                    PassParam("keep_tileable_conv", "bool", False,
                              "leave conv2d that CPUTileConv2d blocks (groups 1, channels a multiple of 4) "
                              "to TensorIR, where they run faster than torch's conv"),
                    PassParam("measure", "bool", False,
                              "decide each call by timing it as a torch call and as TensorIR on this "
                              "machine (cached per CPU); min_macs and keep_tileable_conv are then unused")],
        ),
        _spec(
            "FastMath",
            "float32 exp, tanh, erf, sigmoid, silu, gelu, softmax and x**2..4 as arithmetic LLVM vectorizes "
            "(TOPI's fast_exp/fast_tanh/fast_erf, a few ulp); libm calls run one element at a time",
            fast_math.fast_math,
            "tvm",  # Relax-level, right for any target: no CPU-only check
        ),
        _spec(
            "CPUInlineElementwise",
            "Inline chains of elementwise blocks into one loop nest (keeps padding before reductions)",
            schedules.inline_elementwise,
            "cpu",
        ),
        _spec(
            "CPUTuneConv2d",
            "Measure a few conv2d tiles (vector factor x register tile) on this machine and record the "
            "fastest on each kernel for CPUTileConv2d (cached per CPU)",
            tile_search.tune_conv2d,
            "cpu",
            params=[PassParam("lanes", "int", 0, "float32 vector lanes (0: from the target)")],
        ),
        _spec(
            "CPUTileConv2d",
            "Blocked conv2d: output channels in vector-wide blocks over a re-laid-out weight, a register "
            "tile of output columns, kernel window unrolled, epilogue fused into the write-back",
            schedules.tile_conv2d,
            "cpu",
            params=[PassParam("lanes", "int", 0, "float32 vector lanes (0: from the target: 16 AVX-512, 8 AVX2, 4 NEON)")],
        ),
        _spec(
            "CPUTuneReductions",
            "Measure a few matmul tiles (vector factor x rows in registers) on this machine and record "
            "the fastest on each kernel for CPUTileReductions (cached per CPU)",
            tile_search.tune_reductions,
            "cpu",
            params=[PassParam("lanes", "int", 0, "float32 vector lanes (0: from the target)")],
        ),
        _spec(
            "CPUTuneMatVec",
            "Measure each matrix-vector kernel's (M = 1, a decode step's matmuls) panel width, K unroll "
            "and threading on this machine and record the fastest for CPUMatVec (cached per CPU)",
            matvec_search.tune_matvec,
            "cpu",
            params=[PassParam("lanes", "int", 0, "float32 vector lanes (0: from the target)"),
                    PassParam("panels", "str", "", "weight=width,...: panel widths another program (the "
                              "prefill) packs these weights with, kept so both share one packed copy")],
        ),
        _spec(
            "CPUMatVec",
            "Matrix-vector products against a weight (M = 1): the weight packed once into panels read in "
            "order, vector accumulators in registers, epilogue in the write-back, parallel over panels",
            matvec.matvec,
            "cpu",
            params=[PassParam("lanes", "int", 0, "float32 vector lanes (0: from the target: 16 AVX-512, 8 AVX2, 4 NEON)")],
        ),
        _spec(
            "CPUTileReductions",
            "Tile matmul/conv reductions: vector-wide inner loop, small register tile, parallel outer loops",
            schedules.tile_reductions,
            "cpu",
            params=[PassParam("lanes", "int", 0, "float32 vector lanes (0: from the target: 16 AVX-512, 8 AVX2, 4 NEON)")],
        ),
        _spec(
            "CPUParallelVectorize",
            "Parallelize and vectorize the remaining elementwise loop nests",
            schedules.parallel_vectorize,
            "cpu",
            params=[PassParam("lanes", "int", 0, "float32 vector lanes (0: from the target: 16 AVX-512, 8 AVX2, 4 NEON)")],
        ),
        _spec(
            "MetaScheduleTune",
            "Tune kernels with TVM's MetaSchedule (its search, XGBoost cost model and database): the named "
            "kernels, else those the database has records for, else the `top` with the largest measured "
            "time share; a kernel keeps the rules' schedule when MetaSchedule's is not faster",
            ms_passes.meta_schedule_tune,
            "cpu",
            params=[PassParam("trials", "int", 8, "candidates measured per kernel (records already in the "
                              "database count: a rerun applies them without searching)"),
                    PassParam("kernels", "str", "", "comma-separated kernel names (empty: chosen by time share)"),
                    PassParam("top", "int", 2, "how many kernels to tune when none are named"),
                    PassParam("db", "str", "", "database directory (empty: the decision cache's, per target)")],
        ),
        _spec(
            "MetaScheduleApply",
            "Apply a MetaSchedule database: each kernel it has records for gets the best schedule found",
            ms_passes.meta_schedule_apply,
            "cpu",
            params=[PassParam("db", "str", "", "database directory (empty: the decision cache's, per target)"),
                    PassParam("kernels", "str", "", "only these kernels (empty: every kernel with records)")],
        ),
        _spec(
            "CPUFuseLayoutOps",
            "Mark reshape/transpose kernels (data movement only) elementwise, so FuseOps puts them into "
            "the matmul before them (its write-back) instead of a launch of their own; after AnnotateTIROpPattern",
            layout_fusion.fuse_layout_ops,
            "cpu",
        ),
        _spec(
            "CPUPrepackWeights",
            "Move weight re-layouts (CPUTileConv2d) out of the kernels and fold them on the constant "
            "weights at compile time (SplitLayoutRewritePreproc + FoldConstant + DCE)",
            schedules.prepack_weights,
            "cpu",
        ),
    ]


for _s in _builtin_specs():
    register_pass(_s)
del _s
