"""Scripted models for channels that run without an endpoint (``cove demo``, tests)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cove.config import ModelSettings
from cove.conversation.conversations import LLMFactory
from cove.engine.llm import LLMClient
from cove.engine.llm.scripted import ScriptedClient


def scripted_factory(
    replies: Sequence[str | Mapping[str, Any]] | str | Path,
    *,
    subquery_replies: Sequence[str | Mapping[str, Any]] | None = None,
    delay_s: float = 0.0,
) -> LLMFactory:
    """An LLM factory whose one client plays ``replies`` (a list, or a JSON file path) in order."""
    if isinstance(replies, (str, Path)):
        client = ScriptedClient.from_file(replies, delay_s=delay_s)
    else:
        client = ScriptedClient(replies, subquery_replies=subquery_replies, delay_s=delay_s)

    def factory(settings: ModelSettings, model: str) -> LLMClient:
        return client

    return factory
