"""What each kernel of a step becomes on a target: LLVM IR and assembly of that kernel only for CPU
targets, the generated source with its launch shape for GPU targets; with counts per kernel.

No device is needed: TVM 0.27 cross-compiles to AArch64 and writes CUDA/OpenCL/WGSL source on any
machine. GPU kernels get dlight's default GPU schedules first (kernels a pipeline scheduled already
are left as they are), as a GPU build does.

    code = kernel_code(step.mod, "x86-avx2")       # StepCode, cached per (module, target)
    k = code.kernels["fused_matmul_add"]
    k.code["asm"], k.code["ll"], k.counts          # CPU
    k.code["cuda"], k.launch                       # GPU: [{"function", "grid", "block"}]
"""
from __future__ import annotations

import collections
import json
import threading
import time
from dataclasses import dataclass, field

import tvm

from irviz.core.backend import code_split
from irviz.core.backend.build import lower
from irviz.core.backend.code_counts import asm_counts, gpu_counts, total_counts
from irviz.core.backend.gpu_schedule import default_schedule
from irviz.core.backend.lower_errors import failing_line
from irviz.core.errors import BuildError, RequestError, tvm_error_text
from irviz.core.target import Target, is_gpu

# device module kind -> (format key, file suffix, pygments lexer)
GPU_LANGUAGES = {"cuda": ("cuda", ".cu", "cuda"), "opencl": ("opencl", ".cl", "c"),
                 "webgpu": ("wgsl", ".wgsl", "wgsl"), "metal": ("metal", ".metal", "cpp")}
LLVM_FORMATS = {"asm": ".s", "ll": ".ll"}


def gpu_language(kind: str) -> tuple[str, str, str]:
    return GPU_LANGUAGES.get(kind, (kind, "." + kind, "text"))


@dataclass
class KernelCode:
    name: str
    code: dict[str, str] = field(default_factory=dict)  # format ("asm", "ll", "cuda", …) -> text
    symbols: list[str] = field(default_factory=list)  # functions of the module that are this kernel's
    counts: dict = field(default_factory=dict)  # over all of `symbols`
    parts: dict[str, dict] = field(default_factory=dict)  # CPU: symbol -> {"role", and its own counts}
    launch: list[dict] = field(default_factory=list)  # GPU: one per device function
    error: str | None = None  # the kernel did not compile for the target; the others still show
    error_line: int | None = None  # the line of its TensorIR the failure points at (1-based)

    def as_dict(self) -> dict:
        return {"name": self.name, "symbols": self.symbols, "counts": self.counts, "parts": self.parts,
                "launch": self.launch, "error": self.error, "error_line": self.error_line}


@dataclass
class StepCode:
    target_name: str
    target: dict  # the TVM target, as TVM exports it
    kind: str  # "llvm", "cuda", "opencl", "webgpu", …
    kernels: dict[str, KernelCode]
    seconds: float
    prelude: str = ""  # GPU: the source's includes and macros, shared by every kernel

    @property
    def gpu(self) -> bool:
        return self.kind != "llvm"

    def formats(self) -> list[str]:
        return list(LLVM_FORMATS) if not self.gpu else [gpu_language(self.kind)[0]]

    def suffix(self, fmt: str) -> str:
        return LLVM_FORMATS.get(fmt) or gpu_language(self.kind)[1]

    def lexer(self, fmt: str) -> str:
        """The pygments lexer for code of format `fmt`."""
        return {"asm": "gas", "ll": "llvm"}.get(fmt) or gpu_language(self.kind)[2]

    def totals(self) -> dict:
        return total_counts([k.counts for k in self.kernels.values()])

    def as_dict(self) -> dict:
        return {"target_name": self.target_name, "target": self.target, "kind": self.kind,
                "seconds": round(self.seconds, 4), "totals": self.totals(),
                "kernels": {n: k.as_dict() for n, k in self.kernels.items()}}


_CACHE: collections.OrderedDict = collections.OrderedDict()
_CACHE_SIZE = 32
_lock = threading.Lock()


