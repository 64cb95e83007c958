"""Pass registry, named pipelines, applying one pass, and user pass files.

* :class:`PassSpec` describes one pass irviz can step: a name, a one-line description, its
  parameters (:class:`PassParam`) and ``make(**params) -> tvm.ir.transform.Pass``.
* :data:`PIPELINES` are plain data: ``name -> (description, [PassInvocation, ...])``.
  ``zero`` and ``default_build`` mirror ``tvm/relax/pipeline.py`` of TVM 0.27 step by step
  (stepping them equals ``relax.get_pipeline(name)``; see tests/core/test_passes.py).
* :func:`apply_pass` runs one invocation under ``with target, PassContext(opt_level=3)`` and
  turns every failure into :class:`~irviz.core.errors.PassError` carrying TVM's real message.
* :func:`load_pass_file` loads a user's Python file that defines ``IRVIZ_PASSES = [PassSpec...]``
  and/or functions decorated with :func:`irviz_pass` (see ``examples/my_passes.py``).

Never imports Qt.
"""
from __future__ import annotations

import inspect
import json
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import tvm
from tvm import relax

from irviz.core.passes import course as course_passes
from irviz.core.passes import library_dispatch as dispatch
from irviz.core.passes import cpu_schedules as schedules
from irviz.core.errors import PassError, tvm_error_text
from irviz.core.tvm_compat import as_target, shallow_copy
from irviz.core.user_code import exec_file

__all__ = [
    "PIPELINES",
    "PassInvocation",
    "PassParam",
    "PassSpec",
    "apply_pass",
    "get_pass",
    "get_pipeline",
    "irviz_pass",
    "list_passes",
    "list_pipelines",
    "load_params_file",
    "load_pass_file",
    "register_pass",
    "resolve_params",
    "unregister_pass",
]

PARAM_KINDS = ("bool", "int", "str", "choice", "json")


@dataclass
class PassParam:
    name: str
    kind: str  # "bool" | "int" | "str" | "choice" | "json"
    default: object
    help: str
    choices: list | None = None


@dataclass
class PassSpec:
    name: str
    description: str
    params: list[PassParam]
    make: Callable[..., tvm.ir.transform.Pass]  # make(**params) -> Pass
    category: str = "user"  # "tvm" | "course" | "build" | "user"
    roundtrip_ok: bool = True  # False when TVM's printer output won't parse after it
    # extra (not in contracts.md): the pass may change its input module in place
    # (dlight ApplyDefaultSchedule and unknown user code); apply_pass hands it a shallow copy.
    mutates_input: bool = False
    source: str = ""  # "file.py:LINE" for user passes


@dataclass
class PassInvocation:
    name: str
    params: dict = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# registry

_REGISTRY: dict[str, PassSpec] = {}
_LOCK = threading.RLock()


def register_pass(spec: PassSpec, *, replace: bool = False) -> PassSpec:
    """Add a pass. A user pass may replace an earlier user pass of the same name, never a built-in."""
    if not isinstance(spec, PassSpec):
        raise PassError(f"register_pass expects a PassSpec, got {type(spec).__name__}")
    if not spec.name or not isinstance(spec.name, str):
        raise PassError("a pass needs a non-empty name")
    if not callable(spec.make):
        raise PassError(f"pass {spec.name}: make is not callable")
    for p in spec.params:
        if p.kind not in PARAM_KINDS:
            raise PassError(
                f"pass {spec.name}: parameter {p.name!r} has unknown kind {p.kind!r}",
                hint=f"use one of {', '.join(PARAM_KINDS)}",
            )
    with _LOCK:
        old = _REGISTRY.get(spec.name)
        if old is not None and not replace and not (old.category == "user" == spec.category):
            raise PassError(
                f"a pass named {spec.name!r} already exists ({old.category})",
                hint="give your pass another name",
            )
        _REGISTRY[spec.name] = spec
    return spec


def unregister_pass(name: str) -> None:
    with _LOCK:
        _REGISTRY.pop(name, None)


