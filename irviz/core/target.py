"""What CPU the code runs on, as the schedules and the figures need it: model name, LLVM target and
the float32 vector width, read from the target's features rather than assumed.

    info = cpu_info()          # CpuInfo(model="AMD EPYC", target='{"kind":"llvm",...}',
                               #         mcpu="znver3", isa="AVX2", vector_lanes=8)
    vector_lanes(target)       # 16 with avx512f, 8 with avx/avx2, 4 with sse/neon

and the target a user names, as one value that knows the rest: `Target.of("x86-avx2")`,
`Target.of("cuda -arch=sm_86")`, `Target.of('{"kind": "llvm", "mcpu": "znver3"}')`, `Target.of(None)`
(the host). TVM 0.27 parses only the dict form of a target, so irviz keeps the friendly names and
`-key=value` options and turns them into dicts. Only this module turns a name into a TVM
target; the planner (passes/plan.py) and everything after it ask a `Target`.

Importing this module loads no TVM (the Workspace holds a Target before anything is open); the
functions that need TVM import it when called.
"""
from __future__ import annotations

import functools
import json
import os
import platform
import sys
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from irviz.core.errors import RequestError, tvm_error_text


def host_target():
    from irviz.core.tvm_compat import host_target as read  # lazy: see the module docstring

    return read()


def as_target(target):
    from irviz.core.tvm_compat import as_target as convert  # lazy: see the module docstring

    return convert(target)

# (feature LLVM names it by, ISA shown to the user, float32 lanes per vector register); first match wins
_VECTOR_FEATURES = (
    ("avx512f", "AVX-512", 16),
    ("avx2", "AVX2", 8),
    ("avx", "AVX", 8),
    ("sve", "SVE", 4),  # SVE length is only known at run time; 128-bit is the guaranteed minimum
    ("neon", "NEON", 4),
    ("sse2", "SSE2", 4),
)


@dataclass(frozen=True)
class CpuInfo:
    model: str
    target: str
    mcpu: str
    isa: str
    vector_lanes: int  # float32 lanes
    cores: int

    def as_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        return f"{self.model} · {self.mcpu} · {self.isa} ({self.vector_lanes} float32 lanes)"


def _has(feature: str, target) -> bool:
    from tvm.target import codegen

    try:
        return bool(codegen.target_has_features(feature, target))
    except Exception:  # a feature LLVM does not know on this architecture
        return False


def vector_isa(target=None) -> tuple[str, int]:
    """(ISA name, float32 lanes) of `target` (None: the host)."""
    tgt = as_target(target)
    for feature, isa, lanes in _VECTOR_FEATURES:
        if _has(feature, tgt):
            return isa, lanes
    return "scalar", 1


def vector_lanes(target=None) -> int:
    return vector_isa(target)[1]


def _model_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


@functools.lru_cache(maxsize=1)
def cpu_info() -> CpuInfo:
    """The host, once per process."""
    tgt = host_target()
    isa, lanes = vector_isa(tgt)
    mcpu = str(tgt.attrs["mcpu"]) if "mcpu" in tgt.attrs else platform.machine()
    return CpuInfo(model=_model_name(), target=str(tgt), mcpu=mcpu, isa=isa, vector_lanes=lanes,
                   cores=os.cpu_count() or 1)


def cpu_info_for(target=None) -> CpuInfo:
    """The host, with the instruction set and vector width of the code a build for `target` (a
    CPU target) runs: a speed figure of x86-avx2 code on an AVX-512 host is an 8-lane figure."""
    info = cpu_info()
    if target is None:
        return info
    tgt = as_target(target)
    if str(tgt.kind.name) != "llvm":
        return info
    isa, lanes = vector_isa(tgt)
    mcpu = str(tgt.attrs["mcpu"]) if "mcpu" in tgt.attrs else info.mcpu
    return replace(info, mcpu=mcpu, isa=isa, vector_lanes=lanes)


# ---------------------------------------------------------------------------------------------
# targets by name


@dataclass(frozen=True)
class NamedTarget:
    name: str
    description: str
    spec: dict | None  # the TVM target dict; None for the host (read from this machine)

    def as_dict(self) -> dict:
        return dict(self.spec) if self.spec is not None else host_target_dict()


