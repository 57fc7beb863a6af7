"""LLM clients: the interface (``client``) and its implementations.

``openai`` (``OpenAIClient``) is not imported here: the ``openai`` package takes most of a
second to import, so only code that talks to a real endpoint imports
``cove.engine.llm.openai``. ``scripted`` holds ``ScriptedClient`` and ``RecordedClient``.
"""

from cove.engine.llm.client import (
    CallKind,
    Completion,
    DeltaSink,
    LLMClient,
    Message,
    Reasoning,
    Retry,
    RetrySink,
    WithOptions,
)
from cove.engine.llm.scripted import RecordedClient, ReplyFunction, ScriptedClient, ScriptedReply

__all__ = [
    "CallKind",
    "Completion",
    "DeltaSink",
    "LLMClient",
    "Message",
    "Reasoning",
    "RecordedClient",
    "ReplyFunction",
    "Retry",
    "RetrySink",
    "ScriptedClient",
    "ScriptedReply",
    "WithOptions",
]
