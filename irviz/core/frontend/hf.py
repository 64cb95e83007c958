"""Wrappers that make `transformers` models export and import cleanly (the optional `hf` extra).

Model files (see ``irviz/samples/hf_*.py``) build a model from a small config with random weights
(never ``from_pretrained``: irviz needs no network) and wrap it so ``forward`` takes tensors only and
returns one tensor:

    from irviz.core.frontend import hf
    transformers = hf.require_transformers()
    cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=256)
    model = hf.causal_lm(transformers.GPT2LMHeadModel, cfg)     # forward(input_ids) -> logits
    return model, (hf.token_ids(cfg.vocab_size, seq=16),)

What the wrappers choose, and why (transformers 5.x, torch 2.13, TVM 0.27):

* ``use_cache=False``: with the cache on, the decoder's ``DynamicCache`` starts from an empty
  1-D tensor and ``torch.cat``-s it with the 4-D keys/values; Relax's concat rejects operands of
  different rank.  irviz's import layer also fixes that cat (``irviz.core.frontend.converters``), so a
  user's own decoder with a cache imports too; the wrapper just keeps the graph smaller.
* ``attn_implementation="eager"``: "sdpa" (transformers' default) and "eager" both import and
  match, but irviz decomposes the exported program before showing it, and that turns SDPA into
  plain matmul/softmax ops plus mask handling anyway: eager gives the smaller graph (tiny GPT-2:
  204 FX nodes vs 223, Llama 292 vs 311).  Pass ``attn_implementation="sdpa"`` (or None for
  transformers' choice) to compare.
* ``return_dict=True`` and picking one field (``logits`` / ``last_hidden_state`` /
  ``pooler_output``) so the exported program returns a single tensor, not a ModelOutput.
* eval mode (dropout off), a fixed seed for weights and inputs.
"""
from __future__ import annotations

import torch
from torch import nn

from irviz.core.errors import LoadError

INSTALL_HINT = "pip install 'irviz[hf]'  (installs transformers)"
DEFAULT_ATTN = "eager"


def require_transformers():
    """The transformers module, or LoadError saying how to install it."""
    try:
        import transformers
    except ImportError as e:
        raise LoadError(
            f"This model needs the transformers library, which is not installed ({e}); "
            f"install it with: {INSTALL_HINT}",
            hint=f"{INSTALL_HINT}, then load the model again.",
        ) from None
    return transformers


def available() -> bool:
    try:
        import transformers  # noqa: F401 - only whether it imports
    except ImportError:
        return False
    return True


def _set_attn(config, attn_implementation: str | None):
    if attn_implementation:
        try:
            config._attn_implementation = attn_implementation  # transformers' own knob
        except Exception:  # older configs: the from_config kwarg does it
            pass
    return config


def build(model_cls, config, *, seed: int = 0, attn_implementation: str | None = DEFAULT_ATTN):
    """model_cls(config) with random weights from `seed`, in eval mode."""
    _set_attn(config, attn_implementation)
    torch.manual_seed(seed)
    model = model_cls(config)
    return model.eval()


class CausalLM(nn.Module):
    """forward(input_ids) -> logits (batch, seq, vocab), without the KV cache."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        out = self.model(input_ids=input_ids, use_cache=False, return_dict=True)
        return out.logits


class Encoder(nn.Module):
    """forward(*inputs) -> one field of the model's output (last_hidden_state by default).

    `names` are the keyword names of the inputs, in order (e.g. ("input_ids", "attention_mask")).
    """

    def __init__(self, model: nn.Module, names=("input_ids",), field: str = "last_hidden_state"):
        super().__init__()
        self.model = model
        self.names = tuple(names)
        self.field = field

    def forward(self, *inputs):
        kwargs = dict(zip(self.names, inputs))
        out = self.model(**kwargs, return_dict=True)
        return getattr(out, self.field)


def causal_lm(model_cls, config, *, seed: int = 0, attn_implementation: str | None = DEFAULT_ATTN):
    """Wrapped decoder LM: forward(input_ids) -> logits.  The config's cache is switched off too."""
    config.use_cache = False
    return CausalLM(build(model_cls, config, seed=seed, attn_implementation=attn_implementation)).eval()


def encoder(model_cls, config, *, names=("input_ids",), field: str = "last_hidden_state", seed: int = 0,
            attn_implementation: str | None = DEFAULT_ATTN):
    return Encoder(build(model_cls, config, seed=seed, attn_implementation=attn_implementation),
                   names=names, field=field).eval()


def token_ids(vocab_size: int, batch: int = 1, seq: int = 16, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab_size, (batch, seq), generator=g, dtype=torch.long)


def pixels(batch: int = 1, channels: int = 3, size: int = 32, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, channels, size, size, generator=g)
