"""How benchmarks/transformers_small.py feeds a vision tower that takes an image as its patches and
a grid (Qwen2-VL's and its descendants': `grid_thw` / `image_grid_thw`): one small image, its grid
made from the config (patch size, temporal patch size, spatial merge size), its patches laid out as
the tower reads them."""
from __future__ import annotations

GRIDS = ("grid_thw", "image_grid_thw")
PATCHES = ("hidden_states", "pixel_values")
MERGED_SIDE = 2  # merged patches per side: the image is (2 x merge) patches square


def takes_a_grid(params) -> bool:
    return any(g in params for g in GRIDS) and any(p in params for p in PATCHES)


def _int(cfg, *names, default=None):
    for n in names:
        v = getattr(cfg, n, None)
        if isinstance(v, (list, tuple)) and v and all(isinstance(x, int) for x in v):
            v = v[0]  # a (2, 2) merge kernel
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return default


def grid(cfg) -> tuple[int, int, int, int, int]:
    """(channels, temporal patch, patch, merge, patches per side) read from the tower's config."""
    channels = _int(cfg, "in_channels", "num_channels", "in_chans", default=3)
    temporal = _int(cfg, "temporal_patch_size", "patch_temporal", default=1)
    patch = _int(cfg, "patch_size", "spatial_patch_size", default=14)
    merge = _int(cfg, "spatial_merge_size", "merge_size", "merge_kernel_size", default=1)
    return channels, temporal, patch, merge, MERGED_SIDE * merge


def candidates(cfg, params):
    """(names, positional tensors, fixed keyword tensors) to try in turn: the grid counted in
    patches (Qwen2-VL's) or in merged patches (Inkling2's), with the patches flattened (the
    Qwen2-VL layout, with its temporal patch), flattened without it, or as (patches, channels,
    patch, patch) images, channels first or last, or one image per merged patch (Inkling2's). The grid is fixed, not an input: its values set
    the tower's shapes."""
    import torch

    channels, temporal, patch, merge, side = grid(cfg)
    n = side * side
    name = next(p for p in PATCHES if p in params)
    key = next(k for k in GRIDS if k in params)
    layouts = [(n, channels * temporal * patch * patch), (n, channels * patch * patch),
               (n, channels, patch, patch), (n, patch, patch, channels),
               (n // merge**2, merge * patch, merge * patch, channels)]
    layouts = [s for i, s in enumerate(layouts) if s not in layouts[:i]]
    for per_side in [side] + ([side // merge] if merge > 1 else []):
        fixed = {key: torch.tensor([[1, per_side, per_side]])}
        if "merge_sizes" in params:  # VideoLLaMA3 takes each image's merge size beside its grid
            fixed["merge_sizes"] = torch.tensor([merge])
        for shape in layouts:
            yield [name], (torch.randn(*shape, generator=torch.Generator().manual_seed(0)),), fixed
