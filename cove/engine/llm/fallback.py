"""``FallbackClient``: one model call that goes on with the next model when one is unavailable.

Built for a turn's model when the settings name a fallback list (``ModelSettings.models``):
its clients are the turn's model, then the list's other models, each on its own endpoint
(``ModelSettings.for_model``). A call asks the first; when that model fails for good with a
failure that waiting might have cured — its retries exhausted on rate limits, 5xx answers,
timeouts, a lost connection (``ModelError.retryable``) — the same call is sent to the next,
after telling ``on_retry`` so the turn shows it. Any other failure (a refused key, an unknown
model, a bad request) is the caller's to see at once. A model that failed so is asked last for
the next ``COOL_DOWN_S`` (the following calls do not wait through its retries again), then
first again, so a model that recovers is used again. The ``Completion`` names the model that
answered: the iteration records it and prices the call at that model's price.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from cove.engine.llm.client import (
    CallKind,
    Completion,
    DeltaSink,
    LLMClient,
    Message,
    Reasoning,
    Retry,
    RetrySink,
)
from cove.errors import ModelError
from cove.persistence.records import ModelOption

#: How long a model whose retries ran out is asked only after the others.
COOL_DOWN_S = 60.0


class FallbackClient:
    """An ``LLMClient`` over several models, asked in order (see the module docstring).

    It does not own its clients: ``aclose`` leaves them open for their owner.

    Attributes:
        model: The first model, the one the turn asked for.
    """

    def __init__(self, clients: Sequence[LLMClient], cool_down_s: float = COOL_DOWN_S) -> None:
        """Ask ``clients`` in this order; there must be at least one."""
        if not clients:
            raise ValueError("a fallback client needs at least one model")
        self.clients = tuple(clients)
        self.model = self.clients[0].model
        self.cool_down_s = cool_down_s
        self._down_until: dict[int, float] = {}  # client index -> when it is asked first again

    def _order(self) -> list[int]:
        """The clients' indexes in the order this call asks them: those cooling down last."""
        now = time.monotonic()
        indexes = range(len(self.clients))
        cooling = [i for i in indexes if self._down_until.get(i, 0.0) > now]
        return [i for i in indexes if i not in cooling] + cooling

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
        """Send the call to each model in turn until one answers (see ``LLMClient.complete``).

        Raises:
            ModelError: The last model failed, or a model failed in a way another model would
                not cure.
        """
        order = self._order()
        for place, index in enumerate(order):
            client = self.clients[index]
            try:
                completion = await client.complete(
                    messages,
                    kind=kind,
                    reasoning=reasoning,
                    on_delta=on_delta,
                    options=options,
                    on_retry=on_retry,
                )
            except ModelError as exc:
                if not exc.retryable:
                    raise
                self._down_until[index] = time.monotonic() + self.cool_down_s
                if place == len(order) - 1:
                    raise
                if on_retry is not None:
                    following = self.clients[order[place + 1]].model
                    reason = f"{client.model} is unavailable ({exc.message}): trying {following}"
                    await on_retry(Retry(attempt=place + 1, of=len(order) - 1, reason=reason))
            else:
                self._down_until.pop(index, None)
                return completion
        raise AssertionError("unreachable: the last client returns or raises")

    async def models(self) -> list[str]:
        """The first model's endpoint's models (``Conversations.models`` lists every one)."""
        return await self.clients[0].models()

    async def aclose(self) -> None:
        """Nothing to release: the clients belong to their owner."""
