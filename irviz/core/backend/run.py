"""Run a built module on the CPU VM: against PyTorch, or on random inputs when there is no model.

``run_and_compare(build_result, loaded)`` runs ``main`` in a ``relax.VirtualMachine`` on the CPU
with the model's example inputs and compares every output with PyTorch eager:

* outputs are flattened on both sides (tuples/lists/dicts; TVM arrays/tuples) and matched in order;
  a count or shape mismatch is a RunError.
* ``max_abs_error`` = max |tvm - torch| over all outputs.
* ``max_rel_error`` = max |tvm - torch| / |torch| over elements with |torch| > atol (near-zero
  reference values say nothing about relative error; the absolute error covers them).
* ``allclose``: float32/float64 outputs use rtol=1e-4 and atol=1e-4 * max(1, max|torch output|)
  (the absolute tolerance follows the output's scale, so deep models whose logits are in the tens
  do not fail on float32 rounding that accumulated over many layers); float16 uses 1e-2;
  integer and bool outputs must be equal.
* timing: at least ``repeats`` runs of torch eager (and at least 0.2 s of them) before any TVM kernel
  runs, then the same of ``vm["main"]``, then torch again, each block after its own warm-up and
  after the other runtime's pool has gone to sleep (``timing.time_alone``; interleaving them
  distorted torch's figure up to 100×). While a shown block was competed with (its threads waited
  for a core) up to two more rounds of TVM and torch blocks run; each figure is the median of its
  fastest clean block, ``tvm_timing``/``torch_timing`` keep min, quartiles, the load average and
  the contention, and ``reliable``/``reason`` say whether the figures can be trusted.
* kernels: per-kernel time from ``vm.set_instrument`` in a block of its own after the timed ones
  (the instrument adds overhead per call), checked against ``tvm_ms`` and each large kernel timed
  alone (``kernel_times.py``). ``KernelTime.ms`` is the median total time per run of that kernel,
  ``calls`` the calls per run, ``reliable``/``reason`` whether it agreed with its time alone;
  ``RunResult.kernels_reliable``/``kernels_reason`` whether they add up to no more than the run.
  Only PrimFuncs of the built module and ``call_dps_packed`` externs are listed (not
  ``vm.builtin.*``); ``binding`` comes from ``BuildResult.bindings``.
* threads: ``RunResult.threads`` is TVM's runtime thread count (``TVM_NUM_THREADS`` or TVM's
  default, 1 here; read from ``runtime.NumThreads``); ``torch_threads`` is the torch thread count
  used for the timed runs: by default torch is set to TVM's count while timing (``match_threads``).

``run_without_reference(build_result)`` is for a module with no PyTorch model behind it (an opened
TVMScript step file): it only times ``main`` on random inputs of the parameter types and reports
per-kernel times; the result says plainly that no reference was available (allclose None).

``build_and_run(mod, loaded)`` is the whole chain, build then one of the two runs.
"""
from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from collections.abc import Callable

import tvm
import tvm_ffi
from tvm import relax

from irviz.core.backend import build as build_mod
from irviz.core.backend.build import BuildResult
from irviz.core.backend import nondeterminism
from irviz.core.backend.kernel_times import KernelTime, KernelTimes, time_kernels
from irviz.core.backend.outputs import compare as _compare
from irviz.core.backend.outputs import flatten as _flatten
from irviz.core.backend.outputs import to_numpy as _to_numpy
from irviz.core.backend.outputs import to_tvm as _to_tvm
from irviz.core.backend.timing import best, contention, judge, time_alone
from irviz.core.errors import RunError, traceback_text, tvm_error_text
from irviz.core.frontend.inputs import check_func, entry_functions, random_inputs, symbolic_sizes
from irviz.core.tvm_compat import var_name

__all__ = [
    "KernelTime",
    "RunResult",
    "build_and_run",
    "check_func",
    "entry_functions",
    "random_inputs",
    "run_and_compare",
    "run_without_reference",
    "symbolic_sizes",
    "tvm_threads",
]


