"""The extension registry: routes a sandbox call ``(name, args, kwargs)`` to its function.

The registry binds the sandbox's arguments against the implementation's signature first, so a
wrong call reads ``read_file(): missing a required argument: 'path'`` rather than a host-side
``TypeError``; then it runs the function's hooks around the implementation. Exceptions keep their
type (the sandbox client re-raises them inside the block); ``OSError``s raised by the system are
stripped of their host paths.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from cove.environment.extensions.base import (
    Call,
    CallContext,
    Extension,
    ExtensionFunction,
    Retry,
    Return,
)
from cove.environment.extensions.memo import per_extension_set
from cove.errors import ConfigError


class ExtensionRegistry:
    """The functions of a set of extensions, by name; never changed once built, so one
    registry serves every environment with the same extensions (``registry_for``)."""

    def __init__(self, extensions: Sequence[Extension]) -> None:
        """Index the functions of ``extensions``.

        Raises:
            ConfigError: When two functions (or a function and a constant) share a name.
        """
        self._functions: dict[str, ExtensionFunction] = {}
        self._signatures: dict[str, inspect.Signature | None] = {}
        seen: dict[str, str] = {}
        for ext in extensions:
            names = [f.name for f in ext.functions] + [c.name for c in ext.constants]
            for name in names:
                if name in seen:
                    raise ConfigError(
                        f"extension {ext.name!r} binds {name!r}, already bound by {seen[name]!r}"
                    )
                seen[name] = ext.name
            for function in ext.functions:
                self._functions[function.name] = function
                self._signatures[function.name] = _sandbox_signature(function)

    @property
    def names(self) -> list[str]:
        """Every function name, in registration order."""
        return list(self._functions)

    def __contains__(self, name: object) -> bool:
        return name in self._functions

    async def dispatch(
        self, ctx: CallContext, name: str, args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> Any:
        """Run function ``name`` with its hooks and return its result.

        Raises:
            NameError: For an unknown function name.
            Exception: Whatever the function (after its hooks) raised, made readable.
        """
        function = self._functions.get(name)
        if function is None:
            raise NameError(f"no extension function named {name!r}")
        call = Call(tuple(args), dict(kwargs))
        try:
            return await _run(function, self._signatures[name], ctx, call)
        except OSError as exc:
            if exc.filename is None:
                raise
            # OS errors raised by the system carry absolute host paths; keep only the reason.
            raise type(exc)(f"{name}(): {exc.strerror or 'operating system error'}") from None


registry_for = per_extension_set(ExtensionRegistry)
"""The registry of a set of extensions, built (and their signatures read) once per process."""


async def _run(
    function: ExtensionFunction, signature: inspect.Signature | None, ctx: CallContext, call: Call
) -> Any:
    if function.before is not None:
        decision = await _maybe_await(function.before(ctx, call))
        if isinstance(decision, Return):
            return decision.value
        if isinstance(decision, Call):
            call = decision
    attempt = 0
    while True:
        try:
            _check_arguments(function.name, signature, call)
            result = await _maybe_await(function.implementation(ctx, *call.args, **call.kwargs))
        except Exception as exc:
            if function.on_error is None:
                raise
            decision = await _maybe_await(function.on_error(ctx, call, exc, attempt))
            if isinstance(decision, Return):
                return decision.value
            if isinstance(decision, Retry) and attempt < function.max_retries:
                attempt += 1
                call = decision.call or call
                continue
            raise
        if function.after is not None:
            result = await _maybe_await(function.after(ctx, call, result))
        return result


def _sandbox_signature(function: ExtensionFunction) -> inspect.Signature | None:
    """The implementation's signature without its leading context parameter."""
    try:
        signature = inspect.signature(function.implementation)
    except (TypeError, ValueError):
        return None
    parameters = list(signature.parameters.values())[1:]
    return signature.replace(parameters=parameters)


def _check_arguments(name: str, signature: inspect.Signature | None, call: Call) -> None:
    if signature is None:
        return
    try:
        signature.bind(*call.args, **call.kwargs)
    except TypeError as exc:
        raise TypeError(f"{name}(): {exc}") from None


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value
