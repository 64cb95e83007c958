"""How a library call is named: ``irviz.torch.<op>.<attrs>``, the op's attributes spelled into the
function name, so the Relax view shows exactly what will be called and the callable can be rebuilt
from the module alone, in whichever process builds it.

LibraryDispatch writes these names, the build registers the functions they name, and the decision
views key calls by them.
"""
from __future__ import annotations

import re

PREFIX = "irviz.torch."
MATMUL = PREFIX + "matmul"

_CONV_RE = re.compile(r"^irviz\.torch\.conv2d\.s(\d+)_(\d+)\.p(\d+)_(\d+)\.d(\d+)_(\d+)\.g(\d+)$")


def _ints(arr) -> list[int]:
    return [int(x) for x in arr]


def conv2d_name(call) -> str:
    """The library function a Relax conv2d call becomes: stride, padding, dilation and groups."""
    a = call.attrs
    s, p, d = _ints(a.strides), _ints(a.padding), _ints(a.dilation)
    return f"{PREFIX}conv2d.s{s[0]}_{s[1]}.p{p[0]}_{p[1]}.d{d[0]}_{d[1]}.g{int(a.groups)}"


def conv2d_attrs(name: str) -> tuple[int, ...] | None:
    """(stride h, stride w, pad h, pad w, dilation h, dilation w, groups) of a conv2d library
    name; None for any other name."""
    m = _CONV_RE.match(name)
    return tuple(map(int, m.groups())) if m else None