@dataclass
class RunResult:
    max_abs_error: float
    max_rel_error: float
    allclose: bool
    outputs: int
    tvm_ms: float  # median over `repeats`
    torch_ms: float  # median over `repeats`, timed in a block of its own
    kernels: list[KernelTime]  # slowest first
    threads: int  # TVM runtime threads
    torch_threads: int = 0
    repeats: int = 0
    rtol: float = 1e-4
    atol: float = 1e-4  # the largest atol used (it scales with each output's magnitude)
    per_output: list[dict] = field(default_factory=list)  # shape, dtype, max_abs, max_rel, allclose
    tvm_timing: dict | None = None  # timing.Timing.as_dict(): median, min, quartiles, runs, load
    torch_timing: dict | None = None
    # whether the figures say what each runtime takes alone: False when another process (or a
    # runtime's own pool) competed for the cores while a shown block ran; `reason` says which and how
    reliable: bool = True
    reason: str | None = None
    func: str = "main"  # the Relax function that ran
    # why outputs that differ cannot match by nature (a random op, order-dependent writes); None
    # for a genuine mismatch, and whenever the outputs match (see backend/nondeterminism.py)
    not_comparable: str | None = None
    # False when the kernels add up to more than the run allows or their runs were competed with;
    # `kernels_reason` says which, with the figures (each kernel has its own reliable/reason too)
    kernels_reliable: bool = True
    kernels_reason: str | None = None
    kernels_timing: dict | None = None  # the instrumented block: timing.Timing.as_dict() + blocks

    @property
    def verdict(self) -> str:
        """"pass", "mismatch", "not comparable", or "ran" (nothing to compare with)."""
        if self.allclose is None:
            return "ran"
        if self.allclose:
            return "pass"
        return "not comparable" if self.not_comparable else "mismatch"


def _run_hint(msg: str) -> str:
    if "Cannot find" in msg:
        m = re.search(r"Cannot find (?:ffi::Function|PackedFunc|function) ([\w.]+)", msg)
        name = m.group(1) if m else "a function"
        return (f"{name} is called through call_dps_packed/call_packed but is not registered in "
                "this process: register it with tvm.register_global_func before running.")
    if "Check failed" in msg and ("shape" in msg.lower() or "ndim" in msg or "dtype" in msg):
        return "the inputs do not match main's parameter types (shape/dtype)."
    return "the compiled module failed at run time; try an earlier step to find the pass that broke it."



def _compare_outputs(got, ref, against: str, *, count_hint: str, shape_hint: str) -> list[dict]:
    """Flatten both sides' outputs, check count and shapes, compare each (see _compare)."""
    refs = [_to_numpy(x) for x in _flatten(ref) if x is not None]
    gots = [_to_numpy(x) for x in _flatten(got) if x is not None]
    if len(refs) != len(gots):
        raise RunError(f"TVM returned {len(gots)} outputs, {against} {len(refs)}", count_hint)
    per_output = []
    for i, (g, r) in enumerate(zip(gots, refs)):
        if g.shape != r.shape:
            if g.size == r.size == 1:   # a scalar returned as (1,) or ()
                g = g.reshape(r.shape)
            else:
                raise RunError(f"output {i}: TVM shape {g.shape}, {against} shape {r.shape}", shape_hint)
        per_output.append(_compare(g, r))
    return per_output


def _main_params(mod) -> list[str] | None:
    if mod is None or "main" not in [gv.name_hint for gv in mod.get_global_vars()]:
        return None
    fn = mod["main"]
    return [var_name(p) for p in fn.params] if isinstance(fn, relax.Function) else None


# Rounds of (TVM block, torch block) after the first torch block: a second and third only while a
# shown block was competed with, and not once this many seconds of timing have passed.
MAX_ROUNDS = 3
MAX_EXTRA_SECONDS = 5.0

