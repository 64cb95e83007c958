"""Prefill and decode as two irviz programs: captured, imported, stepped through a pipeline, built.

Both go the way a model file goes (torch.export, run_decompositions, TVM's exported-program importer
with irviz's converters, a Session whose pipeline applies pass by pass), with the weights kept as
parameters of main (as --keep-params does): the two programs then take the same weight tensors,
converted to TVM once, instead of each binding its own copy.

    progs = open_programs(module, example_inputs, spec="sample:hf_llama", max_len=64, pipeline="zero")
    progs.prefill.session, progs.decode.session   # step either, diff, view
    progs.build()                                 # BuildResult per program

The cache's length (the context length) is captured as a symbolic dimension (torch.export's Dim,
imported as a TVM shape variable), so one build serves any max length; max_len only gives the
example the capture runs on and the default length to generate with. Where the symbolic capture,
import or pipeline fails, both programs are captured again with the length a constant, and
`context_length` / `context_reason` say so.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

from irviz.core.errors import IrvizError
from irviz.core.generate import static_cache as sc

PROGRAMS = ("prefill", "decode")
SYMBOLIC = "symbolic"
USED = "used"


@dataclass
class Program:
    name: str  # "prefill" | "decode"
    loaded: object  # LoadedModel of the wrapper (Prefill / Decode)
    captured: object
    imported: object
    session: object
    built: object = None  # BuildResult once built
    inputs: int = 0  # how many of main's parameters are inputs (the rest are weights)
    lifted: bool = False  # built with the weights' transforms in main_transform_params
    # {index of a transformed weight: the prefill's output that is the same tensor}: decode's own
    # transform leaves those out (shared_packing)
    from_prefill: dict = field(default_factory=dict)

    def weight_names(self) -> list[str]:
        from irviz.core.tvm_compat import var_name

        return [var_name(p) for p in self.session.module()["main"].params][self.inputs:]


@dataclass
class Programs:
    lm: object  # the transformers model
    prompt: object  # torch (1, S) int64
    layout: sc.CacheLayout
    prefill: Program
    decode: Program
    target: object  # what plan() chose: a name (None: the host) or a core.target.Target
    structure_only: bool
    seconds: dict = field(default_factory=dict)  # stage -> seconds, both programs together
    log: list = field(default_factory=list)
    context_length: str | int = SYMBOLIC  # SYMBOLIC, or the constant the programs were captured with
    context_reason: str | None = None  # why the length is a constant, when it is one
    decode_reads: str = "all"  # USED: decode's attention reads positions 0..position; "all": the whole cache
    decode_reason: str | None = None  # why decode reads the whole cache, when it does

    @property
    def symbolic(self) -> bool:
        return self.context_length == SYMBOLIC

    def layout_for(self, max_len: int | None = None) -> sc.CacheLayout:
        """The cache of `max_len` positions (None: the one opened with); IrvizError where the programs
        were captured with another constant length, or the prompt leaves no room."""
        if max_len is None or int(max_len) == self.layout.max_len:
            return self.layout
        S = int(self.prompt.shape[1])
        if not self.symbolic:
            raise IrvizError(f"these programs were built for a cache of {self.layout.max_len} positions, "
                             f"not {int(max_len)}: the context length is a constant ({self.context_reason})",
                             hint=f"open the model for generation again with max_len {int(max_len)}")
        if int(max_len) <= S:
            raise IrvizError(f"a cache of {int(max_len)} positions leaves no room to generate after the "
                             f"{S}-token prompt", hint=f"give a max length above {S}")
        return self.layout.with_max_len(int(max_len))

    def position_dims(self, max_len: int | None = None) -> dict:
        """{size: value} for the size decode reads from the position's value (where it reads the filled
        positions only), at the last position of a cache of `max_len`: the most it reads."""
        from tvm import relax

        main = self.decode.session.module()["main"]
        free = {str(v) for v in relax.analysis.defined_symbolic_vars(main)} - set(self.dims())
        return {name: int(max_len or self.layout.max_len) - 1 for name in sorted(free)}

    def dims(self, max_len: int | None = None) -> dict:
        """{symbolic size: value} for the context length (empty where it is a constant): what an
        estimate or a build bound to one length takes."""
        from tvm import tirx

        if not self.symbolic:
            return {}
        d = self.decode.session.module()["main"].params[self.decode.inputs - 1].ty.shape.values[2]
        return {str(d): int(max_len or self.layout.max_len)} if isinstance(d, tirx.Var) else {}

    def program(self, name: str) -> Program:
        if name not in PROGRAMS:
            raise IrvizError(f"no program {name!r}", hint=f"choose one of {', '.join(PROGRAMS)}")
        return getattr(self, name)

    def params(self) -> dict:
        """main's weight parameters by name (numpy), shared by both programs."""
        return dict(self.prefill.imported.params or {})

    def build(self):
        """Both programs built. What a program computes from its weights alone (the re-layouts the
        CPU schedules put on a weight, CPUPrepackWeights' kernels) is lifted into its
        `main_transform_params`, run once before generating, not at every token."""
        from irviz.core.backend.build import build

        from irviz.core.generate.shared_packing import share_transforms

        t = time.perf_counter()
        if self.prefill.built is None and self.decode.from_prefill:
            self.decode.built = None  # it takes tensors of the prefill about to change
        for p in (self.prefill, self.decode):
            if p.built is None:
                mod, p.lifted = lift_weight_transforms(p.session.module(), p.inputs)
                p.from_prefill = {}
                if p is self.decode and p.lifted and self.prefill.lifted:
                    mod, p.from_prefill = share_transforms(self.prefill.built.mod, self.prefill.weight_names(),
                                                           mod, p.weight_names())
                p.built = build(mod, tvm_target(self.target))
        self.seconds["build"] = time.perf_counter() - t
        return self.prefill.built, self.decode.built


