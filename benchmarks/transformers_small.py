"""How benchmarks/transformers_corpus.py builds one transformers model type at a small size: its
config shrunk with the sizes that derive from one another kept consistent, random weights from a
fixed seed, example inputs made from the config, one eager forward; or the reason it cannot."""
from __future__ import annotations

import hashlib
import inspect
import re
from pathlib import Path

import transformers_patches as patches

SEQ, IMAGE, AUDIO = 16, 32, 1600
FULL_IMAGE = 224  # the largest image the recipe makes when a network needs its own size
INPUTS = ("input_ids", "pixel_values", "input_values", "input_features", "past_values")
SPECIAL_IDS = 16  # out-of-vocabulary special token ids move to the vocabulary's last 16 ids

# config attribute -> small value (set only where the config has the attribute)
SMALL = {
    "hidden_size": 32, "d_model": 32, "n_embd": 32, "dim": 32, "embed_dim": 32, "embedding_size": 32, "embedding_dim": 32,
    "num_hidden_layers": 2, "n_layer": 2, "n_layers": 2, "num_layers": 2, "encoder_layers": 2,
    "decoder_layers": 2, "num_decoder_layers": 2,
    "num_attention_heads": 4, "n_head": 4, "n_heads": 4, "encoder_attention_heads": 4,
    "decoder_attention_heads": 4, "num_heads": 4, "num_key_value_heads": 2,
    "intermediate_size": 64, "ffn_dim": 64, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64, "d_ff": 64,
    "n_inner": 64, "hidden_dim": 64, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32,
    "head_dim": 8, "d_kv": 8, "d_head": 8, "kv_lora_rank": 16, "q_lora_rank": 16, "qk_rope_head_dim": 4,
    "qk_nope_head_dim": 4, "v_head_dim": 8, "rotary_dim": 4,
    "mamba_n_heads": 4, "mamba_d_head": 16, "n_groups": 1, "n_group": 1, "topk_group": 1, "window_size": 4, "num_queries": 8,
    "vocab_size": 256, "image_size": IMAGE, "patch_size": 8, "projection_size": 32, "projection_dim": 32,
    "attention_window": 8, "max_position_embeddings": 64,
    "num_experts": 4, "num_local_experts": 4, "n_routed_experts": 4, "num_experts_per_tok": 2,
}
NEVER_GROWN = ("patch_size", "window_size")  # a Swin's 4x4 patches keep room for its windows
LAYER_COUNTS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers")
HEAD_LISTS = ("num_heads", "num_attention_heads")  # per stage (Swin): 4 divides every stage's width
WIDTHS = ("hidden_size", "d_model", "n_embd", "dim", "embed_dim")
PER_LAYER = ("layer_types", "no_rope_layers", "attn_layers", "mlp_layer_types", "layers_block_type")


def recipe_version() -> str:
    """Changes when this recipe does: a results file's "does not build" reasons are then stale."""
    import transformers

    src = Path(__file__).read_bytes() + Path(patches.__file__).read_bytes()
    return hashlib.sha256(src + transformers.__version__.encode()).hexdigest()[:12]


# ============================================================================================
# the config