def list_passes() -> list[PassSpec]:
    """All passes, in registration order (TVM, build steps, course, then user passes)."""
    with _LOCK:
        return list(_REGISTRY.values())


def get_pass(name: str) -> PassSpec:
    with _LOCK:
        spec = _REGISTRY.get(name)
        known = list(_REGISTRY)
    if spec is None:
        raise PassError(f"unknown pass {name!r}", hint="known passes: " + ", ".join(known))
    return spec


# ---------------------------------------------------------------------------------------------
# parameters


def _coerce(spec: PassSpec, p: PassParam, value):
    def bad(why: str):
        return PassError(
            f"{spec.name}: parameter {p.name!r} {why}",
            hint=f"{p.name} ({p.kind}): {p.help}"
            + (f"; choices: {', '.join(map(str, p.choices))}" if p.choices else ""),
        )

    if value is None:
        return None if p.kind in ("str", "json") else p.default
    if p.kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in ("true", "1", "yes", "on", "false", "0", "no", "off"):
            return value.strip().lower() in ("true", "1", "yes", "on")
        raise bad(f"must be true/false, got {value!r}")
    if p.kind == "int":
        if isinstance(value, bool):
            raise bad(f"must be an integer, got {value!r}")
        if isinstance(value, int):
            return value
        try:
            return int(str(value).strip())
        except ValueError:
            raise bad(f"must be an integer, got {value!r}") from None
    if p.kind == "str":
        if isinstance(value, (list, tuple)):
            return ",".join(str(v) for v in value)
        return str(value)
    if p.kind == "choice":
        if p.choices and value not in p.choices:
            raise bad(f"must be one of {p.choices}, got {value!r}")
        return value
    if p.kind == "json":
        if isinstance(value, str):
            text = value.strip()
            if not text:
                return None
            try:
                return json.loads(text)
            except json.JSONDecodeError as e:
                raise bad(f"is not valid JSON ({e})") from None
        return value
    raise bad(f"has unknown kind {p.kind!r}")


def resolve_params(spec: PassSpec, given: dict | None) -> dict:
    """Defaults filled in, values coerced to their kind; PassError on unknown names or bad values."""
    given = dict(given or {})
    valid = {p.name: p for p in spec.params}
    unknown = [k for k in given if k not in valid]
    if unknown:
        raise PassError(
            f"{spec.name} has no parameter {', '.join(map(repr, unknown))}",
            hint=("valid parameters: " + ", ".join(valid)) if valid else f"{spec.name} takes no parameters",
        )
    return {name: _coerce(spec, p, given.get(name, p.default)) for name, p in valid.items()}


def _split_names(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value if str(v).strip()]
    return [s.strip() for s in str(value).split(",") if s.strip()]


def load_params_file(path) -> dict[str, np.ndarray]:
    """Parameter dict from a ``.npz`` (numpy.savez) or a TVM ``save_param_dict`` file."""
    path = Path(str(path)).expanduser()
    if not str(path).strip() or not path.is_file():
        raise PassError(
            f"parameter file not found: {path}",
            hint="give a .npz (numpy.savez) or .params (tvm.runtime.save_param_dict) file",
        )
    try:
        if path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as data:
                return {k: np.asarray(data[k]) for k in data.files}
        blob = path.read_bytes()
        return {k: v.numpy() for k, v in tvm.runtime.load_param_dict(blob).items()}
    except PassError:
        raise
    except Exception as e:  # noqa: BLE001
        raise PassError(
            f"cannot read parameters from {path}: {e}",
            hint="give a .npz (numpy.savez) or .params (tvm.runtime.save_param_dict) file",
        ) from e


# ---------------------------------------------------------------------------------------------
# built-in passes

RT = relax.transform


def _legalize(enable_warning=False, skip_ops=""):
    return RT.LegalizeOps(
        customize_legalize_map=dict(course_passes.CUSTOM_LEGALIZE_MAP),
        skip_ops=_split_names(skip_ops) or None,
        enable_warning=bool(enable_warning),
    )