# TVM's runtime starts one worker per core only when told to (it used 1 here); torch uses every core.
# The pool reads this when it starts, i.e. at the first run after this module is imported.
os.environ.setdefault("TVM_NUM_THREADS", str(os.cpu_count() or 1))


def tvm_threads() -> int:
    try:
        return int(tvm.get_global_func("runtime.NumThreads")())
    except Exception:  # pragma: no cover
        return 0


def _synced(fn, dev):
    """`fn` that returns once the device has finished: a GPU call only queues its kernels."""
    if dev.dlpack_device_type() == tvm.cpu().dlpack_device_type():
        return fn

    def call(*args):
        out = fn(*args)
        dev.sync()
        return out

    return call


def run_and_compare(build_result: BuildResult, loaded, repeats: int = 10, *,
                    params: dict | None = None, match_threads: bool = True,
                    inputs=None, program=None, device=None) -> RunResult:
    """Run main on the VM with `loaded.example_inputs`; compare with torch; time both.

    `device`: the tvm Device the build's code runs on (None: the CPU); torch runs on the CPU,
    and a GPU's timed calls wait for the device (`dev.sync()`) before the clock stops.

    `inputs`: run on these tensors instead of the example inputs (e.g. ``loaded.alt_inputs``:
    other sizes for a module built with symbolic dims); torch runs on the same tensors.

    `params` (name -> array) supplies extra main parameters when the module keeps the weights as
    inputs (``keep_params_as_input=True``); they are appended in main's parameter order.
    `match_threads`: run torch with as many threads as TVM's runtime uses while timing (restored
    afterwards), so the two figures compare like with like; on a loaded 2-core machine torch's
    default 2-thread pool can cost ~20 ms even for a tiny MLP.  False: torch keeps its own setting.
    `program`: the captured ExportedProgram, read when the outputs differ to tell a random op or
    an order-dependent write (RunResult.not_comparable) from a genuine mismatch.
    Raises RunError (VM creation, the call itself, output count/shape mismatch, bad inputs).
    """
    import torch  # lazy: an IR file builds and runs without loading torch

    repeats = max(1, int(repeats))
    dev = device or tvm.cpu()
    # copies: a model that mutates its inputs must not change the caller's tensors, nor give the
    # reference and TVM inputs that an earlier run left mutated
    example = nondeterminism.fresh(inputs if inputs is not None else loaded.example_inputs)
    # python scalars in example_inputs were specialised into the graph by torch.export
    inputs = [x for x in example if not isinstance(x, (int, float, bool, str))]
    param_names = _main_params(build_result.mod)
    if param_names is not None and len(param_names) != len(inputs):
        extra = param_names[len(inputs):]
        if len(param_names) > len(inputs) and params:
            missing = [n for n in extra if n not in params]
            if missing:
                raise RunError(
                    f"main takes {len(param_names)} parameters but the model has {len(inputs)} "
                    f"example inputs; no value for {', '.join(missing[:5])}",
                    "pass params= with a value for each weight main takes as an input.")
            inputs = inputs + [params[n] for n in extra]
        elif len(param_names) > len(inputs):
            shown = ", ".join(extra[:5]) + (", ..." if len(extra) > 5 else "")
            raise RunError(
                f"main takes {len(param_names)} parameters but the model has only {len(inputs)} "
                f"example inputs (the extra ones look like weights: {shown})",
                "the module keeps parameters as inputs (keep_params_as_input=True): pass params=, "
                "or bind them (BindParams) / import without keep_params_as_input.")
        else:
            raise RunError(
                f"main takes {len(param_names)} parameters but the model has {len(inputs)} example inputs",
                "the module does not match this model: build a step from the same session.")
    try:
        tvm_inputs = [_to_tvm(x, dev) for x in inputs]
    except Exception as exc:
        raise RunError(f"could not convert the example inputs to TVM tensors: {tvm_error_text(exc)}",
                       "inputs must be torch tensors with a dtype numpy knows.", detail=traceback_text(exc)) from exc

    # --- torch reference, then torch timed in a block before TVM's and another after it; the faster
    # block is the figure. In one process, with no other process running, torch read slower once
    # TVM's kernels had run on one model (hf_bert sample: 1.5 ms before the first TVM call, 2.1-2.9 ms
    # after) and right after the build on another (MLP sample: 0.074 ms against 0.041 ms alone);
    # either only adds time, and each slowed one of the two blocks, not both.
    try:
        with torch.no_grad():
            ref_out = loaded.module(*nondeterminism.fresh(example))
    except Exception as exc:
        raise RunError(f"PyTorch failed on the example inputs: {exc}",
                       "the model itself does not run with its example inputs.",
                       detail=traceback_text(exc)) from exc
    n_tvm = tvm_threads()
    used_torch_threads = n_tvm if match_threads and n_tvm > 0 else torch.get_num_threads()
    torch_before = _time_torch(loaded, example, repeats, used_torch_threads)

    # --- TVM
    try:
        vm = relax.VirtualMachine(build_result.executable, dev)
        main = _synced(vm["main"], dev)
    except Exception as exc:
        msg = tvm_error_text(exc)
        raise RunError(f"could not load the compiled module: {msg}", _run_hint(msg),
                       detail=traceback_text(exc)) from exc
    try:
        tvm_out = main(*tvm_inputs)
    except Exception as exc:
        msg = tvm_error_text(exc)
        raise RunError(f"running main failed: {msg}", _run_hint(msg),
                       detail=traceback_text(exc)) from exc

    per_output = _compare_outputs(
        tvm_out, ref_out, "PyTorch",
        count_hint="the step changed what main returns; outputs are compared in order after "
                   "flattening tuples on both sides.",
        shape_hint="the step changed an output's shape.")
    not_comparable = None
    if not all(o["allclose"] for o in per_output):
        not_comparable = nondeterminism.explain(loaded.module, example,
                                                program if program is not None else loaded.exported)

    # --- TVM and torch in alternating blocks of their own (see timing.py for why not call by call);
    # more rounds while a block was competed with, and each figure is its best clean block
    tvm_blocks, torch_blocks = [], [torch_before]
    t_start, rounds = time.perf_counter(), 0
    while rounds < MAX_ROUNDS:
        rounds += 1
        try:
            tvm_blocks.append(time_alone(lambda: main(*tvm_inputs), repeats, warmup=1))
        except Exception as exc:
            msg = tvm_error_text(exc)
            raise RunError(f"a timed run failed: {msg}", _run_hint(msg),
                           detail=traceback_text(exc)) from exc
        torch_blocks.append(_time_torch(loaded, example, repeats, used_torch_threads))
        tvm_timing, torch_timing = best(tvm_blocks, n_tvm), best(torch_blocks, used_torch_threads)
        clean = contention(tvm_timing, n_tvm) is None and contention(torch_timing, used_torch_threads) is None
        if clean or time.perf_counter() - t_start > MAX_EXTRA_SECONDS:
            break
    reliable, reason = judge({"TVM": tvm_timing, "PyTorch": torch_timing}, n_tvm)
    if not reliable:
        reason += f" (after {rounds} round{'s' if rounds > 1 else ''} of blocks)"

    kt = _kernel_times(build_result, dev, tvm_inputs, repeats=repeats, model_ms=tvm_timing.median_ms)

    rtol = max((o.get("rtol", 0.0) for o in per_output), default=1e-4)
    atol = max((o.get("atol", 0.0) for o in per_output), default=1e-4)
    return RunResult(
        max_abs_error=max((o["max_abs"] for o in per_output), default=0.0),
        max_rel_error=max((o["max_rel"] for o in per_output), default=0.0),
        allclose=all(o["allclose"] for o in per_output),
        outputs=len(per_output),
        tvm_ms=tvm_timing.median_ms,
        torch_ms=torch_timing.median_ms,
        kernels=kt.kernels,
        kernels_reliable=kt.reliable,
        kernels_reason=kt.reason,
        kernels_timing=kt.timing,
        threads=n_tvm,
        torch_threads=used_torch_threads,
        repeats=repeats,
        rtol=rtol,
        atol=atol,
        per_output=per_output,
        tvm_timing=tvm_timing.as_dict(),
        torch_timing=torch_timing.as_dict(),
        not_comparable=not_comparable,
        reliable=reliable,
        reason=reason,
    )


