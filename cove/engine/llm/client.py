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

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

Reasoning = Literal["quick", "balanced", "deep"]
CallKind = Literal["iteration", "subquery"]
DeltaSink = Callable[[str], Awaitable[None]]
Message = Mapping[str, str]


@dataclass(frozen=True)
class Completion:
    """The result of one LLM round-trip.

    Attributes:
        text: The raw reply text, exactly as the model produced it.
        tokens_in: Prompt tokens.
        tokens_out: Completion tokens.
        model: The model asked for (the name the price table knows, not the endpoint's
            dated variant).
        duration_ms: Wall-clock time of the call, retries included.
        estimated: True when the token counts are estimates (characters / 4) because the
            endpoint reported no usage.
    """

    text: str
    tokens_in: int
    tokens_out: int
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
    ) -> Completion:
        """Send ``messages`` and return the model's reply.

        Args:
            messages: Chat messages (``{"role": ..., "content": ...}``), system first.
            kind: ``"iteration"`` for a protocol reply, ``"subquery"`` for a free-form answer.
            reasoning: Requested effort; mapped to ``reasoning_effort`` where supported.
            on_delta: Awaited with each chunk of reply text as it streams. If an attempt breaks
                mid-stream and is retried, the next attempt's chunks follow; the returned
                ``Completion.text`` is authoritative.

        Raises:
            ModelError: When the endpoint fails for good or the client is closed.
        """
        ...

    async def aclose(self) -> None:
        """Release connections; later calls raise ``ModelError``."""
        ...


def estimate_tokens(chars: int) -> int:
    """Estimate a token count from a character count (characters / 4, rounded up)."""
    return (chars + 3) // 4


def prompt_chars(messages: Sequence[Message]) -> int:
    """Total characters of the messages' contents, for token estimates."""
    return sum(len(m.get("content", "")) for m in messages)