NAMED_TARGETS: dict[str, NamedTarget] = {t.name: t for t in (
    NamedTarget("host", "this machine's CPU with all its features (the default)", None),
    NamedTarget("x86-avx2", "x86-64 with AVX2 and FMA (Haswell)",
                {"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": "haswell"}),
    NamedTarget("x86-avx512", "x86-64 with AVX-512 (Skylake server)",
                {"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": "skylake-avx512"}),
    NamedTarget("aarch64", "64-bit Arm with NEON (Cortex-A72), cross-compiled",
                {"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mcpu": "cortex-a72"}),
    NamedTarget("cuda", "NVIDIA GPU: CUDA C (-arch=sm_XY picks the architecture)",
                {"kind": "cuda", "arch": "sm_80"}),
    NamedTarget("rocm", "AMD GPU (-mcpu=gfxNNN picks the architecture)", {"kind": "rocm", "mcpu": "gfx90a"}),
    NamedTarget("metal", "Apple GPU: Metal shading language", {"kind": "metal"}),
    NamedTarget("opencl", "OpenCL C", {"kind": "opencl"}),
    NamedTarget("vulkan", "Vulkan: SPIR-V", {"kind": "vulkan"}),
    NamedTarget("webgpu", "WebGPU: WGSL", {"kind": "webgpu"}),
)}

GPU_KINDS = ("cuda", "rocm", "metal", "opencl", "vulkan", "webgpu")


def host_target_dict() -> dict:
    return {k: v for k, v in json.loads(str(host_target())).items() if k in ("kind", "mtriple", "mcpu")}


def _build_func_present(kind: str) -> bool:
    import tvm  # noqa: F401 - importing TVM registers its code generators
    import tvm_ffi

    return tvm_ffi.get_global_func(f"target.build.{kind}", allow_missing=True) is not None


def target_unavailable(spec: dict) -> str | None:
    """Why this wheel cannot build for the target dict `spec` on this machine; None when it can."""
    kind = spec.get("kind")
    if not kind or not _build_func_present(kind):
        return f"this TVM wheel has no {kind} code generator"
    if kind == "llvm" and spec.get("mtriple"):
        from tvm.target import codegen

        arch = str(spec["mtriple"]).split("-", 1)[0]
        if arch not in {str(a) for a in codegen.llvm_get_targets()}:
            return f"this TVM's LLVM has no {arch} backend"
    if kind == "metal" and sys.platform != "darwin":
        return "Metal code generation crashes TVM 0.27 outside macOS"
    if kind == "rocm" and not (os.environ.get("ROCM_PATH") or os.path.isdir("/opt/rocm")):
        return "the ROCm toolkit (ROCM_PATH or /opt/rocm) is not installed here"
    return None


def available_targets() -> list[str]:
    return [name for name, t in NAMED_TARGETS.items() if target_unavailable(t.as_dict()) is None]


def _parse_options(words: list[str], text: str) -> dict:
    out = {}
    for w in words:
        if not w.startswith("-") or "=" not in w:
            raise RequestError(f"target {text!r}: {w!r} is not an option of the form -key=value",
                               hint="e.g. 'cuda -arch=sm_86' or 'aarch64 -mcpu=cortex-a76'")
        key, value = w.lstrip("-").split("=", 1)
        # TVM checks each attribute's type and takes no "64" for an int (-max_num_threads=64)
        out[key] = int(value) if value.lstrip("-").isdigit() else \
            {"true": True, "false": False}.get(value.lower(), value)
    return out


def target_spec(text: str | dict | None) -> tuple[str, dict]:
    """(name shown to the user, TVM target dict) for a friendly name (with -key=value options), a
    JSON object or a dict. Raises RequestError naming the targets this machine can build for."""
    if text is None or text == "":
        text = "host"
    if isinstance(text, dict):
        spec = dict(text)
        name = spec.get("kind", "?")
    elif text.lstrip().startswith("{"):
        try:
            spec = json.loads(text)
        except json.JSONDecodeError as e:
            raise RequestError(f"target {text!r} is not valid JSON: {e}",
                               hint='e.g. {"kind": "cuda", "arch": "sm_80"}') from e
        if not isinstance(spec, dict):
            raise RequestError(f"target {text!r} is not a JSON object", hint='e.g. {"kind": "llvm"}')
        name = spec.get("kind", "?")
    else:
        first, *options = text.split()
        if first not in NAMED_TARGETS:
            raise RequestError(f"unknown target {first!r}",
                               hint=f"targets available here: {', '.join(available_targets())}; "
                                    'or a TVM target as JSON, e.g. {"kind": "llvm", "mcpu": "znver3"}')
        spec = {**NAMED_TARGETS[first].as_dict(), **_parse_options(options, text)}
        name = text.strip()
    if "kind" not in spec:
        raise RequestError(f"target {text!r} has no \"kind\"", hint='e.g. {"kind": "llvm"}')
    why = target_unavailable(spec)
    if why is not None:
        raise RequestError(f"cannot build for target {name!r}: {why}",
                           hint=f"targets available here: {', '.join(available_targets())}")
    return name, spec