def _shrink_dict(d: dict, depth=0, vocab=None, keep=(), kinds=True) -> dict:
    if isinstance(d.get("vocab_size"), int):
        vocab = SMALL["vocab_size"]
    out = {}
    for key, value in d.items():
        if isinstance(value, dict) and depth < 3 and not _is_layer_map(value):
            value = _shrink_dict(value, depth + 1, vocab, keep, kinds)
        elif key in keep:
            value = min(value, FULL_IMAGE) if key == "image_size" and _is_int(value) else value
        elif key in SMALL and _is_int(value):  # a zero turns a feature off (GLM-5's NoPE layers): kept
            value = value if value == 0 else min(value, SMALL[key]) if key in NEVER_GROWN else SMALL[key]
        elif re.search(r"feature_layers?$|hook_ids$", key) and (_is_int(value) or _ints(value)):
            last = SMALL["num_hidden_layers"] - 1  # another config's layers, counted from the front
            value = [min(v, last) for v in value] if isinstance(value, list) else min(value, last)
        elif _is_int(value) and (re.search(r"(^|_)num_\w*heads$", key) or re.match(r"linear_\w*head_dim$", key)):
            value = SMALL["head_dim" if key.endswith("head_dim") else "num_heads"]  # linear_num_heads...
        elif key in HEAD_LISTS and _ints(value):
            value = [SMALL["num_heads"]] * len(value)
        elif re.search(r"heads_per_layer$", key) and _ints(value) and _is_int(d.get("num_attention_heads")):
            # per-layer key/value heads (Sapiens2's): each layer's share of the query heads kept
            value = [max(1, v * SMALL["num_attention_heads"] // d["num_attention_heads"]) for v in value]
        elif key == "image_size" and _ints(value) and key not in keep and len(value) == 2:
            value = [min(v, IMAGE) for v in value]  # (height, width)
        elif key.endswith("per_stage") and _ints(value) and value[0] == d.get("hidden_size") and value[0] > 1:
            value = [v * SMALL["hidden_size"] // value[0] for v in value]  # per-stage widths (Hiera's)
        elif key == "depths" and _ints(value):
            value = [min(v, 2) for v in value]
        elif key.endswith("groups") and _is_int(value) and value > 1 and value == d.get("hidden_size"):
            value = SMALL["hidden_size"]  # a depthwise convolution over the hidden states
        elif re.match(r"(out|text)_\w*hidden_size$", key) and _is_int(value):
            value = SMALL["hidden_size"]  # another config's width named here (out_hidden_size)
        out[key] = value
    if out.get("head_dim", 0) is None and isinstance(out.get("num_attention_heads"), int):
        out["head_dim"] = SMALL["head_dim"]  # None makes some models read hidden/heads, others crash
    if all(_is_int(out.get(k)) for k in ("expand", "num_heads", "head_dim", "hidden_size", "state_size")):
        out["head_dim"] = out["hidden_size"] * out["expand"] // out["num_heads"]  # Mamba-2's heads
    if all(_is_int(out.get(k)) for k in ("mamba_d_ssm", "mamba_n_heads", "mamba_d_head")):
        out["mamba_d_ssm"] = out["mamba_n_heads"] * out["mamba_d_head"]  # Falcon-H1's SSM width
    if all(_is_int(d.get(k)) for k in ("window_size", "spatial_merge_size", "patch_size")) and \
            d["window_size"] % (d["patch_size"] * d["spatial_merge_size"]) == 0:  # a window in pixels
        out["window_size"] = out["patch_size"] * out["spatial_merge_size"]  # of one merged patch (Qwen2.5-VL)
    _backbone_stages(out, d)
    _per_layer(out, d, kinds)
    _special_ids(out, vocab)
    _rope_sections(out)
    return out


def _backbone_stages(out: dict, full: dict) -> None:
    """A backbone whose stages are its layers (a ViT's) has fewer stages once the layer count
    shrinks: the stages it outputs become the last ones, as many as it had where they fit. A
    network of stages (ResNet, Swin) keeps its stage count, and its outputs with it."""
    if "stage_names" not in out or "depths" in out:
        return
    n = next((out[k] for k in LAYER_COUNTS if _is_int(out.get(k))), None)
    indices = full.get("out_indices")
    out["out_features"] = None
    if n is None or not _ints(indices):
        out["out_indices"] = None
        return
    k = len(indices)
    out["out_indices"] = list(range(n - k + 1, n + 1)) if k <= n else None


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _ints(value) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, int) for v in value)


def _is_layer_map(value: dict) -> bool:
    return bool(value) and all(str(k).isdigit() for k in value)


def _per_layer(d: dict, full: dict, kinds: bool = True) -> None:
    """Whatever has one entry per layer (lists as long as the layer count, {layer index: ...} maps,
    lists of layer indices) cut to the shrunk count, keeping one layer of each kind it names (so a
    hybrid keeps an attention layer); Reformer's axial positions fitted to the hidden size and the
    sequence (their sizes must sum / multiply to them)."""
    counts = [(full[k], d[k]) for k in LAYER_COUNTS if isinstance(full.get(k), int) and isinstance(d.get(k), int)]
    if counts and _ints(d.get("depths")) and len(d["depths"]) == counts[0][0]:
        for key in LAYER_COUNTS:  # its "layers" are its stages, one entry each in its per-stage lists
            if key in d and full.get(key) == counts[0][0]:
                d[key] = counts[0][0]
    if counts and "depths" not in d:  # a network of stages (Swin) counts its stages there instead
        before, after = counts[0]
        for key, value in d.items():
            if isinstance(value, list) and (len(value) == before or key in PER_LAYER) and len(value) > after:
                d[key] = _keep_kinds(value, after) if kinds else value[:after]
            elif isinstance(value, dict) and _is_layer_map(value):
                d[key] = {k: v for k, v in value.items() if int(k) < after}
        for key in ("moe_layers", "full_attn_idxs", "attn_layer_indices"):
            if _ints(d.get(key)):
                d[key] = [i for i in d[key] if i < after] or [after - 1]
    if "axial_pos_embds_dim" in d and isinstance(d.get("hidden_size"), int):
        half = d["hidden_size"] // 2
        d["axial_pos_embds_dim"] = [half, d["hidden_size"] - half]
        d["axial_pos_shape"] = [4, SEQ // 4]
        for key in ("local_attn_chunk_length", "lsh_attn_chunk_length"):
            if key in d:
                d[key] = 8


def _keep_kinds(values: list, n: int) -> list:
    """n entries of values in their order, the first of each distinct kind among them first."""
    firsts, seen = [], []
    for i, v in enumerate(values):
        key = repr(v)
        if key not in seen:
            seen.append(key)
            firsts.append(i)
    keep = sorted(firsts[:n])
    keep += [i for i in range(len(values)) if i not in keep][: n - len(keep)]
    return [values[i] for i in sorted(keep)]


def _special_ids(d: dict, vocab) -> None:
    """Token ids past the shrunk vocabulary (pad, bos, eos, image tokens...) moved inside it, the
    same id to the same place, so an embedding's padding index and the model's checks hold."""
    vocab = d.get("vocab_size") if isinstance(d.get("vocab_size"), int) else vocab
    text = d.get("text_config")
    if isinstance(text, dict) and isinstance(text.get("vocab_size"), int):
        vocab = vocab or text["vocab_size"]
    if not vocab:
        return
    moved: dict[int, int] = {}

    def fit(i):
        if not isinstance(i, int) or isinstance(i, bool) or 0 <= i < vocab:
            return i
        return moved.setdefault(i, vocab - 1 - len(moved) % SPECIAL_IDS)

    for key, value in d.items():
        if re.search(r"token_(id|index)s?$", key):
            d[key] = [fit(v) for v in value] if isinstance(value, list) else fit(value)


def _rope_sections(d: dict, default=None) -> None:
    """Multimodal RoPE's sections must sum to half the head size: the released split (or the
    model's default, which assumes the released head size), scaled."""
    rope = d.get("rope_parameters") or d.get("rope_scaling")
    if isinstance(rope, dict) and default and "mrope_section" not in rope:
        rope["mrope_section"] = list(default)
    head = d.get("qk_rope_head_dim") or d.get("head_dim") or (
        d.get("hidden_size") and d.get("num_attention_heads") and d["hidden_size"] // d["num_attention_heads"])
    if not (isinstance(rope, dict) and _ints(rope.get("mrope_section")) and isinstance(head, int)):
        return
    sections, half = rope["mrope_section"], head // 2
    if half < len(sections) and _is_int(d.get("qk_rope_head_dim")):  # a rotary part too small to split
        half = len(sections) + 1
        d["qk_rope_head_dim"] = 2 * half
        if _is_int(d.get("qk_nope_head_dim")) and "qk_head_dim" in d:
            d["qk_head_dim"] = d["qk_nope_head_dim"] + d["qk_rope_head_dim"]
    if half < len(sections):
        return
    scaled = [max(1, s * half // sum(sections)) for s in sections]
    scaled[0] += half - sum(scaled)
    rope["mrope_section"] = scaled


def shrink(cfg, variant: int = 0):
    """The config rebuilt from its dict with the sizes shrunk (so derived sizes follow); variant 1
    gives every query head its own key/value head and one expert per token, which some configs
    require; variant 2 keeps the images' size (up to 224) and patches, for a network that
    downsamples more than a 32x32 image allows; variant 3 keeps the first layers as released
    instead of one of each kind, for a kind the default config cannot build (Qwen4-Exp's indexed
    attention has no indexer sizes) or that shares its weights across two layers (Zamba's)."""
    full = cfg.to_dict()
    d = _shrink_dict(full, keep=("image_size", "patch_size") if variant == 2 else (), kinds=variant != 3)
    _follow_widths(full, d, _widths(full, d, {}))
    if "use_cache" in d:
        d["use_cache"] = False
    if "prediction_length" in d and d["prediction_length"] is None:  # a forecaster's horizon
        d["prediction_length"] = 4
    if variant in (1, 2):
        _one_to_one(d)
    # multi-head latent attention (DeepSeek-V2/V3) expands its one latent to every query head, so
    # the key/value heads are the query heads; fewer would be repeated past them
    if "kv_lora_rank" in d and "num_key_value_heads" in d:
        d["num_key_value_heads"] = d["num_attention_heads"]
        if "qk_rope_head_dim" in d and "head_dim" in d:  # what their configs derive, kept as given
            d["head_dim"] = d["qk_rope_head_dim"]
        if "qk_head_dim" in d and "qk_nope_head_dim" in d:
            d["qk_head_dim"] = d["qk_nope_head_dim"] + d["qk_rope_head_dim"]
    # a codebook as wide as the hidden states (Encodec's quantizer multiplies one by the other)
    if "codebook_dim" in d and full.get("codebook_dim") == full.get("hidden_size"):
        d["codebook_dim"] = d["hidden_size"]
    if "n_routed_experts" in d and d.get("num_experts_per_tok") is None:  # DeepSeek-V2's default
        d["num_experts_per_tok"] = SMALL["num_experts_per_tok"]
    default = _mrope_default(cfg)
    for sub, part in ((cfg, d), (getattr(cfg, "text_config", None), d.get("text_config"))):
        if isinstance(part, dict) and (default or "mrope_section" in getattr(type(sub), "ignore_keys_at_rope_validation", ())):
            _rope_sections(part, default=default or [16, 24, 24])
    cfg = type(cfg).from_dict(d)
    attn = getattr(cfg, "attn_config", None)
    if attn is not None and hasattr(attn, "clip_qkv") and not hasattr(attn, "rope_theta"):
        # DBRX's attention reads rope_theta from its attention config, which no longer has it
        # (this transformers keeps it in the model config's rope_parameters), and clamps to
        # [-clip_qkv, clip_qkv] with no check for the default None: DBRX's released value, 8
        attn.rope_theta = (getattr(cfg, "rope_parameters", None) or {}).get("rope_theta", 10000.0)
        attn.clip_qkv = attn.clip_qkv or 8.0
    return cfg


def _widths(full: dict, small: dict, found: dict, path=()) -> dict:
    """{released width: (small width, the sub-configs naming it)} over the config and its sub-configs."""
    for key, value in full.items():
        if isinstance(value, dict) and isinstance(small.get(key), dict):
            _widths(value, small[key], found, path + (key,))
        elif key in WIDTHS and _is_int(value) and small.get(key) != value:
            found.setdefault(value, (small[key], set()))[1].add(path)
    return found


def _follow_widths(full: dict, small: dict, widths: dict, path=()) -> None:
    """A size left as released that equals another config's released width is that width named
    here (a head's audio_hidden_size, a flow head's condition_dim): it follows the width, as the
    validators require. Within one config such a size is its own (RT-DETR's encoder_hidden_dim),
    but for an output size."""
    for key, value in full.items():
        here = small.get(key)
        if isinstance(value, dict) and isinstance(here, dict):
            _follow_widths(value, here, widths, path + (key,))
        elif _is_int(value) and here == value and value in widths and (
                (widths[value][1] - {path} and re.search(r"hidden_size|_dim$|^dim$", key))
                or re.search(r"output_size$", key)):  # a pooler's output as wide as its tower
            small[key] = widths[value][0]
        elif _ints(value) and here == value and len(value) > 1 and "channel" in key:
            end = next((v for v in (value[0], value[-1]) if v in widths and widths[v][1] - {path}), None)
            if end:  # per-stage channels from another config's width up (SAM2's neck over Hiera)
                small[key] = [v * widths[end][0] // end for v in value]


def _mrope_default(cfg):
    """The sections a multimodal RoPE model falls back to when its config has none, read from its
    modeling code (they assume the released head size, and differ by model: [16, 24, 24], [24, 20, 20]...)."""
    import importlib

    try:
        src = inspect.getsource(importlib.import_module(type(cfg).__module__.replace(".configuration_", ".modeling_")))
    except (ImportError, OSError, TypeError):
        return None
    found = re.search(r'mrope_section",\s*\[(\d+(?:,\s*\d+)+)\]', src)
    return [int(x) for x in found.group(1).split(",")] if found else None


def _one_to_one(d: dict) -> None:
    for v in d.values():
        if isinstance(v, dict):
            _one_to_one(v)
    if isinstance(d.get("num_key_value_heads"), int) and isinstance(d.get("num_attention_heads"), int):
        d["num_key_value_heads"] = d["num_attention_heads"]
    if isinstance(d.get("num_experts_per_tok"), int):
        d["num_experts_per_tok"] = 1


# ============================================================================================
# the inputs


def _input(name: str, cfg):
    import torch

    g = torch.Generator().manual_seed(0)
    if name in ("input_ids", "decoder_input_ids"):
        vocab = getattr(cfg, "vocab_size", None) or getattr(getattr(cfg, "text_config", None), "vocab_size", 256)
        top = min(int(vocab), 256)
        return torch.randint(3, top - SPECIAL_IDS if top > 4 * SPECIAL_IDS else top, (1, SEQ), generator=g)
    if name == "pixel_values":
        vc = getattr(cfg, "vision_config", None) or cfg
        ch = getattr(vc, "num_channels", 3)
        size = getattr(vc, "image_size", IMAGE)
        h, w = (size[0], size[-1]) if isinstance(size, (list, tuple)) else (size, size)  # text lines: wide
        frames = getattr(vc, "num_frames", None)  # a video model takes (batch, frames, channels, h, w)
        lead = (1, int(frames)) if isinstance(frames, int) else (1,)
        return torch.randn(*lead, ch, int(h), int(w), generator=g)
    if name in ("input_values", "input_values_mono", "input_values_long"):  # a codec (Encodec): (batch, channels, samples)
        channels = 1 if name != "input_values" else getattr(cfg, "audio_channels", None)
        samples = 10 * AUDIO if name == "input_values_long" else AUDIO
        return torch.randn(1, *([int(channels)] if channels else []), samples, generator=g)
    if name == "input_values_spectrogram":  # (batch, frames, mel bins): the Audio Spectrogram Transformer's
        return torch.randn(1, int(cfg.max_length), int(cfg.num_mel_bins), generator=g)
    if name in ("input_features", "input_features_by_time"):
        bins = _find(cfg, "num_mel_bins", "feature_projection_input_dim", "feature_size") or 80
        frames = 3000 if "whisper" in type(cfg).__name__.lower() else 64
        shape = (1, frames, int(bins)) if name == "input_features_by_time" else (1, int(bins), frames)
        return torch.randn(*shape, generator=g)
    if name in ("past_values", "past_observed_mask", "past_time_features", "future_time_features"):
        # a time series: (batch, context and the lags it reads before it, channels)
        lags = getattr(cfg, "lags_sequence", None)
        context = int(getattr(cfg, "context_length", None) or SEQ) + (max(lags) if _ints(lags) else 0)
        channels = int(getattr(cfg, "num_input_channels", None) or getattr(cfg, "input_size", None) or 1)
        univariate = _ints(lags) and channels == 1  # the lagged forecasters take (batch, time) then
        shape = (1, context) if univariate else (1, context, channels)
        if name == "past_observed_mask":
            return torch.ones(*shape)
        if name.endswith("time_features"):
            length = context if name.startswith("past") else int(cfg.prediction_length)
            return torch.randn(1, length, int(getattr(cfg, "num_time_features", 0)), generator=g)
        return torch.randn(*shape, generator=g)
    raise ValueError(name)


def _find(cfg, *names):
    """The first of names set on the config or its audio / encoder sub-config."""
    for c in (cfg, getattr(cfg, "audio_config", None), getattr(cfg, "encoder_config", None)):
        for n in names:
            if _is_int(getattr(c, n, None)):
                return getattr(c, n)
    return None


# ============================================================================================
# the model


def build_case(model_type: str):
    """(module, example_inputs) for `model_type`: the model at a small size, wrapped so forward
    takes tensors positionally and returns its first output tensor; raises with the reason."""
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    name = MODEL_MAPPING_NAMES[model_type]
    name = name[0] if isinstance(name, (list, tuple)) else name  # funnel: (FunnelModel, FunnelBaseModel)
    cls = getattr(transformers, name, None)
    if cls is None:
        raise RuntimeError(f"transformers has no class {name}")
    first = None
    images = "image_size" in str(CONFIG_MAPPING[model_type]().to_dict())
    for variant in (0, 1, 2, 3) if images else (0, 1, 3):
        try:
            return _build(cls, shrink(CONFIG_MAPPING[model_type](), variant))
        except ImportError:
            raise
        except Exception as e:
            first = first or e
    raise first


def _build(cls, cfg):
    import torch

    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = cls(cfg).eval()
    params = inspect.signature(model.forward).parameters
    main = getattr(model, "main_input_name", "input_ids")
    tries = [[main]] if main in INPUTS else []
    tries.append([n for n in INPUTS if n in params])
    if "past_values" in params:  # with what a probabilistic forecaster also needs
        tries.append([n for n in ("past_values", "past_time_features", "past_observed_mask",
                                  "future_time_features") if n in params])
    if "decoder_input_ids" in params and "input_ids" in params:  # encoder-decoder: both token ids
        tries.append(["input_ids", "decoder_input_ids"])
    if main == "input_features":  # a conformer takes (batch, frames, bins), Whisper (batch, bins, frames)
        tries.append(["input_features_by_time"])
    if main == "input_values":  # a codec with no channel count in its config (DAC): mono, and a
        tries += [["input_values_mono"], ["input_values_long"]]  # second for one that downsamples more
        if _is_int(getattr(cfg, "num_mel_bins", None)) and _is_int(getattr(cfg, "max_length", None)):
            tries.append(["input_values_spectrogram"])
    if main != "input_ids" and "decoder_input_ids" in params:  # speech / image to text: and a prompt
        tries += [[main, "decoder_input_ids"]] + ([["input_features_by_time", "decoder_input_ids"]]
                                                  if main == "input_features" else [])
    made = [(names, tuple(_input(n, cfg) for n in names), {}) for names in tries if names]
    if patches.takes_a_grid(params) and "input_ids" not in params:  # a vision tower
        made = patches.candidates(cfg, params)
    last = None
    for names, inputs, fixed in made:
        module = _wrapper_class()(model, [re.sub("_by_time|_mono|_long|_spectrogram", "", n) for n in names], fixed).eval()
        try:
            with torch.no_grad():
                module(*inputs)
        except Exception as e:
            last = e
            continue
        return module, inputs
    if last is None:
        raise RuntimeError(f"forward() takes none of {', '.join(INPUTS)}")
    raise last


def _wrapper_class():
    import torch

    class Wrapper(torch.nn.Module):
        def __init__(self, model, names, fixed=None):
            super().__init__()
            self.model, self.names, self.fixed = model, tuple(names), dict(fixed or {})

        def forward(self, *inputs):  # the first tensor of the output, the inputs passed by name
            out = self.model(**dict(zip(self.names, inputs)), **self.fixed, return_dict=True)
            if isinstance(out, torch.Tensor):  # a vision tower's merged patches
                return out
            out = dict(enumerate(out)) if isinstance(out, tuple) else out
            for v in out.values():
                if isinstance(v, torch.Tensor):
                    return v
            for v in out.values():
                while isinstance(v, (tuple, list)) and v:  # a tuple of logits or of feature maps
                    v = v[0]
                if isinstance(v, torch.Tensor):
                    return v
            raise RuntimeError("the model's output holds no tensor")

    return Wrapper


def reason(e: BaseException) -> str:
    """Why a type does not build, named: a missing package, an input the recipe cannot make, else
    the exception's first line."""
    text = str(e)
    missing = re.search(r"requires the (\w+) librar", text)
    if isinstance(e, ImportError) and missing:
        return f"needs the {missing.group(1)} package (not installed)"
    needed = re.search(r"forward\(\) missing \d+ required positional arguments?: (.*)", text)
    if isinstance(e, TypeError) and needed:
        return f"needs inputs the recipe cannot make: {needed.group(1).strip()}"
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()] or [""]
    if lines[0].endswith(":") and len(lines) > 1:  # a config validator's header: what it checked follows
        return f"{type(e).__name__}: {lines[0]} {lines[1]}"
    return f"{type(e).__name__}: {lines[0]}"
