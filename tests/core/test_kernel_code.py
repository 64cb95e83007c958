"""What each kernel becomes on a target, without the hardware: the course MLP through the CPU
pipeline compiles to zmm FMAs on an AVX-512 host, ymm only for x86-avx2, NEON for aarch64; through
the zero pipeline to CUDA source with its thread bindings. Each kernel's code is its own."""
from __future__ import annotations

import re

import pytest
import tvm

from irviz.core import passes
from irviz.core.backend.build import lower
from irviz.core.backend.code_counts import asm_counts, gpu_counts
from irviz.core.backend.kernel_code import kernel_code
from irviz.core.errors import RequestError
from irviz.core.target import available_targets, resolve_target, target_spec
from irviz.core.tvm_compat import I, T
from irviz.core.workspace import Workspace


def _cpu_has(flag: str) -> bool:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return any(line.startswith("flags") and flag in line.split() for line in f)
    except OSError:
        return False


def _last_step(pipeline: str):
    ws = Workspace()
    ws.open("sample:mlp", planned=passes.parse_pipeline(pipeline))
    ws.run_to_end()
    return ws.session.steps[-1].mod


@pytest.fixture(scope="module")
def cpu_step():
    return _last_step("tir-cpu")


@pytest.fixture(scope="module")
def zero_step():
    return _last_step("zero")


# tir-cpu's matmul kernel: its weight packed at compile time, so TVM names it ..._prepacked
CPU_MATMUL = "fused_matmul_add_relu_prepacked"


def _matmul(code) -> str:
    return code.kernels[CPU_MATMUL].code["asm"]


# ---------------------------------------------------------------------------------------------
# targets by name


def test_friendly_names_are_tvm_target_dicts():
    assert target_spec("aarch64")[1] == {"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mcpu": "cortex-a72"}
    assert str(resolve_target("cuda -arch=sm_86").attrs["arch"]) == "sm_86"
    assert str(resolve_target('{"kind": "llvm", "mcpu": "haswell"}').attrs["mcpu"]) == "haswell"
    assert str(resolve_target("host")) == str(tvm.target.Target.from_device(tvm.cpu()))
    assert {"host", "x86-avx2", "x86-avx512", "aarch64", "cuda"} <= set(available_targets())


@pytest.mark.parametrize("text", ["sparc-v9", "vulkan"])
def test_a_target_this_wheel_cannot_build_for_names_the_available_ones(text):
    if text == "vulkan" and "vulkan" in available_targets():
        pytest.skip("this wheel has the Vulkan code generator")
    with pytest.raises(RequestError) as e:
        resolve_target(text)
    assert "host, x86-avx2, x86-avx512, aarch64, cuda" in e.value.user_message()


# ---------------------------------------------------------------------------------------------
# CPU: LLVM IR and assembly per kernel


def test_each_kernel_gets_its_own_code_and_only_its_own(cpu_step):
    code = kernel_code(cpu_step, "host")
    lowered = lower(cpu_step)
    names = {gv.name_hint for gv, f in lowered.functions.items() if isinstance(f, tvm.tirx.PrimFunc)}
    assert set(code.kernels) == names and len(names) == 2
    for name, k in code.kernels.items():
        assert k.error is None and f"{name}_compute_:" in k.code["asm"]
        assert re.search(rf"^define .*@{name}_compute_\(", k.code["ll"], re.M)
        for other in names - {name}:
            assert f"{other}_compute_" not in k.code["asm"] + k.code["ll"]
        assert ".loc\t" not in k.code["asm"]  # debug-line records are cut


@I.ir_module
class TwoParallelKernels:
    @T.prim_func(s_tir=True)
    def scale(A: T.Buffer((256, 64), "float32"), B: T.Buffer((256, 64), "float32")):
        T.func_attr({"global_symbol": "scale", "tirx.noalias": True})
        for i in T.parallel(256):
            for j in T.vectorized(64):
                B[i, j] = A[i, j] * T.float32(2)

    @T.prim_func(s_tir=True)
    def expo(A: T.Buffer((256, 64), "float32"), B: T.Buffer((256, 64), "float32")):
        T.func_attr({"global_symbol": "expo", "tirx.noalias": True})
        for i in T.parallel(256):
            for j in range(64):
                B[i, j] = T.exp(A[i, j])


