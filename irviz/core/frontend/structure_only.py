"""Open a model without its weights: the module on the meta device, the import with every weight,
buffer and constant a typed parameter of main that has no data.

Nothing about the graph, the passes, the TensorIR or the memory plan needs the weights' values;
only a run does. A float32 8B-parameter model is 32 GB: with `--no-weights` irviz calls the model
file's `get_model()` under ``torch.device("meta")`` so no weight is ever allocated, turns the
example inputs into meta tensors of the same shapes and dtypes, and torch.export captures on them.
A model file that builds its module on the meta device itself is opened the same way without the
flag.

TVM's importer binds buffers and constants (and, with ``keep_params_as_input``, converts every
parameter too) through DLPack: a meta tensor has no data to convert. The import here hands TVM's
binding step a program with nothing to bind, so every non-user input stays a parameter of main
(after the user inputs; main's ``num_input`` attribute says how many are user inputs).
"""
from __future__ import annotations

from contextlib import contextmanager

import torch

STRUCTURE_ONLY = "structure only: no weights to run with"


class NoWeightsError(Exception):
    """A request that needs the weights' values on a structure-only model."""


def check_frontend(capture: str, importer: str) -> None:
    """IRImportError unless the model is captured with torch.export and imported with TVM's
    exported_program importer: the course's importers make every weight a constant, which needs
    its values."""
    if capture != "export" or importer != "exported_program":
        from irviz.core.errors import IRImportError

        raise IRImportError(
            "a model without weights (--no-weights, or built on the meta device) is imported with "
            "torch.export and TVM's exported_program importer only: the course's importers make "
            "every weight a constant, which needs its values",
            hint="use --capture export --importer exported_program (the defaults), or open the model "
                 "with its weights")


def needs_weights(what: str) -> str:
    """The message for `what` (e.g. "run") on a structure-only model: what it would need."""
    return (f"{STRUCTURE_ONLY}: {what} needs the weights' values; open the model without "
            "--no-weights (and with a get_model() that does not build on the meta device) to run it")


@contextmanager
def on_meta_device():
    """Tensors and modules made inside are on the meta device (shape and dtype, no storage)."""
    with torch.device("meta"):
        yield


def has_meta_tensors(module: torch.nn.Module) -> bool:
    """True when any parameter or buffer of `module` is a meta tensor (it cannot run)."""
    return any(t.is_meta for t in _tensors(module))


def _tensors(module):
    yield from module.parameters()
    yield from module.buffers()


def to_meta(module: torch.nn.Module) -> torch.nn.Module:
    """`module` with every parameter and buffer on the meta device (those already there stay)."""
    if any(not t.is_meta for t in _tensors(module)):
        module.to("meta")
    return module


def meta_inputs(inputs) -> tuple:
    """The example inputs as meta tensors of the same shapes and dtypes (token ids stay integer)."""
    return tuple(t if t.is_meta else torch.empty(t.shape, dtype=t.dtype, device="meta")
                 for t in inputs)


def weight_summary(module: torch.nn.Module) -> dict:
    """{"parameters": count, "elements": total, "bytes": total, "dtypes": {dtype: bytes}} of the
    module's parameters and buffers, from their shapes and dtypes (no data needed)."""
    count = elements = nbytes = 0
    dtypes: dict[str, int] = {}
    seen = set()
    for t in _tensors(module):
        if id(t) in seen:  # tied weights (an LM head sharing the embedding) count once
            continue
        seen.add(id(t))
        n = t.numel() * t.element_size()
        count, elements, nbytes = count + 1, elements + t.numel(), nbytes + n
        name = str(t.dtype).replace("torch.", "")
        dtypes[name] = dtypes.get(name, 0) + n
    return {"parameters": count, "elements": elements, "bytes": nbytes, "dtypes": dtypes}


def format_bytes(n: int) -> str:
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


# --------------------------------------------------------------------------------------------
# the import


class _NothingToBind:
    """An ExportedProgram as TVM's binding step after the translation sees it: no buffers,
    constants or parameters. Everything else is the program's own."""

    def __init__(self, ep):
        self.program = ep

    def __getattr__(self, name):
        return getattr(self.program, name)

    def named_buffers(self):
        return iter(())

    def named_parameters(self):
        return iter(())

    @property
    def constants(self):
        return {}


