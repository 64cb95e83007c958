"""What CPU the code runs on, as the schedules and the figures need it: model name, LLVM target and
the float32 vector width, read from the target's features rather than assumed.

    info = cpu_info()          # CpuInfo(model="AMD EPYC", target='{"kind":"llvm",...}',
                               #         mcpu="znver3", isa="AVX2", vector_lanes=8)
    vector_lanes(target)       # 16 with avx512f, 8 with avx/avx2, 4 with sse/neon
"""
from __future__ import annotations

import functools
import os
import platform
from dataclasses import asdict, dataclass

from irviz.core.tvm_compat import as_target, host_target

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