def test_each_parallel_lambda_stays_with_its_kernel():
    code = kernel_code(TwoParallelKernels, "host")
    lambdas = {n: [s for s in k.symbols if "parallel_lambda" in s] for n, k in code.kernels.items()}
    assert set(lambdas) == {"scale", "expo"} and all(len(v) == 1 for v in lambdas.values())
    assert lambdas["scale"] != lambdas["expo"]
    scale, expo = code.kernels["scale"].counts, code.kernels["expo"].counts
    assert scale["callees"].get("TVMBackendParallelLaunch") == 1 and "expf" not in scale["callees"]
    assert expo["callees"].get("expf", 0) >= 1  # libm, called from expo's lambda only


def test_the_host_matmul_is_zmm_fmas_on_an_avx512_machine(cpu_step):
    if not _cpu_has("avx512f"):
        pytest.skip("this CPU has no AVX-512")
    code = kernel_code(cpu_step, "host")
    assert re.search(r"vfmadd\w+ps\s.*%zmm\d+", _matmul(code))
    counts = code.kernels[CPU_MATMUL].counts
    assert counts["vector_fma"] > 0 and counts["vector_bits"].get("512", 0) > 0


def test_avx2_is_ymm_and_never_zmm(cpu_step):
    code = kernel_code(cpu_step, "x86-avx2")
    asm = "".join(k.code["asm"] for k in code.kernels.values())
    assert re.search(r"vfmadd\w+ps\s.*%ymm\d+", asm) and "zmm" not in asm
    assert "512" not in code.totals()["vector_bits"]


def test_aarch64_is_neon(cpu_step):
    code = kernel_code(cpu_step, "aarch64")
    assert re.search(r"\bfmla\s+v\d+\.4s", _matmul(code))
    assert code.kernels[CPU_MATMUL].counts["vector_fma"] > 0


def test_a_second_look_is_cached_and_one_kernel_compiles_alone(cpu_step):
    assert kernel_code(cpu_step, "x86-avx2") is kernel_code(cpu_step, "x86-avx2")
    assert kernel_code(cpu_step, "x86-avx2", only="fused_matmul1_add1") is kernel_code(cpu_step, "x86-avx2")
    alone = kernel_code(cpu_step, "x86-avx512", only=CPU_MATMUL)
    assert list(alone.kernels) == [CPU_MATMUL]
    whole = kernel_code(cpu_step, "x86-avx512").kernels[CPU_MATMUL]
    assert alone.kernels[CPU_MATMUL].counts == whole.counts


# ---------------------------------------------------------------------------------------------
# GPU source


def test_cuda_source_per_kernel_with_its_launch_shape(zero_step):
    code = kernel_code(zero_step, "cuda")
    assert code.kind == "cuda" and set(code.kernels) == {"fused_matmul_add_relu", "fused_matmul1_add1"}
    for name, k in code.kernels.items():
        src = k.code["cuda"]
        assert k.error is None and src.count("__global__") == 1 and f"{name}_kernel(" in src
        (launch,) = k.launch
        assert "threadIdx.x" in src and ("blockIdx.x" in src) == (launch["grid"][0] > 1)
        assert launch["function"] == f"{name}_kernel" and launch["block"][0] > 1
        assert f"__launch_bounds__({launch['block'][0] * launch['block'][1]})" in src
    assert "#include" in code.prelude


def test_a_kernel_scheduled_for_a_cpu_says_so_for_cuda(cpu_step):
    k = kernel_code(cpu_step, "cuda").kernels[CPU_MATMUL]
    assert k.error and CPU_MATMUL in k.error and "zero" in k.error


# ---------------------------------------------------------------------------------------------
# counts on text


