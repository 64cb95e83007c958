"""Counts that tell what a kernel's machine code does: instructions, vector instructions by width,
FMAs, calls out and loops, read from x86-64 or AArch64 assembly text; for GPU source, the launch
shape's neighbours: shared memory and barriers.

    asm_counts(text, own=symbols)
    # {"instructions": 812, "vector": 240, "vector_bits": {"512": 236, "128": 4}, "fma": 96,
    #  "vector_fma": 96, "calls": 2, "callees": {"TVMBackendParallelLaunch": 1, "expf": 1},
    #  "loops": 3}

A call to one of `own` (the kernel's FFI entry calling its body) is no call out. The failure paths
of the entry's argument checks (the blocks that end in TVM's error raising, `__tvm_set_raised_N`)
are not counted at all: they run only for bad arguments, and LLVM shares them among the kernels of
a module, so their size depends on what else was compiled beside the kernel.
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from irviz.core.backend.machine_loops import UNCONDITIONAL_JUMP, asm_functions, instruction

_X86_REG = re.compile(r"%([xyz])mm\d+")
_X86_BITS = {"x": 128, "y": 256, "z": 512}
# x86 scalar floating point works in xmm registers too; the suffix says it is one lane
# (a ymm/zmm operand or a broadcast makes it a vector op whatever the suffix)
_X86_SCALAR = re.compile(r"(ss|sd|sh|si2ss|si2sd|2si)$|^v?(u?comis[sd]|cvtt?s[sd]2s[sdi]|movd|movq)$")
_X86_FMA = re.compile(r"^v?f(n)?m(add|sub)(sub|add)?\d*[ps][sdh]$")
# NEON arrangement (.4s, .2d, .16b, …) and SVE (z0.s) operands
_ARM_VEC = re.compile(r"\bv\d+\.(\d+)([bhsd])\b")
_ARM_Q = re.compile(r"\bq\d+\b")
_ARM_SVE = re.compile(r"\bz\d+\.[bhsd]\b")
_ARM_FMA = re.compile(r"^(fmla|fmls|fmadd|fmsub|fnmadd|fnmsub|bfmla\w*)$")
_ELEM_BITS = {"b": 8, "h": 16, "s": 32, "d": 64}
# where a register gets a symbol's address: `movq __TVMBackendAllocWorkspace@GOTPCREL(%rip), %rax`,
# `ldr x8, [x8, :got_lo12:__TVMBackendAllocWorkspace]`; or another register's: `movq (%rax), %rcx`
_X86_LOAD = re.compile(r"^([A-Za-z_][\w.$]*)(?:@GOTPCREL)?\(%rip\),\s*%(\w+)$")
_ARM_LOAD = re.compile(r"^([xw]\d+),\s*\[[xw]\d+,\s*:got_lo12:([\w.$]+)\]$")
_X86_DEREF = re.compile(r"^\(%(\w+)\),\s*%(\w+)$")
_ARM_DEREF = re.compile(r"^([xw]\d+),\s*\[([xw]\d+)\]$")


def _track(loaded: dict, mnemonic: str, operands: str) -> None:
    if mnemonic.startswith(("mov", "lea")):
        m = _X86_LOAD.match(operands)
        if m:
            loaded[m.group(2)] = m.group(1)
            return
        m = _X86_DEREF.match(operands)
        if m and m.group(1) in loaded:
            loaded[m.group(2)] = loaded[m.group(1)]
    elif mnemonic == "ldr":
        m = _ARM_LOAD.match(operands)
        if m:
            loaded[m.group(1)] = m.group(2)
            return
        m = _ARM_DEREF.match(operands)
        if m and m.group(2) in loaded:
            loaded[m.group(1)] = loaded[m.group(2)]


_CALL = re.compile(r"^(callq?|bl|blr)$")


def _instructions(text: str):
    """(line, mnemonic, operands) of each instruction line; labels, directives, comments dropped."""
    for n, raw in enumerate(text.splitlines(), 1):
        ins = instruction(raw)
        if ins is not None:
            yield n, *ins


def _vector_bits(mnemonic: str, operands: str) -> int | str | None:
    regs = _X86_REG.findall(operands)
    if regs:
        if set(regs) == {"x"} and _X86_SCALAR.search(mnemonic) and "broadcast" not in mnemonic:
            return None
        return max(_X86_BITS[r] for r in regs)
    if _ARM_SVE.search(operands):
        return "sve"
    arr = _ARM_VEC.findall(operands)
    if arr:
        return max(int(n) * _ELEM_BITS[e] for n, e in arr)
    if _ARM_Q.search(operands):  # ldr/str of a whole 128-bit register
        return 128
    return None


def _callee(operands: str) -> str:
    name = operands.split(",")[-1].strip()
    # through a register or memory (`callq *(%rax)`, `blr x8`): a function pointer, e.g. a packed call
    if name.startswith(("*", "%", "(")) or re.fullmatch(r"[xw]\d+", name):
        return "(indirect)"
    return re.sub(r"@PLT$", "", name) or "?"


_ERROR_HELPER = re.compile(r"^(\.L)?__tvm_set_raised\w*$")


def asm_counts(text: str, own: Iterable[str] = ()) -> dict:
    """Counts of one kernel's assembly (x86-64 or AArch64): all its functions, `own` their names."""
    own = set(own)
    instructions = vector = fma = vector_fma = 0
    bits: Counter = Counter()
    callees: Counter = Counter()
    functions = asm_functions(text)
    failing = frozenset().union(*(f.failure_lines for f in functions))

    def called(name: str) -> None:
        if name not in own and not _ERROR_HELPER.match(name):
            callees[name.lstrip("_") if name != "(indirect)" else name] += 1

    loaded: dict[str, str] = {}  # register -> the symbol whose address or value it holds
    for n, mnemonic, operands in _instructions(text):
        if n in failing:
            continue
        instructions += 1
        _track(loaded, mnemonic, operands)
        width = _vector_bits(mnemonic, operands)
        if width is not None:
            vector += 1
            bits[str(width)] += 1
        if _X86_FMA.match(mnemonic) or _ARM_FMA.match(mnemonic):
            fma += 1
            vector_fma += width is not None
        if _CALL.match(mnemonic):
            callee = _callee(operands)
            if callee == "(indirect)":  # TVM calls its runtime through pointers: name them
                reg = re.search(r"%(\w+)|^([xw]\d+)$", operands.strip().lstrip("*").strip("()"))
                callee = loaded.get(next((g for g in reg.groups() if g), ""), callee) if reg else callee
            called(callee)
        elif UNCONDITIONAL_JUMP.match(mnemonic) and operands and not operands.startswith((".L", "*", "%")) \
                and re.match(r"^[A-Za-z_]", operands):
            called(_callee(operands))  # a tail call: jmp expf@PLT / b expf
    return {"instructions": instructions, "vector": vector,
            "vector_bits": dict(sorted(bits.items(), key=lambda kv: str(kv[0]))),
            "fma": fma, "vector_fma": vector_fma, "calls": sum(callees.values()),
            "callees": dict(callees.most_common()), "loops": sum(len(f.loops) for f in functions)}


