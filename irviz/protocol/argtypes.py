"""The protocol's argument types are Python annotations (`str | None`, `list[str]`, a TypedDict,
`Literal["all"]`): the engine's router and the pane tests' fake bridge check a request's JSON
values against them, and the doc writes them out. Only the shapes JSON can carry are understood,
so a table entry of another shape fails at import, not on the first request.

Plain Python: the GUI imports this."""
from __future__ import annotations

import functools
import types
import typing
from typing import Any, Literal, Union, get_args, get_origin

_NONE = type(None)
_SCALARS = {str: "str", int: "int", float: "float", bool: "bool", _NONE: "null"}


def _is_union(tp: object) -> bool:
    return get_origin(tp) in (Union, types.UnionType)


@functools.cache
def _fields(td: object) -> dict[str, object]:
    # the class is declared under `from __future__ import annotations`: its annotations are text
    return typing.get_type_hints(td)


def matches(value: object, tp: object) -> bool:
    """Whether a JSON value fits `tp`. A float argument takes an int (JSON writes 1.0 as 1 in some
    encoders); an int or a float never takes a bool; a list takes a tuple (a Python caller's)."""
    if tp is Any or tp is object:
        return True
    if tp is None or tp is _NONE:
        return value is None
    if _is_union(tp):
        return any(matches(value, a) for a in get_args(tp))
    origin = get_origin(tp)
    if origin is Literal:
        return any(type(value) is type(a) and value == a for a in get_args(tp))
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is str:
        return isinstance(value, str)
    if tp is list or origin is list:
        if not isinstance(value, (list, tuple)):
            return False
        (item,) = get_args(tp) or (Any,)
        return all(matches(v, item) for v in value)
    if tp is dict or origin is dict:
        if not isinstance(value, dict):
            return False
        key, val = get_args(tp) or (Any, Any)
        return all(matches(k, key) and matches(v, val) for k, v in value.items())
    if typing.is_typeddict(tp):
        if not isinstance(value, dict):
            return False
        fields = _fields(tp)
        required: frozenset[str] = typing.cast(Any, tp).__required_keys__
        return required <= value.keys() and all(matches(v, fields[k]) for k, v in value.items() if k in fields)
    raise TypeError(f"the protocol has no JSON shape for the type {tp!r}")


def type_text(tp: object) -> str:
    """`tp` as the doc and the errors say it: "str or null", "[str]", "{str: int}", "{name, params}"."""
    if tp is Any or tp is object:
        return "any"
    if tp is None:
        return "null"
    if tp in _SCALARS:
        return _SCALARS[tp]
    if _is_union(tp):
        alternatives = sorted(get_args(tp), key=lambda a: a is _NONE)  # null last
        return " or ".join(type_text(a) for a in alternatives)
    origin = get_origin(tp)
    if origin is Literal:
        return " or ".join(f'"{a}"' if isinstance(a, str) else str(a) for a in get_args(tp))
    if tp is list or origin is list:
        args = get_args(tp)
        return f"[{type_text(args[0])}]" if args else "[any]"
    if tp is dict or origin is dict:
        args = get_args(tp)
        return f"{{{type_text(args[0])}: {type_text(args[1])}}}" if args else "object"
    if typing.is_typeddict(tp):
        optional: frozenset[str] = typing.cast(Any, tp).__optional_keys__
        return "{" + ", ".join(f"{k}?" if k in optional else k for k in _fields(tp)) + "}"
    raise TypeError(f"the protocol has no JSON shape for the type {tp!r}")


def describe(value: object) -> str:
    """What a request gave instead, for the error: the JSON type and a short repr."""
    text = repr(value)
    text = text if len(text) <= 40 else text[:37] + "..."
    return f"{type_text(type(value)) if type(value) in _SCALARS else type(value).__name__} {text}"
