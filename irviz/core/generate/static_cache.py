"""The torch side of generation: a causal LM whose static KV cache is explicit inputs and outputs.

transformers' own StaticCache writes its tensors in place (``index_copy_``) and keeps the number of
tokens seen in a tensor of its own, so an exported decode step would carry hidden state that TVM's
importer does not turn into outputs. Here the cache is a function argument instead:

    prefill(prompt_ids, k0, v0, ...)                 -> (last logits (1, 1, V), k0', v0', k1', v1', ...)
    decode(token (1, 1), position (1,), k0, v0, ...) -> (logits (1, 1, V), k0', v0', ...)

each k/v being (batch, kv_heads, max_len, head_dim); prefill takes the cache too (zeros), so that
both programs read max_len from the cache's shape and it can be a symbolic dimension
(`dynamic_shapes`): one built program then serves any max length. A layer writes its new keys
with a position mask (``torch.where``), which every importer converts, and attends over the
whole max_len with an additive mask that hides the positions not yet written; so the decode
program is the same program at every step.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from irviz.core.errors import LoadError


class NotACausalLM(LoadError):
    """The model is not a transformers causal LM that generates, or cannot run with a cache."""


@dataclass(frozen=True)
class CacheLayout:
    """The static KV cache: one key and one value tensor per layer, each of `shape`."""

    layers: int
    shape: tuple  # (batch, kv_heads, max_len, head_dim)
    dtype: torch.dtype

    @property
    def max_len(self) -> int:
        return int(self.shape[2])

    @property
    def tensors(self) -> int:
        return 2 * self.layers

    @property
    def bytes(self) -> int:
        n = 1
        for d in self.shape:
            n *= int(d)
        return n * self.tensors * torch.empty((), dtype=self.dtype).element_size()

    def bytes_at(self, context: int) -> int:
        """What the cache holds when `context` positions are filled (the memory a dynamic cache takes)."""
        return self.bytes * min(int(context), self.max_len) // self.max_len

    def zeros(self, device="cpu") -> list[torch.Tensor]:
        return [torch.zeros(self.shape, dtype=self.dtype, device=device) for _ in range(self.tensors)]

    def with_max_len(self, max_len: int) -> CacheLayout:
        b, h, _, d = self.shape
        return CacheLayout(self.layers, (b, h, int(max_len), d), self.dtype)


def find_causal_lm(module: nn.Module):
    """The transformers model that generates inside `module` (itself, or a wrapper's submodule such as
    irviz's hf.CausalLM); NotACausalLM naming what was looked for."""
    try:
        from transformers import PreTrainedModel
    except ImportError:
        raise NotACausalLM("generation needs the transformers library, which is not installed",
                           hint="pip install 'irviz[hf]'  (installs transformers)") from None
    seen = []
    for m in module.modules():
        if isinstance(m, PreTrainedModel):
            seen.append(type(m).__name__)
            if _generates(m):
                return m
    what = (f"the transformers models in it ({', '.join(seen)}) do not generate" if seen
            else f"get_model() returned a {type(module).__name__} with no transformers model in it")
    raise NotACausalLM(
        f"not a causal language model: looked for a transformers model with generate() and a KV "
        f"cache (an AutoModelForCausalLM class such as LlamaForCausalLM or GPT2LMHeadModel) in the "
        f"module and its submodules; {what}",
        hint="return a causal LM from get_model() (a *ForCausalLM / *LMHeadModel, or irviz's "
             "hf.causal_lm wrapper of one) with prompt token ids (1, S) as its input")


def _generates(m) -> bool:
    try:
        if not m.can_generate():
            return False
    except Exception:
        return False
    # encoder-decoder models generate too, but their decoder's cache is not this one
    return not getattr(m.config, "is_encoder_decoder", False)


def prompt_ids(example_inputs) -> torch.Tensor:
    """The prompt: the first example input, integer token ids of shape (1, S)."""
    ids = example_inputs[0] if isinstance(example_inputs, (tuple, list)) and example_inputs else None
    if not isinstance(ids, torch.Tensor) or ids.dtype not in (torch.int64, torch.int32) or ids.dim() != 2:
        got = (f"{tuple(ids.shape)} {ids.dtype}" if isinstance(ids, torch.Tensor) else type(ids).__name__)
        raise NotACausalLM(f"generation starts from prompt token ids (1, S) int64 as get_inputs()'s "
                           f"first input; got {got}",
                           hint="make the model file's first example input the prompt's token ids")
    if ids.shape[0] != 1:
        raise NotACausalLM(f"generation here is for one sequence; the prompt is {tuple(ids.shape)}",
                           hint="give a prompt of shape (1, S)")
    return ids.to(torch.int64)


def cache_layout(lm, prompt: torch.Tensor, max_len: int) -> CacheLayout:
    """Read the cache's per-layer shape from one forward pass with transformers' own cache (works on
    the meta device too), so no config field names are assumed."""
    try:
        with torch.no_grad():
            out = lm(input_ids=prompt[:, :1], use_cache=True, return_dict=True)
        cache = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
        layers = [(layer.keys, layer.values) for layer in cache.layers]
    except Exception as e:
        raise NotACausalLM(f"{type(lm).__name__} did not return a KV cache from a forward pass with "
                           f"use_cache=True: {type(e).__name__}: {e}",
                           hint="generation needs a decoder whose layers cache keys and values") from None
    k = layers[0][0]
    if any(tuple(kk.shape) != tuple(k.shape) or tuple(vv.shape) != tuple(k.shape) for kk, vv in layers):
        raise NotACausalLM(f"{type(lm).__name__}'s cache layers differ in shape (sliding windows, "
                           "shared layers or differing key and value widths): one static cache "
                           "layout cannot hold them", hint="use a decoder whose layers all cache the same shape")
    return CacheLayout(len(layers), (k.shape[0], k.shape[1], int(max_len), k.shape[3]), k.dtype)


class ExplicitLayer:
    """A cache layer over given tensors: `update` returns new tensors instead of writing in place."""

    is_compileable = True
    is_sliding = False
    is_initialized = True

    def __init__(self, keys, values, start, used=None):
        self.keys, self.values, self.start, self.used = keys, values, start, used
        self.max_cache_len = keys.shape[-2]

    def update(self, key_states, value_states, *args, **kwargs):
        L, n = self.keys.shape[-2], key_states.shape[-2]
        rel = torch.arange(L, device=key_states.device) - self.start
        written = ((rel >= 0) & (rel < n))[None, None, :, None]
        if n > 1:  # row j of the cache takes new row j - start
            src = rel.clamp(0, n - 1)
            key_states = key_states.index_select(2, src)
            value_states = value_states.index_select(2, src)
        self.keys = torch.where(written, key_states, self.keys)
        self.values = torch.where(written, value_states, self.values)
        if self.used is not None:  # attention reads the filled positions only
            return self.keys.narrow(2, 0, self.used), self.values.narrow(2, 0, self.used)
        return self.keys, self.values

    def get_mask_sizes(self, query_length=None, *args, **kwargs):
        return self.max_cache_len, 0

    def get_seq_length(self, *args, **kwargs):
        return self.start

    def get_max_length(self):
        return self.max_cache_len

    def get_max_cache_shape(self, *args, **kwargs):
        return self.max_cache_len


def _cache(layers):
    from transformers.cache_utils import Cache

    c = Cache.__new__(Cache)  # the base class's __init__ wants mixin layers; these only duck-type them
    c.layers, c.layer_class_to_replicate, c.offloading = layers, None, False
    return c


class _Step(nn.Module):
    def __init__(self, lm, layout: CacheLayout):
        super().__init__()
        self.lm = lm
        self.n_layers = layout.layers

    def step(self, ids, start, cache, used=None):
        n, L = ids.shape[1], cache[0].shape[2]  # from the cache: a symbolic size when it is one
        layers = [ExplicitLayer(cache[2 * i], cache[2 * i + 1], start, used) for i in range(self.n_layers)]
        pos = (torch.arange(n, device=ids.device) + start)[None]
        seen = torch.arange(L if used is None else used, device=ids.device)[None, :] <= pos[0][:, None]
        dtype = cache[0].dtype
        mask = torch.where(seen, torch.zeros((), dtype=dtype), torch.full((), torch.finfo(dtype).min, dtype=dtype))
        out = self.lm(input_ids=ids, attention_mask=mask[None, None], position_ids=pos, cache=_cache(layers),
                      use_cache=True, return_dict=True)
        flat = []
        for layer in layers:
            flat += [layer.keys, layer.values]
        return (out.logits[:, -1:, :], *flat)


class Prefill(_Step):
    """forward(prompt_ids (1, S), k0, v0, ... (zeros)) -> (last logits (1, 1, V), k0', v0', ...): the
    cache filled at 0..S-1. Called with the prompt alone (torch eager), it starts from zeros of the
    layout it was made with."""

    def __init__(self, lm, layout: CacheLayout):
        super().__init__(lm, layout)
        self.layout = layout

    def forward(self, ids, *cache):
        return self.step(ids, 0, cache or tuple(self.layout.zeros(ids.device)))


class Decode(_Step):
    """forward(token (1, 1), position (1,), k0, v0, ...) -> (logits (1, 1, V), k0', v0', ...).

    used_only: attention reads positions 0..position (a size read from the position's value, so
    its work grows with the context) instead of the whole cache under a mask."""

    def __init__(self, lm, layout: CacheLayout, used_only: bool = False):
        super().__init__(lm, layout)
        self.used_only = used_only

    def forward(self, token, position, *cache):
        if not self.used_only:
            return self.step(token, position, cache)
        p = position[0].item()
        torch._check(p >= 0)
        torch._check(p < cache[0].shape[2])  # so torch sizes the read part p + 1, in bounds
        return self.step(token, position, cache, used=p + 1)


def prefill_inputs(layout: CacheLayout, prompt: torch.Tensor) -> tuple:
    return (prompt, *layout.zeros(prompt.device))


def decode_inputs(layout: CacheLayout, position: int, device="cpu") -> tuple:
    return (torch.zeros((1, 1), dtype=torch.int64, device=device),
            torch.tensor([position], dtype=torch.int64, device=device), *layout.zeros(device))


CONTEXT_DIM = "max_len"  # the symbolic size's name in the Relax programs, as --max-len names it


def dynamic_shapes(name: str, layout: CacheLayout) -> tuple:
    """torch.export's dynamic_shapes for the program `name`: the cache's positions (axis 2 of every
    cache tensor) one symbolic dimension, the rest static. Its least value is 2: torch.export
    specialises sizes 0 and 1. It has no greatest value: TVM plans memory for a bounded size at its
    bound (a 2**24 bound made a real-width prefill's attention scores tens of GB, std::bad_alloc),
    and an unbounded one at the size it has when the program runs."""
    from torch.export import Dim

    ctx = Dim(CONTEXT_DIM, min=2)
    cache = tuple({2: ctx} for _ in range(layout.tensors))
    return (None, cache) if name == "prefill" else (None, None, cache)


def torch_reference(lm, prompt: torch.Tensor, tokens: int, with_logits: bool = False):
    """model.generate(do_sample=False): the `tokens` token ids after the prompt (and, with_logits,
    each step's raw logits (vocab,) as numpy). The end-of-text token does not stop it (nor is it
    suppressed): the compared runs go on for all `tokens` steps."""
    import copy

    config = copy.deepcopy(lm.generation_config)
    pad = config.pad_token_id if config.pad_token_id is not None else _first(config.eos_token_id)
    config.eos_token_id, config.pad_token_id = None, 0 if pad is None else pad
    config.do_sample, config.max_new_tokens, config.min_new_tokens = False, int(tokens), None
    config.use_cache, config.output_logits, config.return_dict_in_generate = True, with_logits, True
    with torch.no_grad():
        out = lm.generate(prompt, attention_mask=torch.ones_like(prompt), generation_config=config)
    ids = [int(t) for t in out.sequences[0, prompt.shape[1]:]]
    if not with_logits:
        return ids
    return ids, [step[0].float().numpy() for step in out.logits]


def _first(ids):
    return ids[0] if isinstance(ids, (list, tuple)) and ids else ids
