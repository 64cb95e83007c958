"""The dtype and shape of what a converter handles: a Relax expression's type, an FX node's value."""
from __future__ import annotations


def expr_dtype(expr) -> str:
    """A Relax expression's dtype, "" when its type has none."""
    ty = getattr(expr, "ty", None) or getattr(expr, "struct_info", None)
    dt = getattr(ty, "dtype", None)
    return str(dt) if dt is not None else ""


def expr_shape(expr):
    """A Relax expression's shape values, None when they are not known."""
    ty = getattr(expr, "ty", None) or getattr(expr, "struct_info", None)
    vals = getattr(getattr(ty, "shape", None), "values", None)
    return list(vals) if vals is not None else None


def fx_dtype(node) -> str | None:
    """The dtype torch recorded for an FX node's value ("float32", "int64", ...)."""
    val = node.meta.get("val") if hasattr(node, "meta") else None
    dt = getattr(val, "dtype", None)
    return str(dt).replace("torch.", "") if dt is not None else None
