"""Building one small module and timing it on this machine: what every measured decision rests on.

Each call or kernel is built in a module of its own, ``main`` calling it once; constant arguments
(weights) stay constants, as random arrays of the same shape, so CPUPrepackWeights folds their
re-layout at compile time as it does in the model. Figures are the minimum of a few runs: on a busy
machine the minimum is the least disturbed.
"""
from __future__ import annotations

import time
from contextlib import contextmanager

import numpy as np
import tvm
from tvm import relax

from irviz.core.backend.build import build
from irviz.core.backend.library_functions import library_calls
from irviz.core.backend.run import tvm_threads
from irviz.core.backend.timing import contention, settle_threads, time_alone
from irviz.core.errors import PassError, tvm_error_text
from irviz.core.tvm_compat import GenericConst, host_target, static_shape

RUNS = 5
# A kernel of a few µs gets more than RUNS runs, so its minimum is taken over enough calls to
# decide on; a 5 ms kernel adds nothing.
MIN_SECONDS = 0.02
# The first calls into torch (and into TVM) in a process run a time slice each: a 16x64x192 matmul
# through torch took 12-16 ms per call for its first six calls after torch.export, then 0.02 ms.
# So the first module of each kind in a process is warmed up this long before it is timed.
FIRST_WARMUP_SECONDS = 0.25
# On a busy 2-core machine a parallel kernel's whole block can wait a time slice per call for a
# descheduled worker: layer_norm of the dynamic_mlp sample read 19.6 ms (min of its block) for a
# kernel of µs. Such a block is timed again, this many blocks at most.
CONTENDED_TRIES = 3
_warmed: set[str] = set()
_recorders: list[list] = []


@contextmanager
def recorded():
    """The timing.Timing block each build_and_time inside keeps (a call so slow it is timed
    without one adds nothing): what a decision's conditions are judged from (``conditions``)."""
    blocks: list = []
    _recorders.append(blocks)
    try:
        yield blocks
    finally:
        _recorders.remove(blocks)


shape_of = static_shape


def random_array(shape, dtype, seed) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if str(dtype) in ("float32", "float64"):
        # drawn in place at its own dtype: a 128256 x 4096 LM head is 2 GB, not 4 GB of float64 twice
        a = rng.random(shape, dtype=str(dtype))
        a -= 0.5
        a *= 0.2
        return a
    return (rng.standard_normal(shape) * 0.1).astype(str(dtype))


# drawn at a time by random_tensor: its scratch stays near this whatever the tensor's size
_CHUNK_BYTES = 64 << 20


