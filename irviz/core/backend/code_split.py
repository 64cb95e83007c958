"""Cut a compiled module's text into the part each kernel (PrimFunc) became.

TVM 0.27 compiles PrimFunc K into an FFI entry `__tvm_ffi_K` (argument checks), a body `K_compute_`,
and for each parallel loop a `__tvm_parallel_lambda[.N]` (`.L…` in assembly) that the body refers
to. TVM marks the body noinline only when a buffer parameter is noalias; without "tirx.noalias" (a
course kernel still saying "tir.noalias") LLVM inlines the body into the entry, which then launches
the lambdas and allocates the workspace itself. A kernel's code is every function reachable from its
entry and body that no other kernel reaches; the helpers all kernels share (error raising, fp16
conversion) stay out.

    functions = llvm_functions(asm, "asm")       # {symbol: text}, in file order
    parts = kernel_parts(functions, ["fused_matmul_add", ...])   # {kernel: [symbols]}
    gpu_functions(cuda_source, "cuda")           # {"fused_matmul_add_kernel": text, ...}
"""
from __future__ import annotations

import re

# ELF assembly (x86: @function, Arm: %function) from `.type` to `.size`
_ASM_FUNC = re.compile(r"^\s*\.type\s+([\w.$]+),\s*[@%]function\s*$(.*?)^\s*\.size\s+\1,.*?$", re.M | re.S)
_LL_FUNC = re.compile(r"^define\b[^@\n]*@([\w.$\"-]+)\(.*?^\}\s*$", re.M | re.S)
_TOKEN = re.compile(r"[A-Za-z_.$][\w.$]*")
# runtime helpers every kernel may call; they are calls out of a kernel, never part of it
_SHARED_HELPERS = re.compile(r"^(\.L)?(__tvm_set_raised\w*|__truncsfhf2|__extendhfsf2|__gnu_\w+)$")
_ENTRY_PREFIX = "__tvm_ffi_"


def llvm_functions(text: str, fmt: str) -> dict[str, str]:
    """{symbol: the function's text} of LLVM assembly (`fmt` "asm") or LLVM IR ("ll")."""
    out: dict[str, str] = {}
    pattern = _ASM_FUNC if fmt == "asm" else _LL_FUNC
    for m in pattern.finditer(text):
        out[m.group(1).strip('"')] = m.group(0)
    return out


def _refs(functions: dict[str, str]) -> dict[str, set[str]]:
    names = set(functions)
    out = {}
    for name, body in functions.items():
        out[name] = {t for t in _TOKEN.findall(body) if t in names and t != name}
    return out


def _reach(roots: list[str], refs: dict[str, set[str]]) -> set[str]:
    seen, todo = set(), list(roots)
    while todo:
        n = todo.pop()
        if n in seen or _SHARED_HELPERS.match(n):
            continue
        seen.add(n)
        todo.extend(refs.get(n, ()))
    return seen


def kernel_roots(kernel: str, functions: dict[str, str]) -> list[str]:
    return [s for s in (_ENTRY_PREFIX + kernel, kernel, kernel + "_compute_") if s in functions]


def kernel_parts(functions: dict[str, str], kernels: list[str]) -> dict[str, list[str]]:
    """{kernel: its symbols}: body and lambdas first (file order), the FFI entry last."""
    refs = _refs(functions)
    reached = {k: _reach(kernel_roots(k, functions), refs) for k in kernels}
    owners: dict[str, int] = {}
    for syms in reached.values():
        for s in syms:
            owners[s] = owners.get(s, 0) + 1
    order = {s: i for i, s in enumerate(functions)}
    out = {}
    for k, syms in reached.items():
        own = [s for s in syms if owners[s] == 1 or s in kernel_roots(k, functions)]
        out[k] = sorted(own, key=lambda s: (s.startswith(_ENTRY_PREFIX), order[s]))
    return out


_LAMBDA = re.compile(r"^(\.L)?__tvm_parallel_lambda(\.\d+)?$")


def symbol_role(symbol: str, kernel: str, symbols: list[str]) -> str:
    """What a symbol of a kernel's code is: "entry" (argument checks, and the body too when LLVM
    inlined it: "entry+body"), "body", "parallel lambda" or "helper" (anything else emitted for it)."""
    if symbol == _ENTRY_PREFIX + kernel:
        has_body = any(s in (kernel, kernel + "_compute_") for s in symbols)
        return "entry" if has_body else "entry+body"
    if symbol in (kernel, kernel + "_compute_"):
        return "body"
    return "parallel lambda" if _LAMBDA.match(symbol) else "helper"


# lines of assembly that are bookkeeping: debug line records, CFI, local temp labels
_NOISE = re.compile(r"^\s*(\.loc\b|\.cfi_\w+|\.file\b|\.p2align\b|\.Ltmp\d+:|\.Lfunc_begin\d+:|"
                    r"\.Lfunc_end\d+:|#\s*--\s*(Begin|End) function)")


_TABBED = re.compile(r"^\t(\S+)\t")


def clean_asm(text: str) -> str:
    """Assembly as a reader wants it: no debug-line, CFI or temporary-label lines, and the tabs
    between indent, mnemonic and operands as a few spaces (a narrow pane shows the operands)."""
    return "\n".join(_TABBED.sub(lambda m: "  " + m.group(1).ljust(11) + " ", ln)
                     for ln in text.splitlines() if not _NOISE.match(ln))


# ---------------------------------------------------------------------------------------------
# GPU source

_GPU_HEAD = {
    "cuda": re.compile(r'^extern "C" __global__ void (?:__launch_bounds__\([^)]*\)\s*)?(\w+)\s*\([^;{]*\)\s*\{',
                       re.M),
    "opencl": re.compile(r"^__kernel void (?:__attribute__\(\(.*?\)\)\s*)?(\w+)\s*\([^;{]*\)\s*\{", re.M),
    "webgpu": re.compile(r"^//-+\n// Function: (\w+)\n//-+\n", re.M),
    "metal": re.compile(r"^kernel void (\w+)\s*\(", re.M),
}


def gpu_functions(source: str, kind: str) -> dict[str, str]:
    """{device function name: its text} of a GPU module's source, each up to the next one."""
    pattern = _GPU_HEAD.get(kind)
    if pattern is None:
        return {}
    heads = list(pattern.finditer(source))
    out = {}
    for i, m in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(source)
        out[m.group(1)] = source[m.start():end].rstrip() + "\n"
    return out


_DECLARATION = re.compile(r'^(extern "C" __global__|__kernel void) [^{;]*;[ \t]*\n', re.M)


def gpu_prelude(source: str, kind: str) -> str:
    """The source before the first device function (includes, macros), without the declarations
    of every device function (a kernel's file declares only what it defines)."""
    pattern = _GPU_HEAD.get(kind)
    m = pattern.search(source) if pattern is not None else None
    return _DECLARATION.sub("", source[:m.start()]) if m else ""


def gpu_kernel_parts(device_funcs: list[str], kernels: list[str]) -> dict[str, list[str]]:
    """{kernel: its device functions}: TVM names them K_kernel, K_kernel_1, …; the longest kernel
    name that fits wins (kernels named `add` and `add_1` both exist)."""
    out: dict[str, list[str]] = {k: [] for k in kernels}
    by_length = sorted(kernels, key=len, reverse=True)
    for f in device_funcs:
        for k in by_length:
            if f == k or re.fullmatch(re.escape(k) + r"_kernel(_\d+)?", f):
                out[k].append(f)
                break
    return out