def _time_torch(loaded, example, repeats: int, threads: int):
    """Torch eager timed alone on `threads` threads; the caller's thread count is restored."""
    import torch

    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.no_grad():
            return time_alone(lambda: loaded.module(*example), repeats)
    except Exception as exc:
        raise RunError(f"a timed PyTorch run failed: {exc}",
                       "the model ran once on the example inputs but failed when run again with them.",
                       detail=traceback_text(exc)) from exc
    finally:
        torch.set_num_threads(saved)


def _kernel_times(build_result: BuildResult, dev, tvm_inputs, *, repeats: int, model_ms: float | None,
                  func: str = "main") -> KernelTimes:
    """Per-kernel times of `func`, checked against its time per run (kernel_times.time_kernels)."""
    try:
        return time_kernels(build_result, dev, tvm_inputs, model_ms=model_ms, repeats=repeats,
                            func=func, threads=tvm_threads())
    except Exception as exc:
        msg = tvm_error_text(exc)
        raise RunError(f"an instrumented run failed: {msg}", _run_hint(msg),
                       detail=traceback_text(exc)) from exc


def failing_call(build_result: BuildResult, dev, func: str, tvm_inputs) -> str | None:
    """The kernel or extern function a failing run of `func` was inside, found by running it once
    more with an instrument (the error itself often names neither, e.g. a Python function
    registered with tvm.register_global_func that raises). None when the run fails outside any
    call, or does not fail again."""
    open_calls: list[str] = []

    def instrument(f, func_symbol, before_run, ret_value, *args):
        if before_run:
            open_calls.append(str(func_symbol))
        elif open_calls:
            open_calls.pop()
        return relax.VMInstrumentReturnKind.NO_OP

    try:
        vm = relax.VirtualMachine(build_result.executable, dev)
        vm.set_instrument(tvm_ffi.convert(instrument))
        vm[func](*tvm_inputs)
    except Exception:  # failing again is what is expected here
        inner = [c for c in open_calls if not c.startswith("vm.builtin.")]
        return inner[-1] if inner else None
    return None