TRANSFORM_PARAMS = "main_transform_params"


def lift_weight_transforms(mod, inputs: int):
    """(module, lifted): with main's weight-only computations moved into TRANSFORM_PARAMS (TVM's
    LiftTransformParams) when there are any; else `mod` unchanged and lifted False."""
    import tvm
    from tvm import relax

    if len(mod["main"].params) <= inputs:
        return mod, False
    copy = tvm.IRModule(dict(mod.functions), attrs=mod.attrs)
    copy["main"] = mod["main"].with_attr("num_input", inputs)
    try:
        lifted = relax.transform.LiftTransformParams()(copy)
    except Exception:  # a module it cannot take still builds, transforming its weights at each call
        return mod, False
    if TRANSFORM_PARAMS not in [g.name_hint for g in lifted.get_global_vars()] or \
            not _computes(lifted[TRANSFORM_PARAMS]):
        return mod, False
    return lifted, True


def _computes(func) -> bool:
    """Whether a Relax function calls anything (a transform that only passes its weights on does not)."""
    from tvm import relax

    body = func.body
    blocks = body.blocks if isinstance(body, relax.SeqExpr) else []
    return any(isinstance(b.value, relax.Call) for block in blocks for b in block.bindings)


def _loaded(module, inputs, spec: str, name: str, structure_only: bool, dynamic_shapes=None):
    from irviz.core.frontend.model_file import LoadedModel

    return LoadedModel(module=module.eval(), example_inputs=tuple(inputs), spec=f"{spec} ({name})",
                       name=name, structure_only=structure_only, dynamic_shapes=dynamic_shapes)


def _capture_one(loaded, what: str):
    from irviz.core.errors import CaptureError
    from irviz.core.frontend.capture import capture

    try:
        return capture(loaded)
    except CaptureError as e:
        raise sc.NotACausalLM(
            f"torch.export could not capture the {what} with an explicit static KV cache: "
            f"{e.message}", hint=e.hint, detail=getattr(e, "detail", None)) from None


def open_programs(module, example_inputs, *, spec: str = "model", max_len: int | None = None, tokens: int = 32,
                  pipeline="zero", target: str | None = None, structure_only: bool = False,
                  log=None, symbolic: bool = True) -> Programs:
    """Both programs of the causal LM in `module` (see static_cache), imported and through `pipeline`.
    max_len: the static cache's positions (None: the prompt plus `tokens`). symbolic: the cache's
    length a symbolic size (see the module doc), else the constant max_len. NotACausalLM,
    CaptureError, IRImportError or PassError on failure, each naming the program."""
    from irviz.core.passes.plan import plan

    say = log or (lambda _line: None)
    chosen = plan(pipeline, target)
    lm = sc.find_causal_lm(module)
    prompt = sc.prompt_ids(example_inputs)
    S = int(prompt.shape[1])
    L = int(max_len) if max_len else S + int(tokens)
    if L <= S:
        raise sc.NotACausalLM(f"--max-len {L} leaves no room to generate after the {S}-token prompt",
                              hint=f"give --max-len above {S} (the prompt plus the tokens to generate)")
    layout = sc.cache_layout(lm, prompt, L)
    seconds = {"capture": 0.0, "import": 0.0, "passes": 0.0}
    reason = None
    opened = lambda symbolic: _open_both(lm, prompt, layout, spec, chosen, structure_only, seconds, say, symbolic)
    if symbolic:
        try:
            progs, lines, reads = opened(True)
        except IrvizError as e:
            reason = f"the symbolic context length failed: {e.message}"
            say(f"context  a constant {L} positions ({reason})")
    else:
        reason = "a constant was asked for"
    if reason is not None:
        progs, lines, reads = opened(False)
    return Programs(lm=lm, prompt=prompt, layout=layout, prefill=progs["prefill"], decode=progs["decode"],
                    target=chosen.target, structure_only=structure_only, seconds=seconds, log=lines,
                    context_length=SYMBOLIC if reason is None else L, context_reason=reason,
                    decode_reads=USED if reads is None else "all", decode_reason=reads)


