"""Extensions: the only way to add capabilities to the sandbox.

``base`` holds the spec (``Extension``, ``ExtensionFunction``, ``ExtensionConstant``, hooks,
``CallContext``, ``TurnHooks``); ``registry`` routes sandbox calls; ``docs`` renders the system
prompt text; ``core``, ``files`` and ``llm`` are the built-in extensions.
"""

from __future__ import annotations

from cove.environment.extensions.base import (
    Call,
    CallContext,
    EnvironmentView,
    Extension,
    ExtensionConstant,
    ExtensionFunction,
    NudgeContext,
    Retry,
    Return,
    TurnHooks,
)
from cove.environment.extensions.core import CORE
from cove.environment.extensions.docs import render_docs
from cove.environment.extensions.files import FILES
from cove.environment.extensions.llm import LLM
from cove.environment.extensions.registry import ExtensionRegistry

__all__ = [
    "CORE",
    "FILES",
    "LLM",
    "Call",
    "CallContext",
    "EnvironmentView",
    "Extension",
    "ExtensionConstant",
    "ExtensionFunction",
    "ExtensionRegistry",
    "NudgeContext",
    "Retry",
    "Return",
    "TurnHooks",
    "builtin_extensions",
    "render_docs",
]


def builtin_extensions() -> tuple[Extension, ...]:
    """The extensions every environment gets unless told otherwise: core, files, llm."""
    return (CORE, FILES, LLM)