# CUDA `__shared__ float a[256]`, OpenCL `__local float a[256]`, WGSL `var<workgroup> a : array<f32, 256>`
_SHARED_DECL = re.compile(r"(?:__shared__|__local)\s+(?:alignas\(\d+\)\s+)?(\w+)\s+\w+\[(\d+)\]|"
                          r"var<workgroup>\s*\w+\s*:\s*array<(\w+),\s*(\d+)>")
_TYPE_BYTES = {"float": 4, "int": 4, "half": 2, "double": 8, "char": 1, "uint": 4, "int64_t": 8,
               "uchar": 1, "__nv_bfloat16": 2, "short": 2, "f32": 4, "i32": 4, "u32": 4, "f16": 2}


def gpu_counts(source: str) -> dict:
    """Static shared memory (bytes) and barriers of one kernel's GPU source."""
    shared = sum(_TYPE_BYTES.get(t or wt, 4) * int(n or wn) for t, n, wt, wn in _SHARED_DECL.findall(source))
    barriers = len(re.findall(r"__syncthreads\(\)|barrier\(|workgroupBarrier\(", source))
    return {"shared_bytes": shared, "barriers": barriers,
            "lines": sum(1 for ln in source.splitlines() if ln.strip())}


def total_counts(per_kernel: list[dict]) -> dict:
    """A step's totals: numbers summed, vector widths and callees merged."""
    out: dict = {}
    for c in per_kernel:
        for k, v in c.items():
            if isinstance(v, dict):
                merged = out.setdefault(k, Counter())
                merged.update(v)
            elif isinstance(v, (int, float)):
                out[k] = out.get(k, 0) + v
    return {k: dict(v) if isinstance(v, Counter) else v for k, v in out.items()}
