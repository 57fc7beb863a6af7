"""The LLM client interface every engine component talks to.

Three clients implement it, each in its own module:

- ``OpenAIClient`` (``openai``): any OpenAI-compatible endpoint via the ``openai`` package.
- ``ScriptedClient`` (``scripted``): replies from a list or a file, for tests and ``cove demo``.
- ``RecordedClient`` (``scripted``): replies recorded in the database, for replay.

A client call is one round-trip. ``kind="iteration"`` asks for a protocol reply (a JSON object,
see ``protocol``); ``kind="subquery"`` is a free-form one-shot answer for ``llm_query``. Failures
surface as ``cove.errors.ModelError``; an empty reply is not a failure (the parser reports it to
the model). No client ever puts the API key in a message, a log record or a ``repr``.
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from cove.engine.budgets import IMAGE_CHARS
from cove.persistence.records import ModelOption
from cove.results import Usage

Reasoning = Literal["quick", "balanced", "deep"]
CallKind = Literal["iteration", "subquery"]
DeltaSink = Callable[[str], Awaitable[None]]
Message = Mapping[str, Any]
"""``{"role": ..., "content": text}``; a content may also be a list of parts (text and an image,
``with_image``)."""


@dataclass(frozen=True)
class Retry:
    """A request about to be sent again after a transient failure.

    Attributes:
        attempt: Which retry this is, from 1.
        of: How many retries the call may make in all.
        reason: What failed, for people (``HTTP 503``, ``no response``, …); never the API key.
    """

    attempt: int
    of: int
    reason: str


RetrySink = Callable[[Retry], Awaitable[None]]


@dataclass(frozen=True)
class Completion:
    """The result of one LLM round-trip.

    Attributes:
        text: The raw reply text, exactly as the model produced it.
        usage: Prompt and completion tokens (``cost_usd`` 0: the engine prices them).
        model: The model asked for (the name the price table knows, not the endpoint's
            dated variant).
        duration_ms: Wall-clock time of the call, retries included.
        estimated: True when the token counts are estimates (characters / 4) because the
            endpoint reported no usage.
    """

    text: str
    usage: Usage
    model: str
    duration_ms: float
    estimated: bool = False


class LLMClient(Protocol):
    """What the engine needs from a model: one round-trip at a time, and a lifecycle."""

    model: str

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
        """Send ``messages`` and return the model's reply.

        Args:
            messages: Chat messages (``{"role": ..., "content": ...}``), system first.
            kind: ``"iteration"`` for a protocol reply, ``"subquery"`` for a free-form answer.
            reasoning: Requested effort; mapped to ``reasoning_effort`` where supported.
            on_delta: Awaited with each chunk of reply text as it streams. If an attempt breaks
                mid-stream and is retried, the next attempt's chunks follow; the returned
                ``Completion.text`` is authoritative.
            options: Model options sent with the request as they are (``temperature``,
                ``max_tokens``, …); clients without a real model ignore them.
            on_retry: Awaited before each retry of a failed request, while the call waits
                (clients that never retry never call it).

        Raises:
            ModelError: When the endpoint fails for good or the client is closed.
        """
        ...

    async def models(self) -> list[str]:
        """The names of the models the client's endpoint offers, sorted.

        Raises:
            ModelError: The endpoint cannot list them (down, refused, unreachable).
        """
        ...

    async def aclose(self) -> None:
        """Release connections; later calls raise ``ModelError``."""
        ...


class WithOptions:
    """A client that sends the same model options with every call (a turn's ``-o`` options).

    It does not own the client it wraps: ``aclose`` leaves that one open.
    """

    def __init__(self, client: LLMClient, options: Mapping[str, ModelOption]) -> None:
        self.client = client
        self.model = client.model
        self.options = dict(options)

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
        """Call the wrapped client with these options (``options`` given here win)."""
        return await self.client.complete(
            messages,
            kind=kind,
            reasoning=reasoning,
            on_delta=on_delta,
            options={**self.options, **(options or {})},
            on_retry=on_retry,
        )

    async def models(self) -> list[str]:
        """The wrapped client's models."""
        return await self.client.models()

    async def aclose(self) -> None:
        """Nothing to release: the wrapped client belongs to its owner."""


def prompt_chars(messages: Sequence[Message]) -> int:
    """Total characters of the messages' contents, for token estimates (an image counts as
    ``IMAGE_CHARS``)."""
    total = 0
    for message in messages:
        content = message.get("content", "")
        if isinstance(content, str):
            total += len(content)
            continue
        for part in content:
            text = part.get("text")
            total += len(text) if isinstance(text, str) else IMAGE_CHARS
    return total


def with_image(text: str, png: bytes) -> list[dict[str, Any]]:
    """A message content of ``text`` followed by a PNG image (low detail: a fixed, small cost)."""
    url = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    return [
        {"type": "text", "text": text},
        {"type": "image_url", "image_url": {"url": url, "detail": "low"}},
    ]
