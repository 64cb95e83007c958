"""Colours for graph drawing, per node kind, for light and dark themes.

Plain hex strings (turned into QColor by the user) so the table is easy to read and to test.
Each kind has (fill, border, text); fills are soft so labels stay readable, borders carry the hue.
"""
from __future__ import annotations

# kind -> (fill, border, text)
LIGHT: dict[str, tuple[str, str, str]] = {
    "input":           ("#dff2e3", "#3b8f53", "#14301d"),
    "param":           ("#eeeeee", "#9b9b9b", "#3a3a3a"),
    "const":           ("#f3eddf", "#a8905c", "#3d3322"),
    "op":              ("#e4edfa", "#4a74b5", "#14233d"),
    "call_tir":        ("#efe4f8", "#8a55b0", "#2e1740"),
    "call_dps_packed": ("#fde8d6", "#c46a24", "#45230a"),
    "call_fused":      ("#dcf2f0", "#2a8a80", "#0d302c"),
    "output":          ("#fbe1e1", "#b94a4a", "#421515"),
    "group":           ("#fff3c9", "#b08a00", "#3d3000"),
    "tuple":           ("#f4f4f4", "#8a8a8a", "#333333"),
    "failed":          ("#ff9b9b", "#c40000", "#3d0000"),
}
DARK: dict[str, tuple[str, str, str]] = {
    "input":           ("#1f3b28", "#63c082", "#dff5e6"),
    "param":           ("#35383c", "#8d939a", "#d9dcdf"),
    "const":           ("#3b3426", "#c2a66a", "#f0e6cf"),
    "op":              ("#1f2e47", "#6d9be0", "#dde8fb"),
    "call_tir":        ("#33244a", "#b07fd6", "#efe2fb"),
    "call_dps_packed": ("#45301d", "#e48c45", "#fde8d6"),
    "call_fused":      ("#173a37", "#4cbfb2", "#d8f5f2"),
    "output":          ("#4a2222", "#e06c6c", "#fbe1e1"),
    "group":           ("#423812", "#d9b32c", "#fff3c9"),
    "tuple":           ("#2f3134", "#8a8a8a", "#dddddd"),
    "failed":          ("#7a1212", "#ff4d4d", "#ffe0e0"),
}
# synonyms used by the FX and Relax graph builders
ALIASES = {
    "parameter": "param", "buffer": "param", "constant": "const", "get_item": "tuple",
    "placeholder": "input", "call_function": "op", "call_module": "op", "call_method": "op",
    "get_attr": "param",
}

# highlight roles: colour of the outline (and a tint of the fill)
ROLES_LIGHT = {
    "selected": "#ff8c00",
    "found":    "#e6b800",
    "linked":   "#0096d6",
    "added":    "#2e9e44",
    "removed":  "#d64545",
    "changed":  "#d99a00",
    "failed":   "#d00000",
}
ROLES_DARK = {
    "selected": "#ffa733",
    "found":    "#ffd83d",
    "linked":   "#3cc3ff",
    "added":    "#5fd47a",
    "removed":  "#ff6b6b",
    "changed":  "#ffc23d",
    "failed":   "#ff4d4d",
}
ROLE_PRIORITY = ("failed", "found", "linked", "removed", "added", "changed")

# view chrome
CHROME_LIGHT = {"background": "#fbfbfc", "edge": "#7d8590", "edge_label": "#5c636b",
                "group_border": "#8f99a6", "group_fill": "#5b6b80", "group_text": "#4a5563",
                "minimap_bg": "#ffffff", "minimap_view": "#0096d6"}
CHROME_DARK = {"background": "#1e2024", "edge": "#8a929c", "edge_label": "#a4abb4",
               "group_border": "#6f7a88", "group_fill": "#9fb0c8", "group_text": "#b5bfcc",
               "minimap_bg": "#25282d", "minimap_view": "#3cc3ff"}

# heat ramp for per-kernel time: cool -> hot
HEAT = ["#fff5cc", "#ffd27a", "#ff9f4a", "#f0603a", "#c21f3a"]


def kind_colors(kind: str | None, dark: bool = False) -> tuple[str, str, str]:
    table = DARK if dark else LIGHT
    k = ALIASES.get(kind or "op", kind or "op")
    return table.get(k, table["op"])


def role_color(role: str, dark: bool = False) -> str:
    return (ROLES_DARK if dark else ROLES_LIGHT).get(role, (ROLES_DARK if dark else ROLES_LIGHT)["linked"])


def chrome(dark: bool = False) -> dict[str, str]:
    return CHROME_DARK if dark else CHROME_LIGHT


def _hex(c: str) -> tuple[int, int, int]:
    return int(c[1:3], 16), int(c[3:5], 16), int(c[5:7], 16)


def heat_color(t: float) -> str:
    """Colour of the heat ramp at t in [0, 1] (linear between the stops)."""
    t = min(1.0, max(0.0, float(t)))
    f = t * (len(HEAT) - 1)
    i = min(int(f), len(HEAT) - 2)
    a, b = _hex(HEAT[i]), _hex(HEAT[i + 1])
    u = f - i
    r, g, bl = (round(a[j] + (b[j] - a[j]) * u) for j in range(3))
    return f"#{r:02x}{g:02x}{bl:02x}"
