"""A mypy plugin: `d.get("key")` on a TypedDict with a key it does not declare is an error.

mypy reports a misspelt key in `state["modle"]` but lets `state.get("modle")` through (typed
`object`), and the GUI reads the engine's state mostly with `.get`. pyproject.toml's [tool.mypy]
loads this file; the type mypy gives a valid `.get` is unchanged."""
from __future__ import annotations

from collections.abc import Callable

from mypy.errorcodes import TYPEDDICT_ITEM
from mypy.plugin import MethodContext, Plugin
from mypy.plugins.common import try_getting_str_literals
from mypy.plugins.default import typed_dict_get_callback
from mypy.types import Type, TypedDictType, get_proper_type


def _checked_get(ctx: MethodContext) -> Type:
    receiver = get_proper_type(ctx.type)
    if isinstance(receiver, TypedDictType) and ctx.args and len(ctx.args[0]) == 1:
        keys = try_getting_str_literals(ctx.args[0][0], ctx.arg_types[0][0]) or []
        for key in keys:
            if key not in receiver.items:
                name = receiver.fallback.type.name
                ctx.api.fail(f'TypedDict "{name}" has no key "{key}" (.get of an undeclared key)',
                             ctx.context, code=TYPEDDICT_ITEM)
    return typed_dict_get_callback(ctx)


class TypedDictGetPlugin(Plugin):
    def get_method_hook(self, fullname: str) -> Callable[[MethodContext], Type] | None:
        return _checked_get if fullname == "typing.Mapping.get" else None


def plugin(version: str) -> type[Plugin]:
    del version
    return TypedDictGetPlugin