def _dce(entry_functions=""):
    return RT.DeadCodeElimination(_split_names(entry_functions) or None)


def _bind_params(func_name="main", params_file=""):
    if not params_file:
        raise PassError(
            "BindParams needs a parameter file",
            hint="set params_file to a .npz (numpy.savez) or .params (tvm.runtime.save_param_dict)",
        )
    params = load_params_file(params_file)
    if not params:
        raise PassError(f"parameter file {params_file} holds no arrays")
    return RT.BindParams(func_name or "main", params)


def _dlight_cpu():
    from tvm.s_tir import dlight as dl

    return dl.ApplyDefaultSchedule(dl.cpu.GEMV(), dl.cpu.Reduction())


def _spec(name, description, make, category="tvm", params=(), roundtrip_ok=True, mutates_input=False):
    return PassSpec(
        name=name,
        description=description,
        params=list(params),
        make=make,
        category=category,
        roundtrip_ok=roundtrip_ok,
        mutates_input=mutates_input,
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
        _spec("FoldConstant", "Evaluate calls whose inputs are all constants at compile time", RT.FoldConstant),
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
            "Bind a function's parameters to constants from a .npz / .params file",
            _bind_params,
            params=[
                PassParam("func_name", "str", "main", "function whose parameters are bound"),
                PassParam("params_file", "str", "", "path to a .npz (numpy.savez) or .params (tvm save_param_dict) file; keys = parameter names"),
            ],
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
        _spec("LambdaLift", "Lift local functions to module-level functions", RT.LambdaLift),
        _spec(
            "DlightCPUSchedule",
            "dlight default schedules for CPU (GEMV, Reduction) on matching PrimFuncs",
            _dlight_cpu,
            mutates_input=True,
        ),
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
            lambda ops="conv2d,matmul", min_macs=dispatch.DEFAULT_MIN_MACS, keep_tileable_conv=False:
                dispatch.library_dispatch(tuple(_split_names(ops)), int(min_macs), bool(keep_tileable_conv)),
            "cpu",
            params=[PassParam("ops", "str", "conv2d,matmul", "comma-separated ops to dispatch: conv2d, matmul"),
                    PassParam("min_macs", "int", dispatch.DEFAULT_MIN_MACS,
                              "only calls with at least this many multiply-adds go to torch (0: all); "
                              "smaller ones are faster as TensorIR than a library call"),
                    PassParam("keep_tileable_conv", "bool", False,
                              "leave conv2d that CPUTileConv2d blocks (groups 1, channels a multiple of 4) "
                              "to TensorIR, where they run faster than torch's conv")],
        ),
        _spec(
            "CPUInlineElementwise",
            "Inline chains of elementwise blocks into one loop nest (keeps padding before reductions)",
            schedules.inline_elementwise,
            "cpu",
        ),
        _spec(
            "CPUTileConv2d",
            "Blocked conv2d: output channels in vector-wide blocks over a re-laid-out weight, a register "
            "tile of output columns, kernel window unrolled, epilogue fused into the write-back",
            schedules.tile_conv2d,
            "cpu",
        ),
        _spec(
            "CPUTileReductions",
            "Tile matmul/conv reductions: vector-wide inner loop, small register tile, parallel outer loops",
            schedules.tile_reductions,
            "cpu",
        ),
        _spec(
            "CPUParallelVectorize",
            "Parallelize and vectorize the remaining elementwise loop nests",
            schedules.parallel_vectorize,
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


# ---------------------------------------------------------------------------------------------
# pipelines


def _inv(*names) -> list[PassInvocation]:
    return [PassInvocation(n) for n in names]


ZERO_STEPS = ("LegalizeOps", "AnnotateTIROpPattern", "FoldConstant", "FuseOps", "FuseTIR")
DEFAULT_BUILD_STEPS = (
    "DispatchSampling",
    "DispatchSortScan",
    "LegalizeOps",
    "RewriteDataflowReshape",
    "ToNonDataflow",
    "RemovePurityChecking",
    "CallTIRRewrite",
    "StaticPlanBlockMemory",
    "RewriteCUDAGraph",
    "LowerAllocTensor",
    "KillAfterLastUse",
    "LowerRuntimeBuiltin",
    "ComputePrimValue",
    "VMShapeLower",
    "AttachGlobalSymbol",
)

CPU_SCHEDULE_STEPS = ("CPUTileConv2d", "CPUInlineElementwise", "CPUTileReductions", "CPUParallelVectorize",
                      "CPUPrepackWeights")

PIPELINES: dict[str, tuple[str, list[PassInvocation]]] = {
    "zero": (
        "TVM's zero pipeline: legalize to TensorIR, then fuse operators (relax.get_pipeline('zero'))",
        _inv(*ZERO_STEPS),
    ),
    "course": (
        "The course: EwiseFMA, MatmulAddFuse, LowerToTensorIR (TOPI), FuseTIR, LegalizeOps for the rest",
        _inv("EwiseFMA", "MatmulAddFuse", "LowerToTensorIR", "FuseTIR", "LegalizeOps"),
    ),
    "default_build": (
        "What tvm.compile runs on CPU, step by step (relax.get_pipeline('default_build')); no fusion",
        _inv(*DEFAULT_BUILD_STEPS),
    ),
    "fast-cpu": (
        "Library calls where they pay: large matmuls and the conv2d TensorIR does not block go to torch "
        "through call_dps_packed; the rest fused and scheduled TensorIR",
        [PassInvocation("LibraryDispatch", {"keep_tileable_conv": True}), *_inv(*ZERO_STEPS, *CPU_SCHEDULE_STEPS)],
    ),
    "tir-cpu": (
        "All TensorIR, no library: the zero pipeline, then CPU schedule rules (blocked conv2d with "
        "prepacked weights, tiled reductions, parallel + vectorized loops)",
        _inv(*ZERO_STEPS, *CPU_SCHEDULE_STEPS),
    ),
}


def list_pipelines() -> list[tuple[str, str]]:
    return [(name, desc) for name, (desc, _) in PIPELINES.items()]


def get_pipeline(name: str) -> list[PassInvocation]:
    """A fresh copy of a named pipeline's invocations."""
    if name not in PIPELINES:
        raise PassError(f"unknown pipeline {name!r}", hint="known pipelines: " + ", ".join(PIPELINES))
    return [PassInvocation(i.name, dict(i.params)) for i in PIPELINES[name][1]]


# ---------------------------------------------------------------------------------------------
# applying a pass


def _user_location(exc: BaseException, spec: PassSpec) -> str:
    """file:line of the deepest frame inside the user's pass file, if any."""
    if not spec.source:
        return ""
    src_file = spec.source.rsplit(":", 1)[0]
    where = ""
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == src_file:
            where = f"{frame.filename}:{frame.lineno}"
    return where


def _as_target(target):
    try:
        return as_target(target)
    except Exception as e:  # noqa: BLE001
        raise PassError(f"bad target {target!r}: {tvm_error_text(e)}", hint="e.g. 'llvm'") from e


def apply_pass(inv: PassInvocation | str, mod: tvm.IRModule, target=None) -> tvm.IRModule:
    """Run one pass on ``mod`` (never changed) and return the new module; PassError on failure."""
    if isinstance(inv, str):
        inv = PassInvocation(inv)
    spec = get_pass(inv.name)
    params = resolve_params(spec, inv.params)
    tgt = _as_target(target)
    try:
        with tgt:
            the_pass = spec.make(**params)
        if not isinstance(the_pass, tvm.ir.transform.Pass):
            raise PassError(
                f"{spec.name}: make() returned {type(the_pass).__name__}, not a tvm Pass",
                hint=f"defined at {spec.source}" if spec.source else None,
            )
    except PassError:
        raise
    except Exception as e:  # noqa: BLE001
        where = _user_location(e, spec)
        raise PassError(
            f"{spec.name}: cannot create the pass" + (f" at {where}" if where else "") + f": {tvm_error_text(e)}",
            hint=f"parameters were {params}" if params else None,
            detail=traceback.format_exc(),
        ) from e
    if not isinstance(mod, tvm.IRModule):
        raise PassError(f"{spec.name}: expected an IRModule, got {type(mod).__name__}")
    inp = shallow_copy(mod) if spec.mutates_input else mod
    try:
        with tgt, tvm.transform.PassContext(opt_level=3):
            out = the_pass(inp)
    except PassError:
        raise
    except Exception as e:  # noqa: BLE001
        where = _user_location(e, spec)
        msg = f"{spec.name} failed" + (f" at {where}" if where else "") + f": {tvm_error_text(e)}"
        raise PassError(
            msg,
            hint=_hint_for(spec, e),
            detail="".join(traceback.format_exception(type(e), e, e.__traceback__)),
        ) from e
    if not isinstance(out, tvm.IRModule):
        raise PassError(f"{spec.name} returned {type(out).__name__}, not an IRModule")
    return out


def _hint_for(spec: PassSpec, exc: BaseException) -> str:
    text = str(exc)
    if spec.category == "user":
        return f"the pass is defined in {spec.source}; fix it and reload the file"
    if spec.name == "FuseTIR" or "call_tir" in text:
        return "FuseTIR and the build steps expect lowered ops: run LegalizeOps (or LowerToTensorIR) first"
    if spec.name == "FuseOps":
        return "FuseOps needs AnnotateTIROpPattern after LegalizeOps"
    return "step back, or try the passes before it in another order (see Details for TVM's trace)"


# ---------------------------------------------------------------------------------------------
# user passes


_PARAM_KIND_OF = {bool: "bool", int: "int", str: "str"}


def _params_from_signature(fn, skip_first: bool) -> list[PassParam]:
    params = []
    sig = inspect.signature(fn)
    items = list(sig.parameters.values())
    if skip_first and items:
        items = items[1:]
    for p in items:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        default = None if p.default is p.empty else p.default
        kind = _PARAM_KIND_OF.get(type(default), "json")
        params.append(PassParam(p.name, kind, default, f"{p.name} of {fn.__name__}"))
    return params


def _source_of(fn) -> str:
    try:
        return f"{inspect.getsourcefile(fn)}:{inspect.getsourcelines(fn)[1]}"
    except (OSError, TypeError):
        return ""


def irviz_pass(name: str | None = None, description: str = "", *, roundtrip_ok: bool = True):
    """Decorator turning a function into an irviz pass (collected by :func:`load_pass_file`).

    Either ``def f(mod, **params) -> IRModule`` (the first positional parameter without a
    default receives the module; returning a tvm Pass instead applies that pass to it) or a
    factory ``def f(**params) -> tvm.ir.transform.Pass`` (all parameters have defaults).
    ``name`` defaults to the function's name, ``description`` to its docstring's first line. Keyword parameters with defaults become pass
    parameters (bool/int/str defaults give that kind; anything else is "json"). The function is
    returned unchanged, with the PassSpec in ``fn.irviz_spec``.
    """

    def wrap(fn):
        sig = inspect.signature(fn)
        first = next(iter(sig.parameters.values()), None)
        takes_mod = first is not None and first.default is first.empty and first.kind in (
            first.POSITIONAL_ONLY,
            first.POSITIONAL_OR_KEYWORD,
        )
        pass_name = name or fn.__name__
        doc_lines = (inspect.getdoc(fn) or "").strip().splitlines()
        desc = description or (doc_lines[0] if doc_lines else pass_name)

        if takes_mod:

            def make(**params):
                def transform(mod, _ctx):
                    result = fn(mod, **params)
                    if isinstance(result, tvm.ir.transform.Pass):
                        result = result(mod)
                    if not isinstance(result, tvm.IRModule):
                        raise TypeError(
                            f"{pass_name} returned {type(result).__name__}; return an IRModule or a tvm Pass"
                        )
                    return result

                return tvm.ir.transform.module_pass(transform, opt_level=0, name=pass_name)

        else:

            def make(**params):
                return fn(**params)

        fn.irviz_spec = PassSpec(
            name=pass_name,
            description=desc,
            params=_params_from_signature(fn, skip_first=takes_mod),
            make=make,
            category="user",
            roundtrip_ok=roundtrip_ok,
            mutates_input=True,
            source=_source_of(fn),
        )
        return fn

    if callable(name):  # used bare: @irviz_pass
        fn, name = name, None
        return wrap(fn)
    return wrap


_file_counter = 0
_FILE_PASSES: dict[str, list[str]] = {}  # resolved path -> names it registered


def _error_location(exc: BaseException, path: str) -> str:
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}:{exc.lineno}"
    where = f"{path}:?"
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == path:
            where = f"{frame.filename}:{frame.lineno}"
    return where