def _exception_text(exc) -> str:
    msg = tvm_error_text(exc)
    name = type(exc).__name__
    # TVM's own errors carry their kind in the text already; a Python exception from a registered
    # function would otherwise lose its type (ValueError, KeyError, ...)
    return msg if name in ("TVMError", "InternalError") or msg.startswith(name) else f"{name}: {msg}"


def _callee_hint(callee: str, msg: str) -> str:
    # kernels compiled into the module are not global functions; a registered extern is
    if tvm.get_global_func(callee, allow_missing=True) is not None:
        return (f"{callee} is a function registered in Python (tvm.register_global_func) and "
                "called through call_dps_packed: run it on its own with these inputs to see the error")
    return _run_hint(msg)


def run_without_reference(build_result, repeats: int = 10, device=None) -> RunResult:
    """Time main on random inputs; errors are NaN and allclose is None (no reference)."""
    return run_module(build_result, random_inputs(build_result.mod), repeats=repeats, device=device)


def run_module(build_result, inputs, *, reference=None, func: str = "main",
               repeats: int = 10, device=None) -> RunResult:
    """Run `func` of a build on `inputs` (arrays, torch or TVM tensors) and time it on `device`
    (None: the CPU). `reference`: the expected output(s), compared as for a torch model; without
    it the errors are NaN and allclose is None (nothing to compare with, never a pass)."""
    dev = device or tvm.cpu()
    repeats = max(1, int(repeats))
    try:
        tvm_inputs = [_to_tvm(x, dev) if not isinstance(x, tvm.runtime.Tensor) else
                      x if x.device == dev else x.copyto(dev) for x in inputs]
    except Exception as exc:
        raise RunError(f"could not convert the inputs to TVM tensors: {tvm_error_text(exc)}",
                       "inputs must be numpy arrays, torch tensors or TVM tensors",
                       detail=traceback_text(exc)) from exc
    try:
        fn = _synced(relax.VirtualMachine(build_result.executable, dev)[func], dev)
        out = fn(*tvm_inputs)
        tvm_timing = time_alone(lambda: fn(*tvm_inputs), repeats, warmup=0, settle=0)
    except Exception as exc:
        msg = tvm_error_text(exc)
        callee = failing_call(build_result, dev, func, tvm_inputs)
        if callee is not None:
            raise RunError(f"running {func} failed in {callee}: {_exception_text(exc)}",
                           _callee_hint(callee, msg),
                           detail=traceback_text(exc)) from exc
        raise RunError(f"running {func} failed: {msg}", _run_hint(msg),
                       detail=traceback_text(exc)) from exc
    kt = _kernel_times(build_result, dev, tvm_inputs, repeats=repeats, model_ms=tvm_timing.median_ms, func=func)
    per_output = []
    if reference is not None:
        per_output = _compare_outputs(
            out, reference, "reference()",
            count_hint="outputs are compared in order after flattening tuples on both sides",
            shape_hint="reference() must return what the function returns")
    nan = float("nan")
    return RunResult(
        max_abs_error=max((o["max_abs"] for o in per_output), default=nan),
        max_rel_error=max((o["max_rel"] for o in per_output), default=nan),
        allclose=all(o["allclose"] for o in per_output) if per_output else None,
        outputs=len(per_output), tvm_ms=tvm_timing.median_ms, torch_ms=nan, tvm_timing=tvm_timing.as_dict(),
        reliable=(judged := judge({"TVM": tvm_timing}, tvm_threads()))[0], reason=judged[1],
        kernels=kt.kernels, kernels_reliable=kt.reliable, kernels_reason=kt.reason, kernels_timing=kt.timing,
        threads=tvm_threads(), repeats=repeats, per_output=per_output, func=func,
    )