def _open_both(lm, prompt, layout, spec, chosen, structure_only, seconds, say, symbolic: bool):
    """({name: Program}, log lines, None where decode reads only the filled positions, else why not).
    With a symbolic length, decode is first captured reading positions 0..position only (a size
    from the position's value); where that fails, reading the whole cache under a mask."""
    S = int(prompt.shape[1])
    progs, lines = {}, []
    one = lambda name, wrapper, inputs, convert=None: _open_one(
        name, wrapper, inputs, spec, chosen, structure_only, seconds, symbolic, S, layout, convert)
    progs["prefill"] = one("prefill", sc.Prefill(lm, layout), sc.prefill_inputs(layout, prompt))
    from irviz.core.generate.shared_packing import decode_passes

    # decode packs a weight as the prefill does, so the two programs hold one packed copy of it
    chosen = dataclasses.replace(chosen, passes=decode_passes(chosen.passes, progs["prefill"]))
    inputs = sc.decode_inputs(layout, S, prompt.device)
    reads = "the context length is a constant"
    if symbolic:
        from irviz.core.generate.inbound_slice import CONVERTERS

        try:
            progs["decode"] = one("decode", sc.Decode(lm, layout, used_only=True), inputs, CONVERTERS)
            reads = None
        except IrvizError as e:
            reads = f"reading positions 0..position only failed: {e.message}"
            say(f"decode   reads the whole cache ({reads})")
    if reads is not None:
        progs["decode"] = one("decode", sc.Decode(lm, layout), inputs)
    for p in progs.values():
        lines.append(f"{p.name:8s} {len(p.captured.graph.nodes)} FX nodes, {len(p.session.steps) - 1} passes")
        say(lines[-1])
    return progs, lines, reads


def _open_one(name, wrapper, inputs, spec, chosen, structure_only, seconds, symbolic, S, layout, convert):
    from irviz.core.frontend.importer import import_model
    from irviz.core.session import Session

    dynamic = sc.dynamic_shapes(name, layout) if symbolic else None
    loaded = _loaded(wrapper, inputs, spec, name, structure_only, dynamic)
    t = time.perf_counter()
    captured = _capture_one(loaded, f"{name} step ({_signature(name, S, layout, symbolic)})")
    seconds["capture"] += time.perf_counter() - t
    imported = import_model(captured, custom_convert_map=convert, keep_params=True, structure_only=structure_only)
    seconds["import"] += imported.seconds
    session = Session(imported, captured)
    if tvm_target(chosen.target) is not None:
        session.target = tvm_target(chosen.target)
    session.set_pipeline(list(chosen.passes))
    t = time.perf_counter()
    if session.run_to_end() is None:
        err = session.error
        raise type(err)(f"{name}: {err.message}", hint=err.hint, detail=err.detail)
    seconds["passes"] += time.perf_counter() - t
    return Program(name, loaded, captured, imported, session, inputs=len(inputs))


def tvm_target(chosen):
    """The tvm Target passes and builds take for what plan() chose (None: the host)."""
    if chosen is None:
        return None
    if hasattr(chosen, "for_passes"):
        return chosen.for_passes
    from irviz.core.target import Target

    return Target.of(chosen).for_passes


def target_name(chosen) -> str:
    """The target as the JSON stamp names it: "host" or the user's name for it."""
    name = getattr(chosen, "name", chosen)
    return name or "host"


def _signature(name: str, S: int, layout: sc.CacheLayout, symbolic: bool = False) -> str:
    each = list(layout.shape)
    if symbolic:
        each[2] = sc.CONTEXT_DIM
    cache = f"{layout.tensors} cache tensors ({', '.join(map(str, each))})"
    if name == "prefill":
        return f"prompt (1, {S}), {cache} -> logits, the cache filled"
    return f"token (1, 1), position (1,), {cache} -> logits, the cache updated"