def random_tensor(shape, dtype, seed) -> tvm.runtime.Tensor:
    """A TVM tensor of random values, as random_array draws them, allocated once: its elements are
    drawn into it in chunks through a numpy view of its memory, so a 2 GB LM head takes 2 GB, not
    2 GB of numpy and 2 GB of its copy."""
    shape = tuple(int(d) for d in shape)
    t = tvm.runtime.empty(shape, str(dtype), tvm.cpu())
    bits = None
    try:
        view = np.from_dlpack(t)
    except Exception:  # bfloat16 has no DLPack numpy view: its bits, as the unsigned ints of its width
        bits = f"uint{tvm.runtime.DataType(str(dtype)).bits}"
        view = np.from_dlpack(t._create_view(shape, bits))

    def draw(part_shape, part_seed):
        a = random_array(part_shape, dtype, part_seed)
        return a.view(bits) if bits else a

    if view.ndim == 0 or view.size == 0:
        view[...] = draw(shape, seed)
        return t
    # chunks of the flat tensor, not of its rows: SAM's 1 x 16 x 4096 x 4096 attention has one
    # row, and a draw at a dtype other than float32/64 goes through float64 (8 bytes an element)
    flat = view.reshape(-1)
    step = max(1, _CHUNK_BYTES // max(view.itemsize, 8))
    for k, start in enumerate(range(0, flat.size, step)):
        part = flat[start:start + step]
        part[...] = draw(part.shape, seed * 100003 + k)
    return t


def _operands(exprs, tensors: bool = False):
    """(params, args, inputs) for `exprs`: a constant stays a (random) constant, anything else becomes
    a parameter fed a random input. None when a shape is not static.
    tensors: inputs and constants as TVM tensors (random_tensor) rather than numpy arrays."""
    make = random_tensor if tensors else random_array
    params, args, inputs = [], [], []
    for i, a in enumerate(exprs):
        if isinstance(a, tvm.tirx.IntImm):
            args.append(a)  # a size a dynamic kernel takes as a scalar, bound to a number
            continue
        shape = shape_of(a.ty)
        if shape is None:
            return None
        if isinstance(a, GenericConst):
            # the dtype said: relax.const makes an int64 array int32
            args.append(relax.const(make(shape, a.ty.dtype, 100 + i), str(a.ty.dtype)))
        else:
            v = relax.Var(f"a{i}", relax.TensorType(shape, a.ty.dtype))
            params.append(v)
            args.append(v)
            inputs.append(make(shape, a.ty.dtype, i))
    return params, args, inputs


def _one_call_module(exprs, make_call, tensors: bool = False) -> tuple[tvm.IRModule, list] | None:
    """main(params...) = make_call(bb, args) over `exprs` as operands; the module and random
    inputs for its params (TVM tensors with `tensors`). None when a shape is not static."""
    ops = _operands(exprs, tensors)
    if ops is None:
        return None
    params, args, inputs = ops
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit(make_call(bb, args))
            gv = bb.emit_output(out)
        bb.emit_func_output(gv)
    return bb.get(), inputs


def single_call_module(call, tensors: bool = False) -> tuple[tvm.IRModule, list] | None:
    """main(params...) = the Relax call alone; the module and random inputs for its params."""
    return _one_call_module(call.args, lambda bb, args: relax.Call(call.op, args, call.attrs, call.ty_args),
                            tensors)


def kernel_module(mod, gv) -> tuple[tvm.IRModule, list[np.ndarray]] | None:
    """main(...) = call_tir(kernel, args) as `mod`'s main first calls `gv`; None when main does
    not call it with static shapes.  The kernel is the module's only PrimFunc (see kernel_of)."""
    found = []
    call_tir = tvm.ir.Op.get("relax.call_tir")

    def visit(e):
        if not found and isinstance(e, relax.Call) and e.op.same_as(call_tir) and e.args[0].same_as(gv):
            found.append(e)

    main = next((f for g, f in mod.functions.items() if g.name_hint == "main"), None)
    if not isinstance(main, relax.Function):
        return _prim_func_alone(mod, gv)
    relax.analysis.post_order_visit(main, visit)
    if not found:
        return None
    return call_tir_module(mod, found[0])


def call_tir_module(mod, call, tensors: bool = False) -> tuple[tvm.IRModule, list] | None:
    """main(...) = this call_tir of `mod` alone; None unless every shape is static."""
    gv = call.args[0]
    out = call.ty_args[0]
    out = list(out.fields) if isinstance(out, tvm.ir.TupleType) else out
    return _one_call_module(call.args[1].fields, lambda bb, args: relax.call_tir(
        bb.add_func(mod[gv], gv.name_hint), args, out), tensors)


def tensor_bytes(ty) -> int | None:
    """Bytes of a tensor type with a static shape (None otherwise)."""
    shape = shape_of(ty) if isinstance(ty, relax.TensorType) else None
    if shape is None:
        return None
    n = 1
    for d in shape:
        n *= int(d)
    return n * tvm.runtime.DataType(str(ty.dtype)).itemsize


def in_place_operand(call) -> int | None:
    """The operand of a call_tir its output could be written over: not a constant, a float tensor
    of at least the output's bytes (the largest such), the output one float tensor. None if none."""
    out = call.ty_args[0]
    need = tensor_bytes(out)
    if need is None or not str(out.dtype).startswith(("float", "bfloat")):
        return None
    best = None
    for i, a in enumerate(call.args[1].fields):
        size = tensor_bytes(a.ty) if not isinstance(a, GenericConst) else None
        if size is not None and size >= need and str(a.ty.dtype).startswith(("float", "bfloat")):
            if best is None or size > best[1]:
                best = (i, size)
    return best[0] if best else None


def call_tir_in_place_module(mod, call, index: int, tensors: bool = False) -> tuple[tvm.IRModule, list] | None:
    """As call_tir_module, but the kernel writes its output over operand `index` (a view of its
    memory; see in_place_operand): the module needs no memory for the output. The values it
    computes are wrong, its memory traffic the same: a kernel whose operands and output do not fit
    together is timed this way."""
    gv = call.args[0]
    out = call.ty_args[0]

    def make(bb, args):
        view = bb.emit(relax.op.memory.view(args[index], relax.ShapeExpr(list(out.shape)), str(out.dtype)))
        return relax.call_tir_inplace(bb.add_func(mod[gv], gv.name_hint), list(args) + [view],
                                      [len(args)], out)

    return _one_call_module(call.args[1].fields, make, tensors)


def call_dps_packed_module(call, tensors: bool = False) -> tuple[tvm.IRModule, list] | None:
    """main(...) = this call_dps_packed (a library function) alone; None unless every shape is static."""
    return _one_call_module(call.args[1].fields, lambda bb, args: relax.call_dps_packed(
        call.args[0], args, call.ty_args[0]), tensors)


def kernel_of(small) -> tvm.ir.GlobalVar:
    """The kernel in a module from kernel_module (its name may differ from the original's)."""
    return next(g for g, f in small.functions.items() if not isinstance(f, relax.Function))


def _prim_func_alone(mod, gv) -> tuple[tvm.IRModule, list[np.ndarray]] | None:
    """A module of PrimFuncs only has no Relax call to copy: main calls the kernel with its last
    buffer as the output, as irviz runs such a module.  None unless every shape is static."""
    func = mod[gv]
    buffers = [p.ty for p in func.params]
    if len(buffers) < 2 or not all(isinstance(b, tvm.tirx.BufferType) for b in buffers):
        return None
    shapes = [[int(d) if isinstance(d, tvm.tirx.IntImm) else None for d in b.shape] for b in buffers]
    if any(None in shape for shape in shapes):
        return None
    operands = [relax.Var(f"a{i}", relax.TensorType(shape, b.dtype))
                for i, (shape, b) in enumerate(zip(shapes[:-1], buffers[:-1]))]
    out = relax.TensorType(shapes[-1], buffers[-1].dtype)
    # the kernel may itself be called main (te.create_prim_func's default), and its global_symbol
    # must follow its new name or the built module has two symbols called main
    name = "kernel" if gv.name_hint == "main" else gv.name_hint
    if func.attrs is not None and "global_symbol" in func.attrs:
        func = func.with_attr("global_symbol", name)
    return _one_call_module(operands, lambda bb, args: relax.call_tir(bb.add_func(func, name), args, out))


def build_and_time(mod, inputs, budget_seconds: float | None = None, *, output: bool = True,
                   release_inputs: bool = False, timings: list | None = None) -> tuple[float, np.ndarray | None]:
    """(min ms over RUNS, output) of mod's main on `inputs`. `budget_seconds`: a call so slow that
    RUNS of them would take longer is timed fewer times; one taking half of it, only once.
    output=False: no copy of the output (None); release_inputs: each array of `inputs` is dropped
    from the list once the runtime has its copy (a 2 GB weight is then held once, not twice).
    A block whose threads waited for a core (timing.contention) is timed again, up to
    CONTENDED_TRIES blocks, and the first clean one (else the fastest) kept; `timings` gets it."""
    built = build(mod)
    vm = relax.VirtualMachine(built.executable, tvm.cpu())
    fn = vm["main"]
    args = []
    for i in range(len(inputs)):
        x = inputs[i]
        args.append(x if isinstance(x, tvm.runtime.Tensor) else tvm.runtime.tensor(x))
        if release_inputs:
            inputs[i] = None
    t0 = time.perf_counter()
    out = fn(*args)
    out = as_numpy(out) if output else None
    first = time.perf_counter() - t0
    if budget_seconds is not None and first * 2 > budget_seconds:
        return first * 1e3, out  # a call of seconds: its first is as good as any (cold caches are noise)
    if budget_seconds is not None and first * (RUNS + 1) > budget_seconds:
        runs = max(1, min(RUNS, int(budget_seconds / max(first, 1e-9)) - 1))
        return time_alone(lambda: fn(*args), runs, warmup=0, settle=0, min_seconds=0).min_ms, out
    kind = "torch" if library_calls(mod) else "tir"
    warm = MIN_SECONDS / 2 if kind in _warmed else FIRST_WARMUP_SECONDS
    _warmed.add(kind)
    t = time_alone(lambda: fn(*args), RUNS, warmup=1, settle=0, min_seconds=MIN_SECONDS, warmup_seconds=warm)
    threads = tvm_threads()
    for _ in range(CONTENDED_TRIES - 1):
        if contention(t, threads) is None or (budget_seconds is not None and first * RUNS * 3 > budget_seconds):
            break
        again = time_alone(lambda: fn(*args), RUNS, warmup=1, settle=0, min_seconds=MIN_SECONDS,
                           warmup_seconds=MIN_SECONDS / 2)
        if contention(again, threads) is None or again.min_ms < t.min_ms:
            t = again
    if timings is not None:
        timings.append(t)
    for blocks in _recorders:
        blocks.append(t)
    return t.min_ms, out


def as_numpy(out) -> np.ndarray:
    """A VM result as one array: a tensor's values, or a tuple's tensors flattened and concatenated
    (a model returning several outputs is compared and checked as a whole)."""
    if isinstance(out, tvm.runtime.Tensor):
        return out.numpy()
    parts = [as_numpy(x).ravel() for x in out]
    return np.concatenate(parts) if parts else np.zeros(0, dtype="float32")


def settle() -> None:
    """Wait until the other runtime's workers stop spinning: a TensorIR kernel timed straight after
    a torch call shares the cores with torch's OpenMP threads (ConvNeXt's 3136x96.96x384 read 11.5 ms
    right after torch.matmul, 7.3 ms started 50 ms later), and TVM's pool does the same to torch."""
    settle_threads()


def apply_steps(mod, steps, **params_by_step):
    """Run `steps`, ``(name, make)`` pairs, on `mod` for the host CPU, as the pass registry runs the
    passes of those names: ``make(**params)`` under the target, then the pass under the target at
    opt_level 3. A failure is a PassError naming the step."""
    target = host_target()
    for name, make in steps:
        try:
            with target:
                the_pass = make(**params_by_step.get(name, {}))
            with target, tvm.transform.PassContext(opt_level=3):
                mod = the_pass(mod)
        except PassError:
            raise
        except Exception as exc:  # reported as the registry reports a failing pass
            raise PassError(f"{name} failed: {tvm_error_text(exc)}") from exc
    return mod


def close(a: np.ndarray, b: np.ndarray) -> bool:
    scale = max(1.0, float(np.max(np.abs(b))) if b.size else 1.0)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-3, atol=1e-3 * scale))


def first_line(exc: BaseException) -> str:
    text = (getattr(exc, "message", None) or tvm_error_text(exc)).strip()
    return (text.splitlines() or [type(exc).__name__])[0][:200]