def test_counts_read_x86_and_arm_assembly():
    x86 = """
    vbroadcastss\t-28(%rdi,%r8,4), %zmm2
    vfmadd231ps\t-3584(%rax), %zmm2, %zmm1       # 64-byte Folded Reload
    vfmadd231ss\t(%rax), %xmm2, %xmm1
    vaddps\t%ymm0, %ymm1, %ymm1
.LBB5_1:
    callq\texpf@PLT
    jmp\t.LBB5_1
"""
    c = asm_counts(x86)
    assert (c["instructions"], c["vector"], c["fma"], c["vector_fma"]) == (6, 3, 2, 1)
    assert c["vector_bits"] == {"256": 1, "512": 2} and c["callees"] == {"expf": 1}
    arm = "\tfmla\tv0.4s, v1.4s, v2.s[0]\n\tldr\tq3, [x1, #16]\n\tadd\tx0, x0, #4\n\tbl\ttanhf\n"
    c = asm_counts(arm)
    assert (c["instructions"], c["vector"], c["vector_fma"], c["calls"]) == (4, 2, 1, 1)
    arm_runtime = ("\tadrp\tx24, :got:__TVMBackendAllocWorkspace\n"
                   "\tldr\tx24, [x24, :got_lo12:__TVMBackendAllocWorkspace]\n\tldr\tx8, [x24]\n\tblr\tx8\n")
    assert asm_counts(arm_runtime)["callees"] == {"TVMBackendAllocWorkspace": 1}
    assert gpu_counts("__shared__ alignas(64) float red[256];\n__syncthreads();\n")["shared_bytes"] == 1024


# ---------------------------------------------------------------------------------------------
# the engine command the Code tab asks


def test_the_engine_answers_kernel_code_and_list_targets():
    from irviz.engine import Engine

    eng = Engine(type("Sink", (), {"send": lambda self, m: None})())
    assert eng.handle({"id": 1, "cmd": "open", "args": {"spec": "sample:mlp"}})["ok"]
    assert eng.handle({"id": 2, "cmd": "run_to_end"})["ok"]
    rep = eng.handle({"id": 3, "cmd": "kernel_code",
                      "args": {"target": "aarch64", "kernel": "fused_matmul_add_relu"}})
    assert rep["ok"], rep
    res = rep["result"]
    assert res["formats"] == ["asm", "ll"] and res["lexers"] == {"asm": "gas", "ll": "llvm"}
    assert set(res["kernels"]) == {"fused_matmul_add_relu"}  # compiled alone
    assert "fused_matmul_add_relu_compute_:" in res["code"]["asm"]
    none = eng.handle({"id": 6, "cmd": "kernel_code", "args": {"kernel": "conv9"}})
    assert not none["ok"] and "fused_matmul1_add1" in str(none["error"])
    bad = eng.handle({"id": 4, "cmd": "kernel_code", "args": {"target": "vulkan-ish"}})
    assert not bad["ok"] and "targets available here" in str(bad["error"])
    names = [t["name"] for t in eng.handle({"id": 5, "cmd": "list_targets"})["result"]]
    assert names[:5] == ["host", "x86-avx2", "x86-avx512", "aarch64", "cuda"]


# ---------------------------------------------------------------------------------------------
# a kernel's code is all of it: entry, body, parallel lambdas