def load_pass_file(path) -> list[PassSpec]:
    """Execute a user pass file and register its passes (category "user"); PassError with file:line."""
    global _file_counter
    path = Path(str(path)).expanduser().resolve()
    spath = str(path)
    if not path.is_file():
        raise PassError(f"pass file not found: {spath}", hint="give the path of a .py file")
    with _LOCK:
        _file_counter += 1
        mod_name = f"irviz_user_passes_{_file_counter}_{path.stem}"
    try:
        module = exec_file(path, mod_name)
    except BaseException as e:  # noqa: BLE001  (SystemExit from a script too)
        where = _error_location(e, spath)
        kind = "syntax error" if isinstance(e, SyntaxError) else type(e).__name__
        msg = e.msg if isinstance(e, SyntaxError) else str(e)
        raise PassError(
            f"{where}: {kind}: {msg}",
            hint="fix the pass file and load it again",
            detail="".join(traceback.format_exception(type(e), e, e.__traceback__)),
        ) from None

    specs: list[PassSpec] = []
    declared = getattr(module, "IRVIZ_PASSES", None)
    if declared is not None:
        if not isinstance(declared, (list, tuple)):
            raise PassError(
                f"{spath}: IRVIZ_PASSES must be a list of PassSpec, got {type(declared).__name__}"
            )
        for i, item in enumerate(declared):
            if isinstance(item, PassSpec):
                specs.append(item)
            elif callable(item) and isinstance(getattr(item, "irviz_spec", None), PassSpec):
                specs.append(item.irviz_spec)
            else:
                raise PassError(
                    f"{spath}: IRVIZ_PASSES[{i}] is {type(item).__name__}, not a PassSpec",
                    hint="build entries with PassSpec(name=..., description=..., params=[...], make=...)",
                )
    for value in vars(module).values():
        s = getattr(value, "irviz_spec", None)
        if isinstance(s, PassSpec) and getattr(value, "__module__", None) == mod_name:
            if all(s is not x for x in specs):
                specs.append(s)
    if not specs:
        raise PassError(
            f"{spath}: defines no passes",
            hint="add IRVIZ_PASSES = [PassSpec(...), ...] or decorate functions with @irviz_pass(name=...)",
        )
    names = [s.name for s in specs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise PassError(f"{spath}: pass names used twice: {', '.join(dup)}")
    for s in specs:
        s.category = "user"
        s.mutates_input = True
        if not s.source:
            s.source = _source_of(s.make) or f"{spath}:1"
        existing = _REGISTRY.get(s.name)
        if existing is not None and existing.category != "user":
            raise PassError(
                f"{spath}: pass {s.name!r} clashes with the built-in {existing.category} pass",
                hint="rename your pass",
            )
    with _LOCK:
        # reloading a file: passes it no longer defines disappear
        for old_name in _FILE_PASSES.get(spath, []):
            old = _REGISTRY.get(old_name)
            if old is not None and old.category == "user":
                _REGISTRY.pop(old_name)
        for s in specs:
            register_pass(s)
        _FILE_PASSES[spath] = [s.name for s in specs]
    return specs
