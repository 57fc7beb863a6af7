"""Clients that answer without a network: scripted replies (tests, ``cove demo``) and replay.

``ScriptedClient`` plays a list of replies: strings are sent as they are, mappings are
JSON-encoded, callables receive the messages and return either, and a ``ModelError`` instance is
raised (to script an endpoint failure). ``RecordedClient`` plays the raw replies recorded in the
database, in order, so a conversation can be re-executed.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeAlias

from cove.engine.budgets import estimate_tokens
from cove.engine.llm.client import (
    CallKind,
    Completion,
    DeltaSink,
    Message,
    Reasoning,
    RetrySink,
    prompt_chars,
)
from cove.errors import ConfigError, ModelError
from cove.persistence.records import ModelOption
from cove.results import Usage

ReplyFunction: TypeAlias = Callable[[Sequence[Message]], "str | Mapping[str, Any]"]
ScriptedReply: TypeAlias = str | Mapping[str, Any] | ReplyFunction | ModelError
_STREAM_CHUNKS = 4


class ScriptedClient:
    """An LLM client that plays scripted replies in order.

    Attributes:
        model: The model name reported in completions.
        calls: Every call received, as ``(kind, reasoning, messages)``, oldest first.
    """

    def __init__(
        self,
        replies: Sequence[ScriptedReply],
        *,
        subquery_replies: Sequence[ScriptedReply] | ReplyFunction | None = None,
        delay_s: float = 0.0,
        model: str = "scripted",
    ) -> None:
        """Build a client.

        Args:
            replies: Iteration replies, consumed one per ``kind="iteration"`` call.
            subquery_replies: Sub-query replies, consumed one per ``kind="subquery"`` call, or
                one callable answering every sub-query; None means sub-queries are an error.
            delay_s: Seconds to wait before each reply (lets tests cancel mid-call).
            model: The model name reported in completions.
        """
        self.model = model
        self.calls: list[tuple[CallKind, Reasoning, list[dict[str, str]]]] = []
        self._replies = list(replies)
        self._subquery_replies = subquery_replies
        self._subquery_position = 0
        self._position = 0
        self._delay_s = delay_s
        self._closed = False

    @classmethod
    def from_file(cls, path: str | Path, *, delay_s: float = 0.0) -> ScriptedClient:
        """Load a reply script from a JSON file.

        The file holds a list of replies, or ``{"replies": [...], "subquery_replies": [...]}``.

        Raises:
            ConfigError: When the file cannot be read or has the wrong shape.
        """
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read reply script {path}: {exc}") from exc
        if isinstance(data, list):
            return cls(data, delay_s=delay_s)
        if isinstance(data, dict) and isinstance(data.get("replies"), list):
            sub = data.get("subquery_replies")
            if sub is not None and not isinstance(sub, list):
                raise ConfigError(f"reply script {path}: subquery_replies must be a list")
            return cls(data["replies"], subquery_replies=sub, delay_s=delay_s)
        raise ConfigError(
            f'reply script {path} must be a JSON list of replies or {{"replies": [...]}}'
        )

    @property
    def remaining(self) -> int:
        """How many iteration replies are left."""
        return len(self._replies) - self._position

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        kind: CallKind = "iteration",
        reasoning: Reasoning = "balanced",
        on_delta: DeltaSink | None = None,
        options: Mapping[str, ModelOption] | None = None,
        on_retry: RetrySink | None = None,
    ) -> Completion:
        """Play the next scripted reply of ``kind`` (see ``LLMClient.complete``)."""
        if self._closed:
            raise ModelError("the scripted LLM client is closed")
        started = time.perf_counter()
        self.calls.append((kind, reasoning, [dict(m) for m in messages]))
        if self._delay_s:
            await asyncio.sleep(self._delay_s)
        item = self._next(kind)
        if isinstance(item, ModelError):
            raise item
        if callable(item):
            item = item(messages)
        text = item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)
        if on_delta is not None:
            for chunk in _chunks(text, _STREAM_CHUNKS):
                await on_delta(chunk)
        return _estimated(text, messages, self.model, started)

    def _next(self, kind: CallKind) -> Any:
        if kind == "iteration":
            if self._position >= len(self._replies):
                raise ModelError(
                    f"the script ran out of replies: all {len(self._replies)} iteration "
                    "replies were used"
                )
            self._position += 1
            return self._replies[self._position - 1]
        source = self._subquery_replies
        if source is None:
            raise ModelError("the script has no sub-query replies")
        if callable(source):
            return source
        if self._subquery_position >= len(source):
            raise ModelError(
                f"the script ran out of sub-query replies: all {len(source)} were used"
            )
        self._subquery_position += 1
        return source[self._subquery_position - 1]

    async def models(self) -> list[str]:
        """The one model a script plays."""
        return [self.model]

    async def aclose(self) -> None:
        """Close the client; later calls raise ``ModelError``."""
        self._closed = True

    def __repr__(self) -> str:
        return f"ScriptedClient(model={self.model!r}, remaining={self.remaining})"


class RecordedClient:
    """An LLM client replaying raw replies recorded in the database.

    A recorded reply of None stands for a model call (an iteration's or a sub-query's) that
    failed when it was recorded; replaying it raises ``ModelError`` again.
    """

    def __init__(
        self,
        iteration_replies: Sequence[str | None],
        subquery_replies: Sequence[str | None],
        *,
        model: str = "recorded",
    ) -> None:
        """Build a client over recorded replies, each queue in recording order."""
        self.model = model
        self._queues: dict[CallKind, list[str | None]] = {
            "iteration": list(iteration_replies),
            "subquery": list(subquery_replies),
        }
        self._positions: dict[CallKind, int] = {"iteration": 0, "subquery": 0}
        self._closed = False

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        kind: CallKind = "iteration",
        reasoning: Reasoning = "balanced",
        on_delta: DeltaSink | None = None,
        options: Mapping[str, ModelOption] | None = None,
        on_retry: RetrySink | None = None,
    ) -> Completion:
        """Return the next recorded reply of ``kind`` (see ``LLMClient.complete``)."""
        if self._closed:
            raise ModelError("the replay LLM client is closed")
        started = time.perf_counter()
        queue, position = self._queues[kind], self._positions[kind]
        if position >= len(queue):
            raise ModelError("replay ran past the recorded replies")
        self._positions[kind] = position + 1
        text = queue[position]
        if text is None:
            raise ModelError(f"recorded {kind} {position + 1} had failed when it was recorded")
        if on_delta is not None and text:
            await on_delta(text)
        return _estimated(text, messages, self.model, started)

    async def models(self) -> list[str]:
        """The model the record names."""
        return [self.model]

    async def aclose(self) -> None:
        """Close the client; later calls raise ``ModelError``."""
        self._closed = True

    def __repr__(self) -> str:
        return f"RecordedClient(model={self.model!r})"


def _chunks(text: str, count: int) -> list[str]:
    size = max(1, -(-len(text) // count))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _estimated(text: str, messages: Sequence[Message], model: str, started: float) -> Completion:
    return Completion(
        text=text,
        usage=Usage(estimate_tokens(prompt_chars(messages)), estimate_tokens(len(text))),
        model=model,
        duration_ms=(time.perf_counter() - started) * 1000,
        estimated=True,
    )
