"""A plain typed function as an extension: the simplest plugin needs nothing from cove.

``from_function(name, fn)`` turns a function with type hints and a Google-style docstring into
an ``Extension`` of one function bound in the sandbox as ``name``. Its documentation in the
system prompt is its summary (the extension's line), its signature and its ``Args:`` lines.
Before ``fn`` runs, the sandbox's arguments are bound to its signature and each decoded value
is checked against its parameter's type: what reaches ``fn`` is plain data of the declared
type (the values arrive through the codec, which builds only plain values; nothing here calls
a method of a value or reads an attribute a value names). A sync function runs in a worker
thread, off the event loop.

Supported parameter types: ``str``, ``int``, ``float``, ``bool``, ``bytes``, ``None``,
``Any``, ``list[T]``, ``tuple[T, ...]``, ``dict[str, T]``, ``set[T]`` and unions of them
(``T | None``). An effect is declared with the attribute ``__cove_effect__`` (``effect`` in
``cove.plugins`` sets it); without it the function only reads.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from cove.environment.extensions.base import CallContext, Extension, ExtensionFunction

#: The attribute a plain function declares its effect with.
EFFECT_ATTRIBUTE = "__cove_effect__"
_EFFECT = re.compile(r"[a-z][a-z0-9_]{0,31}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")
_SIMPLE = {str: "str", int: "int", float: "float", bool: "bool", bytes: "bytes"}
_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters):\s*$")
_SECTION_HEADER = re.compile(r"^\s*[A-Z][A-Za-z ]*:\s*$")


class BadPlugin(Exception):
    """A plugin's object cannot become an extension (the message says why)."""


def from_function(name: str, fn: Callable[..., Any]) -> Extension:
    """The extension of one plain function, bound in the sandbox as ``name``.

    Raises:
        BadPlugin: ``name`` is not an identifier, the function has no docstring, a parameter
            has no type hint or one that is not supported, it takes ``*args``/``**kwargs``,
            or its effect is not a short lowercase word.
    """
    if not _NAME.fullmatch(name) or name.startswith("_"):
        raise BadPlugin(f"{name!r} is not a name sandbox code can call")
    signature = _signature(name, fn)
    hints = _hints(name, fn)
    checks = {p: _checker(name, p, hints[p]) for p in signature.parameters}
    doc = inspect.getdoc(fn)
    if not doc:
        raise BadPlugin(f"{name}: a function needs a docstring (it is the model's documentation)")
    effect = effect_of(name, fn)
    summary, args = _docstring(doc)
    function = ExtensionFunction(
        name=name,
        implementation=_implementation(name, fn, signature, checks),
        doc="\n".join(args) or summary,
        signature=_shown_signature(name, signature, hints),
    )
    return Extension(name=name, doc=summary, functions=(function,), effect=effect)


def effect_of(name: str, fn: object) -> str:
    """The effect ``fn`` declares (``read`` when none).

    Raises:
        BadPlugin: The declared effect is not a short lowercase word.
    """
    return checked_effect(name, getattr(fn, EFFECT_ATTRIBUTE, "read"))


def checked_effect(name: str, effect: object) -> str:
    """``effect`` when it is a short lowercase word (``write``, ``network``, …).

    Raises:
        BadPlugin: It is not.
    """
    if not isinstance(effect, str) or not _EFFECT.fullmatch(effect):
        raise BadPlugin(f"{name}: effect {effect!r} is not a short lowercase word")
    return effect


def _signature(name: str, fn: Callable[..., Any]) -> inspect.Signature:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise BadPlugin(f"{name}: its signature cannot be read ({exc})") from None
    for parameter in signature.parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise BadPlugin(f"{name}: *args and **kwargs are not supported ({parameter})")
    return signature