def normalised_target(text: str | None) -> str | None:
    """The name a session keeps for the target the user wrote: None for the host ("host", empty)."""
    if text is None or not str(text).strip() or str(text).strip() == "host":
        return None
    return str(text).strip()


def _tvm_target(shown: str, spec: dict):
    import tvm

    try:
        return tvm.target.Target(spec)
    except Exception as e:  # TVM's own check of the attributes (an unknown -key, a bad value)
        raise RequestError(f"TVM rejects target {shown!r} {json.dumps(spec)}: {tvm_error_text(e)}",
                           hint="see `irviz targets` for the targets and their attributes") from e


@dataclass(frozen=True, eq=False)
class Target:
    """A target as a session holds it: what the user wrote, checked once by `Target.of`, and what
    the passes, the builds, the runs and the figures need of it.

        Target.of(None)                 # the host: name None, label "host (znver4)"
        Target.of("x86-avx2")           # name "x86-avx2", for_passes a tvm Target (mcpu haswell)
        Target.of("sparc")              # RequestError naming the targets this machine builds for

    Two Targets are equal when they name the same TVM target dict ("x86-avx2" and its JSON);
    `name` tells which spelling a session keeps and shows."""

    name: str | None = None  # the user's text, stripped; None: the host
    shown: str = "host"      # the name in messages: a JSON target's kind
    spec: dict | None = field(default=None, repr=False)  # the TVM target dict; None: the host's
    _tvm: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, text: Target | str | dict | None = None) -> Target:
        """The target the user chose by `text` (a name as `irviz targets` lists, with -key=value
        options; a TVM target as JSON or a dict; "host", empty or None: the host). Raises
        RequestError for a target this TVM cannot build for, or one TVM rejects."""
        if isinstance(text, Target):
            return text
        name = normalised_target(json.dumps(text) if isinstance(text, dict) else text)
        if name is None:
            return cls()  # the host's TVM target is read on first use: choosing it loads no TVM
        shown, spec = target_spec(name)
        return cls(name, shown, spec, _tvm_target(shown, spec))

    @property
    def is_host(self) -> bool:
        return self.name is None

    @property
    def tvm(self):
        """The tvm.target.Target (the host's, with the features read from this machine)."""
        if self._tvm is None:
            object.__setattr__(self, "_tvm", host_target())
        return self._tvm

    @property
    def for_passes(self):
        """The tvm Target the passes run under; None for the host: none chosen, so GPU passes take
        their default GPU (see passes.registry.target_for)."""
        return None if self.is_host else self.tvm

    @property
    def kind(self) -> str:
        return "llvm" if self.spec is None else str(self.spec["kind"])

    @property
    def is_gpu(self) -> bool:
        return self.kind in GPU_KINDS

    def as_dict(self) -> dict:
        """The TVM target dict (the host's kind, triple and CPU)."""
        return host_target_dict() if self.spec is None else dict(self.spec)

    @property
    def not_runnable_here(self) -> str | None:
        """Why this target's code cannot run on this machine; None when it can (the host)."""
        return None if self.is_host else not_runnable_here(self.tvm)

    @property
    def device(self):
        """The tvm Device its code runs on here; None for the host (the CPU, the default) and for a
        target whose device is not here (see `not_runnable_here`)."""
        return None if self.is_host else run_device(self.tvm)

    @property
    def cpu_info(self) -> CpuInfo:
        """This machine, with the instruction set and vector width of the code built for this target."""
        return cpu_info_for(self.for_passes)

    @property
    def label(self) -> str:
        """Short text for a person: "host (znver4)", "x86-avx2", "cuda -arch=sm_86"."""
        return f"host ({cpu_info().mcpu})" if self.is_host else self.shown

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Target):
            return NotImplemented
        return self.name == other.name or self.as_dict() == other.as_dict()

    def __hash__(self) -> int:
        return hash(self.kind)  # equal targets have equal dicts, so equal kinds

    def __str__(self) -> str:
        return self.shown