def run_built(built: BuildResult, loaded=None, *, repeats: int = 10, inputs=None,
              params: dict | None = None, program=None, device=None) -> RunResult:
    """Run a build: against PyTorch when `loaded` (a LoadedModel) is given, else on random inputs
    without a reference. `inputs` replaces the example inputs (only with `loaded`); `params`: the
    weights main still takes as parameters; `program`: the captured ExportedProgram (see
    run_and_compare); `device`: where the build's code runs (None: the CPU)."""
    if loaded is None:
        return run_without_reference(built, repeats=repeats, device=device)
    if getattr(loaded, "structure_only", False):
        from irviz.core.frontend.structure_only import needs_weights

        raise RunError(needs_weights("a run"), "build (compile only), memory, diffs and queries "
                       "work without weights")
    return run_and_compare(built, loaded, repeats=repeats, inputs=inputs, params=params, program=program,
                           device=device)


def build_and_run(mod, loaded=None, *, repeats: int = 10, inputs=None, target=None,
                  on_built: Callable[[BuildResult], None] | None = None, params: dict | None = None,
                  ) -> tuple[BuildResult, RunResult]:
    """Build `mod`, then `run_built`. `on_built(build_result)` is called between the two, e.g. to
    report progress. Raises BuildError or RunError, whose ``stage`` says which half failed."""
    built = build_mod.build(mod, target)
    if on_built is not None:
        on_built(built)
    return built, run_built(built, loaded, repeats=repeats, inputs=inputs, params=params)