def _hints(name: str, fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        hints = typing.get_type_hints(fn)
    except Exception as exc:
        raise BadPlugin(f"{name}: its type hints cannot be read ({exc})") from None
    missing = [p for p in inspect.signature(fn).parameters if p not in hints]
    if missing:
        raise BadPlugin(f"{name}: parameter(s) without a type hint: {', '.join(missing)}")
    return hints


Checker = Callable[[object], bool]


def _checker(name: str, parameter: str, hint: Any) -> Checker:
    """A function telling whether a decoded value has type ``hint`` (built once, at load)."""
    try:
        return _build(hint)
    except BadPlugin as exc:
        raise BadPlugin(f"{name}: parameter {parameter!r}: {exc}") from None


def _build(hint: Any) -> Checker:
    if hint is Any:
        return lambda value: True
    if hint is None or hint is type(None):
        return lambda value: value is None
    if hint is float:
        return lambda value: type(value) in (float, int)
    if hint in _SIMPLE:
        return lambda value: type(value) is hint
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        options = [_build(arg) for arg in args]
        return lambda value: any(check(value) for check in options)
    if origin in (list, set, frozenset) and len(args) == 1:
        item = _build(args[0])
        kinds = (list,) if origin is list else (set, frozenset)
        return lambda value: type(value) in kinds and all(item(v) for v in value)  # type: ignore[attr-defined]
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        item = _build(args[0])
        return lambda value: type(value) in (tuple, list) and all(item(v) for v in value)  # type: ignore[attr-defined]
    if origin is dict and len(args) == 2 and args[0] is str:
        item = _build(args[1])
        return lambda value: (
            type(value) is dict and all(type(k) is str and item(v) for k, v in value.items())
        )
    if hint in (list, dict, tuple, set):
        return lambda value: type(value) is hint
    raise BadPlugin(f"type {_describe(hint)} is not supported")


def _implementation(
    name: str, fn: Callable[..., Any], signature: inspect.Signature, checks: Mapping[str, Checker]
) -> Callable[..., Any]:
    hints = typing.get_type_hints(fn)

    async def implementation(ctx: CallContext, *args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{name}(): {exc}") from None
        for parameter, value in bound.arguments.items():
            if not checks[parameter](value):
                expected = _describe(hints[parameter])
                raise TypeError(
                    f"{name}(): argument {parameter!r} must be {expected}, "
                    f"got {type(value).__name__}"
                )
        if inspect.iscoroutinefunction(fn):
            return await fn(*bound.args, **bound.kwargs)
        return await asyncio.to_thread(fn, *bound.args, **bound.kwargs)

    # The registry checks the sandbox's arguments against this signature (after ``ctx``).
    context = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_ONLY)
    implementation.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[context, *signature.parameters.values()]
    )
    return implementation


def _shown_signature(name: str, signature: inspect.Signature, hints: Mapping[str, Any]) -> str:
    parts = []
    for parameter in signature.parameters.values():
        text = f"{parameter.name}: {_describe(hints[parameter.name])}"
        if parameter.default is not parameter.empty:
            text += f" = {parameter.default!r}"
        parts.append(text)
    returns = f" -> {_describe(hints['return'])}" if "return" in hints else ""
    return f"{name}({', '.join(parts)}){returns}"


def _describe(hint: Any) -> str:
    if hint is type(None) or hint is None:
        return "None"
    if isinstance(hint, type) and not typing.get_args(hint):
        return hint.__name__
    return str(hint).replace("typing.", "")


def _docstring(doc: str) -> tuple[str, list[str]]:
    """The summary (first paragraph, on one line) and the ``Args:`` entries, one a line."""
    paragraphs = doc.split("\n\n")
    summary = " ".join(paragraphs[0].split())
    args: list[str] = []
    in_args = False
    for line in doc.splitlines():
        if _ARGS_HEADER.match(line):
            in_args = True
            continue
        if in_args and _SECTION_HEADER.match(line):
            break
        if in_args and line.strip():
            if line.startswith((" " * 8, "\t\t")) and args:
                args[-1] += " " + line.strip()  # a continuation line
            else:
                args.append(line.strip())
    return summary, args