def resolve_target(text: str | dict | None):
    """The tvm.target.Target for what the user typed: `Target.of(text).tvm`."""
    return Target.of(text).tvm


def is_gpu(target) -> bool:
    return str(as_target(target).kind.name) in GPU_KINDS


def pass_target(text: Target | str | None):
    """The target passes run under when the user chose `text` (None or the host: none chosen):
    `Target.of(text).for_passes`."""
    return Target.of(text).for_passes


# ---------------------------------------------------------------------------------------------
# where a target's code can run

# LLVM feature names that are instruction-set extensions (code using them faults on a CPU without
# them); the rest of LLVM's list are tuning flags (fast-*, slow-*, prefer-*, ...), safe anywhere
_ISA_PREFIXES = ("sse", "ssse", "avx", "fma", "f16c", "bmi", "amx", "aes", "vaes", "sha", "gfni",
                 "vpclmul", "pclmul", "popcnt", "lzcnt", "movbe", "adx", "neon", "sve", "fp-armv8",
                 "fullfp16", "dotprod", "i8mm", "bf16", "crypto")


def _arch(triple: str) -> str:
    return triple.split("-", 1)[0]


def _isa_features(tgt) -> set[str]:
    from tvm.target import codegen

    return {f for f in map(str, codegen.llvm_get_cpu_features(tgt)) if f.startswith(_ISA_PREFIXES)}


# extensions the OS must enable besides the CPU having them (AMX tiles, AVX-512's registers): LLVM
# reads the CPU's model and may list them where Linux left them off, and then /proc/cpuinfo omits
# their flags; code using them faults there
_OS_GATED_PREFIXES = ("amx", "avx512")


def _cpuinfo_flags() -> set[str] | None:
    """The x86 flags Linux lists, spelt as LLVM spells them less '-', '_' and '.'; None where there
    is no such list (another OS or architecture)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return {_bare(f) for f in line.split(":", 1)[1].split()}
    except OSError:
        pass
    return None


def _bare(feature: str) -> str:
    return feature.replace("-", "").replace("_", "").replace(".", "")


def host_isa_features() -> set[str]:
    """The host's instruction-set extensions that code may use here: LLVM's list, less the ones
    the OS must enable and Linux does not list as enabled."""
    features = _isa_features(host_target())
    flags = _cpuinfo_flags()
    if flags is None:
        return features
    return {f for f in features if not f.startswith(_OS_GATED_PREFIXES) or _bare(f) in flags}


def not_runnable_here(target) -> str | None:
    """Why code built for `target` (a tvm Target) cannot run on this machine; None when it can.
    A CPU target runs when it is this CPU's architecture and every instruction-set extension it
    enables is on this CPU (x86-avx2 runs on an AVX-512 machine, x86-avx512 not on an AVX2 one);
    a GPU target when TVM's runtime has that device API and sees a device."""
    import tvm
    import tvm_ffi

    tgt = as_target(target)
    kind = str(tgt.kind.name)
    if kind == "llvm":
        host = host_target()
        arch = _arch(str(tgt.attrs["mtriple"])) if "mtriple" in tgt.attrs else _arch(str(host.attrs["mtriple"]))
        if arch != _arch(str(host.attrs["mtriple"])):
            return f"this machine is {_arch(str(host.attrs['mtriple']))}, the target {arch}"
        missing = sorted(_isa_features(tgt) - host_isa_features())
        return f"this CPU lacks {', '.join(missing)}" if missing else None
    if kind in GPU_KINDS:
        if tvm_ffi.get_global_func(f"device_api.{kind}", allow_missing=True) is None:
            return f"this TVM wheel has no {kind} runtime"
        if not tvm.device(kind, 0).exist:
            return f"no {kind} device is present"
        return None
    return f"irviz runs only CPU and GPU targets, not {kind}"


def run_device(target):
    """The tvm Device `target`'s code runs on here (device 0 of its kind); None when it cannot run."""
    import tvm

    if not_runnable_here(target) is not None:
        return None
    kind = str(as_target(target).kind.name)
    return tvm.cpu() if kind == "llvm" else tvm.device(kind, 0)
