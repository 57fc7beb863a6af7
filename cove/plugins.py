"""What a plugin may import from cove: the stable surface (``docs/plugins.md``).

A sandbox extension is an entry point in the group ``cove.extensions``: a plain typed function
(nothing from cove needed; ``effect`` declares what it does beyond reading) or an
``Extension``. Everything named here keeps its meaning within a major version of cove.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from cove.environment.extensions.base import (
    Call,
    CallContext,
    Extension,
    ExtensionConstant,
    ExtensionFunction,
    NudgeContext,
    Retry,
    Return,
)
from cove.environment.extensions.functions import EFFECT_ATTRIBUTE, checked_effect

__all__ = [
    "EXTENSIONS_GROUP",
    "Call",
    "CallContext",
    "Extension",
    "ExtensionConstant",
    "ExtensionFunction",
    "NudgeContext",
    "Retry",
    "Return",
    "effect",
]

#: The entry-point group of sandbox extensions.
EXTENSIONS_GROUP = "cove.extensions"

F = TypeVar("F", bound=Callable[..., object])


def effect(name: str) -> Callable[[F], F]:
    """Declare what a plain function does beyond reading: ``@effect("write")``.

    Common effects are ``write``, ``network`` and ``spend``; the approval policy is keyed on
    them (``docs/plugins.md``). The function itself is returned unchanged, marked.

    Raises:
        ValueError: ``name`` is not a short lowercase word.
    """
    try:
        checked = checked_effect("effect()", name)
    except Exception as exc:
        raise ValueError(str(exc)) from None

    def mark(fn: F) -> F:
        setattr(fn, EFFECT_ATTRIBUTE, checked)
        return fn

    return mark