def kernel_code(mod, target=None, only: str | None = None) -> StepCode:
    """Per kernel (PrimFunc after default_build) of `mod`: its code and counts for `target` (a name
    as `irviz targets` lists, a JSON/dict target or a tvm Target; None: the host). Cached per
    (module, target): steps' modules are immutable, and the cache holds the module it keys on.

    `only`: just that kernel, compiled alone unless the whole step is cached already (what the app
    asks when a kernel is selected: the largest ResNet-18 kernel alone takes a tenth of the step)."""
    tgt = target if isinstance(target, tvm.target.Target) else Target.of(target).tvm
    name = target if isinstance(target, str) else ("host" if target is None else str(tgt.kind.name))
    whole = (id(mod), str(tgt))
    for key in (whole, (*whole, only)) if only is not None else (whole,):
        with _lock:
            hit = _CACHE.get(key)
            if hit is not None and hit[0] is mod:
                _CACHE.move_to_end(key)
                return hit[1]
    t0 = time.perf_counter()
    lowered = lower(mod, tgt)
    kernels = {gv.name_hint: f for gv, f in lowered.functions.items() if isinstance(f, tvm.tirx.PrimFunc)}
    if only is not None:
        if only not in kernels:
            raise RequestError(f"no kernel {only!r} in this step once lowered",
                               hint=f"its kernels: {', '.join(kernels) or 'none'}")
        kernels = {only: kernels[only]}
    kind = str(tgt.kind.name)
    if is_gpu(tgt):
        per_kernel, prelude = _gpu_code(kernels, tgt, kind)
    else:
        per_kernel, prelude = _llvm_code(kernels, tgt), ""
    _locate_errors(per_kernel, mod, lowered, kind)
    out = StepCode(target_name=name, target=json.loads(str(tgt)), kind=kind, kernels=per_kernel,
                   seconds=time.perf_counter() - t0, prelude=prelude)
    with _lock:
        _CACHE[whole if only is None else (*whole, only)] = (mod, out)
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return out


def _locate_errors(per_kernel: dict[str, KernelCode], mod, lowered, kind: str) -> None:
    """Each failed kernel's error names the line of its TensorIR (as the TensorIR pane prints it,
    from the step when the kernel is the step's) the failure points at, where one can be found."""
    from irviz.core.views.module_diff import function_text

    in_step = {gv.name_hint for gv in mod.get_global_vars()}
    for name, k in per_kernel.items():
        if k.error is None:
            continue
        try:
            text = function_text(mod if name in in_step else lowered, name)
        except Exception:  # the error stays as it is without a line
            continue
        where = failing_line(text, kind, k.error)
        if where is not None:
            first, nl, rest = k.error.partition("\n")
            k.error = f"{first} (line {where[0]} of its TensorIR: {where[1][:100]}){nl}{rest}"
            k.error_line = where[0]


def _compile_each(kernels: dict, tgt, prepare, read) -> tuple[dict, dict]:
    """(read(compiled) per group, errors per kernel): all kernels at once; if that fails, one at a
    time so a kernel that does not lower for the target names itself and the others still show."""
    def failed(name, exc) -> str:
        return f"{name} does not compile for {tgt.kind.name}: {tvm_error_text(exc, head=12, tail=6)}"

    try:
        return {None: read(tvm.compile(prepare(tvm.IRModule(kernels)), target=tgt))}, {}
    except Exception as exc:  # which kernel(s)? one compile each below
        if len(kernels) == 1:
            return {}, {name: failed(name, exc) for name in kernels}
    done, errors = {}, {}
    for name, func in kernels.items():
        try:
            done[name] = read(tvm.compile(prepare(tvm.IRModule({name: func})), target=tgt))
        except Exception as exc:
            errors[name] = failed(name, exc)
    return done, errors


def _llvm_code(kernels: dict, tgt) -> dict[str, KernelCode]:
    def read(ex):
        lib = ex.mod
        return lib.inspect_source("asm"), lib.inspect_source("ll")

    done, errors = _compile_each(kernels, tgt, lambda m: m, read)
    names = list(kernels)
    split = {}  # compiled group -> its functions and each kernel's part: cut once, not per kernel
    out = {}
    for name in kernels:
        if name in errors:
            out[name] = KernelCode(name, error=errors[name])
            continue
        group = None if None in done else name
        if group not in split:
            asm, ll = done[group]
            fa, fl = code_split.llvm_functions(asm, "asm"), code_split.llvm_functions(ll, "ll")
            split[group] = (fa, fl, code_split.kernel_parts(fa, names), code_split.kernel_parts(fl, names))
        fa, fl, parts_a, parts_l = split[group]
        pa, pl = parts_a[name], parts_l[name]
        if not pa:
            out[name] = KernelCode(name, error=f"no function of {name} found in the compiled module")
            continue
        # the entry counts too: LLVM may inline the body into it, parallel launches and workspace
        # calls included, and it runs on every call
        out[name] = KernelCode(
            name, code={"asm": "\n\n".join(code_split.clean_asm(fa[s]) for s in pa),
                        "ll": "\n\n".join(fl[s] for s in pl)},
            symbols=pa, counts=asm_counts("\n".join(fa[s] for s in pa), own=pa),
            parts={s: {"role": code_split.symbol_role(s, name, pa), **asm_counts(fa[s], own=pa)} for s in pa})
    return out