def structure_only_importer(base):
    """A subclass of the importer class `base` that translates without binding any tensor."""

    class _StructureOnly(base):
        def create_input_vars(self, exported_program):
            # the types of the weights come from the real program (shapes and dtypes only)
            return super().create_input_vars(getattr(exported_program, "program", exported_program))

        def _convert_pytorch_tensor_to_tvm(self, tensor_value):
            if tensor_value.is_meta:
                raise NoWeightsError(f"{STRUCTURE_ONLY}: the import needs the values of a "
                                     f"{tuple(tensor_value.shape)} tensor")
            return super()._convert_pytorch_tensor_to_tvm(tensor_value)

    return _StructureOnly


def translate(imp, ep, custom_convert_map):
    """`imp.from_exported_program` with weights, buffers and constants left as main's parameters
    (no data read); TVM's empty "params" attribute is dropped."""
    import tvm

    mod = imp.from_exported_program(_NothingToBind(ep), True, True, False, custom_convert_map)
    main = mod["main"]
    if main.attrs is not None and "params" in main.attrs:
        out = tvm.IRModule(dict(mod.functions), attrs=mod.attrs)
        out["main"] = main.without_attr("params")
        mod = out
    return mod


# --------------------------------------------------------------------------------------------
# the loaded model


def without_weights(module, inputs, asked: bool):
    """(module, inputs, note) for a model opened without weights: asked (--no-weights), or built
    on the meta device by its file. None when the model keeps its weights."""
    if not asked and not has_meta_tensors(module):
        return None
    size = weight_summary(module)
    to_meta(module)
    why = "--no-weights" if asked else "the model file builds it on the meta device"
    note = (f"structure only ({why}): {size['parameters']} weight tensors, "
            f"{format_bytes(size['bytes'])} ({', '.join(size['dtypes']) or 'none'}), never allocated; "
            "main takes them as parameters with no data")
    return module, meta_inputs(inputs), note


# --------------------------------------------------------------------------------------------
# a model too big for this machine, opened with its weights


class TooBigError(Exception):
    def __init__(self, allocated: int, budget: int):
        super().__init__(f"get_model() allocated {format_bytes(allocated)}")
        self.allocated, self.budget = allocated, budget


def memory_budget() -> int | None:
    """Bytes get_model() may allocate before irviz stops it: most of what the machine has
    available now (weights are copied again by the import and the build). None where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024 * 6 // 10
    except OSError:
        return None
    return None


# the ops that make new tensors from nothing: where a model's weights come from
_FACTORIES = {"empty.memory_format", "empty_strided.default", "zeros.default", "ones.default",
              "full.default", "rand.default", "randn.default", "randint.low", "randint.default"}


@contextmanager
def allocation_guard(budget: int | None):
    """Count the bytes of the tensors made from nothing inside; TooBigError before the one that
    would take them past `budget`, so a model that cannot fit stops before the machine swaps."""
    if budget is None:
        yield
        return
    from torch.utils._python_dispatch import TorchDispatchMode

    total = [0]

    class _Guard(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func._overloadpacket.__name__ + "." + func._overloadname in _FACTORIES \
                    and kwargs.get("device") not in (torch.device("meta"), "meta"):
                size = next((a for a in args if isinstance(a, (list, tuple, torch.Size))),
                            kwargs.get("size", ()))
                dtype = kwargs.get("dtype") or torch.get_default_dtype()
                n = 1
                for d in size:
                    n *= int(d)
                total[0] += n * torch.empty((), dtype=dtype, device="meta").element_size()
                if total[0] > budget:
                    raise TooBigError(total[0], budget)
            return func(*args, **kwargs)

    with _Guard():
        yield


def too_big_message(exc: TooBigError, factory: str, shown: str) -> tuple[str, str]:
    """(message, hint) for a LoadError."""
    return (f"{factory}() in {shown} allocated more than {format_bytes(exc.budget)} of tensors "
            f"({format_bytes(exc.allocated)} so far), about what this machine can spare: stopped "
            "before it starts swapping",
            "open it with --no-weights (the Open dialog's Structure only): every pass, diff, the "
            "memory plan and the build work without the weights; or use a smaller config")