def _dense_relu_parallel(noalias: str):
    """A learner's scheduled dense layer with bias and ReLU, outer loops parallel, its product in
    a buffer too big for the stack. `noalias` "tir.noalias" is the course's spelling, which TVM 0.27
    ignores: its buffers may then alias, and LLVM inlines the body into the FFI entry."""
    @T.prim_func(s_tir=True)
    def dense0(X: T.Buffer((32, 96), "float32"), W: T.Buffer((64, 96), "float32"),
               B: T.Buffer((64,), "float32"), Z: T.Buffer((32, 64), "float32")):
        T.func_attr({noalias: True})
        Y = T.sblock_alloc_buffer((32, 64), "float32")
        for i in T.parallel(32):
            for j, k in T.grid(64, 96):
                with T.sblock("Y"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    with T.init():
                        Y[vi, vj] = T.float32(0)
                    Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]
        for i in T.parallel(32):
            for j in range(64):
                with T.sblock("Z"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    Z[vi, vj] = T.max(Y[vi, vj] + B[vj], T.float32(0))

    return tvm.IRModule({"dense0": dense0.with_attr("global_symbol", "dense0")})


@pytest.mark.parametrize("noalias", ["tir.noalias", "tirx.noalias"])
@pytest.mark.parametrize("target", ["host", "aarch64"])
def test_a_parallel_kernel_counts_its_entry_lambdas_and_runtime_calls(noalias, target):
    k = kernel_code(_dense_relu_parallel(noalias), target).kernels["dense0"]
    assert k.error is None and "__tvm_ffi_dense0" in k.symbols
    calls = k.counts["callees"]
    assert calls.get("TVMBackendParallelLaunch") == 2 and k.counts["calls"] >= 4
    assert calls.get("TVMBackendAllocWorkspace") == 1 and calls.get("TVMBackendFreeWorkspace") == 1
    lambdas = [s for s in k.symbols if "parallel_lambda" in s]
    assert len(lambdas) == 2 and {k.parts[s]["role"] for s in lambdas} == {"parallel lambda"}
    # the entry's instructions are in the count, its calls to its own body are not calls out
    assert k.counts["instructions"] == sum(p["instructions"] for p in k.parts.values())
    assert k.parts["__tvm_ffi_dense0"]["instructions"] > 0 and "dense0_compute_" not in calls
    inlined = "dense0_compute_" not in k.symbols
    assert k.parts["__tvm_ffi_dense0"]["role"] == ("entry+body" if inlined else "entry")
    assert not any("set_raised" in c for c in calls)  # the failure paths of its checks
    assert k.counts["loops"] >= 2  # at least each lambda's share of its parallel loop


def test_calls_among_a_kernels_own_functions_are_not_calls_out():
    entry = ("__tvm_ffi_k:\n\tcmpl\t$3, %edx\n\tjne\t.LBB0_2\n\tcallq\tk_compute_\n"
             "\tmovq\t__TVMBackendAllocWorkspace@GOTPCREL(%rip), %rax\n\tcallq\t*(%rax)\n\tretq\n"
             ".LBB0_2:\n\tleaq\t.L.str(%rip), %rdi\n\tcallq\t__tvm_set_raised_6\n\tmovl\t$-1, %eax\n\tretq\n")
    c = asm_counts(entry, own=["__tvm_ffi_k", "k_compute_"])
    assert c["callees"] == {"TVMBackendAllocWorkspace": 1} and c["calls"] == 1
    assert c["instructions"] == 6  # not the 4 of the failed check's path


def _ret_lines(text: str) -> set[int]:
    return {n for n, ln in enumerate(text.splitlines(), 1) if ln.strip() in ("ret", "retq")}


@pytest.mark.parametrize("target", ["aarch64", "x86-avx2"])
def test_assembly_loop_links_are_loops_never_the_epilogue(target):
    from irviz.core.views.graph import tir_functions
    from irviz.ui.panes.loop_links import code_to_loop, loop_to_code

    mod = _ff_fused()
    nest = tir_functions(mod)[0]["loop_nest"]
    code = kernel_code(mod, target).kernels["ff_fused"].code
    rets = _ret_lines(code["asm"])
    links = [loop_to_code(nest, i, code, "asm") for i in range(len(nest))]
    assert any(link.lines for link in links)
    for link in links:
        assert not rets & set(link.lines)
        assert link.lines or link.unknown or "no loop of its own" in link.note or "unrolled" in link.note
    assert all(code_to_loop(nest, n, code, "asm") is None for n in rets)


def _ff_fused():
    """A fused feed-forward kernel scheduled as a learner does: parallel rows, the reduction's init
    split off; LLVM places some of its loops' latches after the function's `ret`."""
    @T.prim_func(s_tir=True)
    def ff_fused(X: T.Buffer((8, 32), "float32"), W: T.Buffer((64, 32), "float32"),
                 B: T.Buffer((64,), "float32"), Z: T.Buffer((8, 64), "float32")):
        T.func_attr({"tirx.noalias": True})
        Y = T.sblock_alloc_buffer((8, 64), "float32")
        for i, j, k in T.grid(8, 64, 32):
            with T.sblock("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]
        for i, j in T.grid(8, 64):
            with T.sblock("Z"):
                vi, vj = T.axis.remap("SS", [i, j])
                Z[vi, vj] = T.max(Y[vi, vj] + B[vj], T.float32(0))

    sch = tvm.s_tir.Schedule(tvm.IRModule({"ff_fused": ff_fused.with_attr("global_symbol", "ff_fused")}))
    y = sch.get_sblock("Y", "ff_fused")
    i, _j, k = sch.get_loops(y)
    sch.parallel(i)
    sch.decompose_reduction(y, k)
    sch.parallel(sch.get_loops(sch.get_sblock("Z", "ff_fused"))[0])
    return sch.mod