def _gpu_schedule(mod):
    return default_schedule()(mod)  # dlight's rules as a GPU build applies them


def _gpu_code(kernels: dict, tgt, kind: str) -> tuple[dict[str, KernelCode], str]:
    scheduled: dict = {}

    def prepare(m):
        with tgt:
            s = _gpu_schedule(m)
        for gv, f in s.functions.items():
            scheduled[gv.name_hint] = f
        return s

    def read(ex):
        dev = [m for m in ex.mod.imports if m.kind == kind]
        if not dev:
            raise BuildError(f"the {kind} build has no {kind} module", "report this: TVM changed")
        return dev[0].inspect_source()

    done, errors = _compile_each(kernels, tgt, prepare, read)
    lang = gpu_language(kind)[0]
    out, prelude, split = {}, "", {}
    for name in kernels:
        if name not in errors and not any(_is_binding(x) for x in _walk(scheduled[name].body)):
            errors[name] = f"{name} has no GPU thread bindings after dlight's schedules"
        if name in errors:
            if "ScheduleError" in errors[name] and not _cpu_scheduled(kernels[name]):
                errors[name] = (f"dlight's GPU schedules failed on {name} (a pipeline's CPU schedule "
                                f"rules leave kernels dlight cannot take; zero leaves them as "
                                f"LegalizeOps made them): {errors[name].split(': ', 1)[-1]}")
            elif _cpu_scheduled(kernels[name]):
                errors[name] = (f"{name} was scheduled for a CPU by the pipeline (parallel or vectorized "
                                f"loops), which dlight's GPU schedules do not take: choose a pipeline "
                                f"without CPU schedules (e.g. zero) for {kind}")
            out[name] = KernelCode(name, error=errors[name])
            continue
        group = None if None in done else name
        if group not in split:
            source = done[group]
            funcs = code_split.gpu_functions(source, kind)
            split[group] = (source, funcs, code_split.gpu_kernel_parts(list(funcs), list(kernels)))
        source, funcs, parts = split[group]
        prelude = prelude or code_split.gpu_prelude(source, kind)
        mine = parts[name]
        text = "\n".join(funcs[f] for f in mine)
        launches = launch_shapes(scheduled[name]) if name in scheduled else []
        for launch, func in zip(launches, mine):
            launch["function"] = func
        out[name] = KernelCode(name, code={lang: text}, symbols=mine, counts=gpu_counts(text),
                               launch=launches)
    return out, prelude


# ---------------------------------------------------------------------------------------------
# launch shape from thread bindings

_STMT_CHILDREN = ("body", "block", "then_case", "else_case", "init")


def _children(stmt):
    seq = getattr(stmt, "seq", None)
    if seq is not None:
        yield from seq
    for attr in _STMT_CHILDREN:
        try:
            child = getattr(stmt, attr, None)
        except Exception:  # an attribute this node kind does not have
            child = None
        if isinstance(child, tvm.tirx.Stmt):
            yield child


def _walk(stmt):
    yield stmt
    for c in _children(stmt):
        yield from _walk(c)


def _cpu_scheduled(func) -> bool:
    cpu_kinds = (int(tvm.tirx.ForKind.PARALLEL), int(tvm.tirx.ForKind.VECTORIZED))
    return any(isinstance(s, tvm.tirx.For) and int(s.kind) in cpu_kinds for s in _walk(func.body))


def _is_binding(stmt) -> bool:
    return isinstance(stmt, tvm.tirx.For) and int(stmt.kind) == int(tvm.tirx.ForKind.THREAD_BINDING)


def _extent(e):
    return int(e) if isinstance(e, tvm.tirx.IntImm) else str(e)


def launch_shapes(func) -> list[dict]:
    """One {"grid": [x, y, z], "block": [x, y, z]} per outermost thread-binding nest of a scheduled
    PrimFunc, in program order (each nest is one device function after lowering)."""
    out = []

    def nest(stmt, tags):
        if _is_binding(stmt):
            tag = str(stmt.thread_binding.thread_tag)
            tags[tag] = _extent(stmt.extent)
        for c in _children(stmt):
            nest(c, tags)

    def find(stmt):
        if _is_binding(stmt):
            tags: dict = {}
            nest(stmt, tags)
            out.append({"grid": [tags.get(f"blockIdx.{a}", 1) for a in "xyz"],
                        "block": [tags.get(f"threadIdx.{a}", 1) for a in "xyz"]})
            return
        for c in _children(stmt):
            find(c)

    find(func.body)
    return out
