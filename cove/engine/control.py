"""The running turn's mutable state and the hooks sandbox helpers use to reach the engine.

``TurnControl`` implements the extensions' ``TurnHooks`` protocol: ``request_more_iterations``,
``set_title`` and the ``llm_query`` sub-queries (bounded, concurrent, counted and recorded).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cove.config import LoopSettings, ModelSettings
from cove.engine.approvals import TurnApprovals
from cove.engine.llm import Completion, LLMClient, Reasoning
from cove.environment.extensions.approval import ApprovalRequest, Ruling, Verdict
from cove.errors import CoveError, ModelError
from cove.events import Event, TitleChanged
from cove.persistence.records import SubqueryWrite
from cove.persistence.store import Store
from cove.results import Usage

MAX_TITLE_CHARS = 80
MAX_SUBQUERY_PROMPT_CHARS = 100_000


def priced(prices: ModelSettings, model: str, usage: Usage) -> Usage:
    """``usage`` with its cost from the price table (0 for a model missing from it)."""
    price = prices.price_of(model)
    if price is None:
        return usage.at_cost(0.0)
    cost = usage.tokens_in * price.input_per_mtok + usage.tokens_out * price.output_per_mtok
    return usage.at_cost(cost / 1e6)


@dataclass
class TurnControl:
    """State of one running turn that both the loop and sandbox helpers touch."""

    loop: LoopSettings
    model_settings: ModelSettings  # the price table
    store: Store
    llm: LLMClient
    conversation_id: str
    request: str
    last_answer: str | None
    budget: int
    title: str | None = None
    usage: Usage = field(default_factory=Usage)  # the turn's calls so far
    outbox: list[Event] = field(default_factory=list)
    subqueries: list[SubqueryWrite] = field(default_factory=list)
    current_block: int | None = None
    current_iteration: int = 0  # the running iteration's position
    approvals: TurnApprovals | None = None  # None: nobody is asked and nothing is recorded
    reasoning: Reasoning = "balanced"
    cancel_requested: asyncio.Event = field(default_factory=asyncio.Event)
    running_llm: asyncio.Task[Any] | None = None
    steering: list[str] = field(default_factory=list)  # the person's notes, not yet shown
    scheduled_steering: dict[int, list[str]] = field(default_factory=dict)  # replay: by position
    unpriced_call: bool = False  # a model without a price answered: the turn's cost is unknown
    _extra_granted: int = 0
    _subquery_count: int = 0
    _semaphore: asyncio.Semaphore | None = None

    def count(self, completion: Completion) -> Usage:
        """Price one model call, add it to the turn's usage and return the call's usage."""
        if self.model_settings.price_of(completion.model) is None:
            self.unpriced_call = True  # a fallback model may have no price though the first has
        call = priced(self.model_settings, completion.model, completion.usage)
        self.usage = self.usage + call
        return call

    async def request_more_iterations(self, n: int) -> int:
        """Grant up to ``n`` more iterations within the per-call and total bounds.

        Returns:
            The new iteration budget of the turn.
        """
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError("request_more_iterations(n) needs a positive integer n")
        room = self.loop.max_extra_iterations_total - self._extra_granted
        grant = min(n, self.loop.max_extra_iterations_per_call, room)
        if grant <= 0:
            raise CoveError(
                f"no more iterations can be granted (already granted {self._extra_granted}, "
                f"the limit is {self.loop.max_extra_iterations_total}); answer now"
            )
        self._extra_granted += grant
        self.budget += grant
        return self.budget

    def take_steering(self, position: int) -> list[str]:
        """The notes iteration ``position`` shows the model: scheduled ones, then new ones."""
        notes = self.scheduled_steering.pop(position, []) + self.steering
        self.steering = []
        return notes

    async def approve(self, request: ApprovalRequest, ruling: Ruling, call: int) -> Verdict:
        """Decide (and record) an extension call the policy did not simply allow: the
        ``call``-th extension call of the running block."""
        if self.approvals is None:
            return Verdict(ruling.rule == "allow", "policy" if ruling.rule != "ask" else "nobody")
        place = (self.current_iteration, self.current_block or 0, call)
        return await self.approvals.approve(place, request, ruling)

    async def set_title(self, text: str) -> None:
        """Set the conversation's title (cut to a sensible length)."""
        title = " ".join(str(text).split())[:MAX_TITLE_CHARS]
        if not title:
            raise ValueError("set_title needs a non-empty title")
        if title != self.title:
            await self.store.set_title(self.conversation_id, title)
            self.title = title
            self.outbox.append(TitleChanged(conversation_id=self.conversation_id, title=title))

    async def llm_query(self, prompt: str) -> str:
        """Ask the model a one-shot question from inside code; recorded and costed."""
        return (await self.llm_query_batch([prompt]))[0]

    async def llm_query_batch(self, prompts: Sequence[str]) -> list[str]:
        """Ask several one-shot questions concurrently (bounded); results in prompt order."""
        prompts = [str(p) for p in prompts]
        if self._subquery_count + len(prompts) > self.loop.subquery_max_per_turn:
            raise CoveError(
                f"sub-query limit reached: at most {self.loop.subquery_max_per_turn} "
                "llm_query calls per turn"
            )
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.loop.subquery_concurrency)
        positions = list(range(self._subquery_count, self._subquery_count + len(prompts)))
        self._subquery_count += len(prompts)
        block = self.current_block
        results = await asyncio.gather(
            *(self._one_subquery(pos, block, p) for pos, p in zip(positions, prompts, strict=True))
        )
        return list(results)

    async def _one_subquery(self, position: int, block: int | None, prompt: str) -> str:
        if len(prompt) > MAX_SUBQUERY_PROMPT_CHARS:
            raise ValueError(f"llm_query prompt longer than {MAX_SUBQUERY_PROMPT_CHARS:,} chars")
        assert self._semaphore is not None
        async with self._semaphore:
            started = time.perf_counter()
            try:
                completion = await self.llm.complete(
                    [{"role": "user", "content": prompt}], kind="subquery"
                )
            except ModelError as exc:
                self.subqueries.append(
                    SubqueryWrite(
                        position=position,
                        block_position=block,
                        prompt=prompt,
                        reply=None,
                        model=self.llm.model,
                        duration_ms=(time.perf_counter() - started) * 1000,
                        error=str(exc),
                    )
                )
                raise
        self.subqueries.append(
            SubqueryWrite(
                position=position,
                block_position=block,
                prompt=prompt,
                reply=completion.text,
                model=completion.model,
                usage=self.count(completion),
                duration_ms=completion.duration_ms,
            )
        )
        return completion.text

    def take_subqueries(self) -> tuple[SubqueryWrite, ...]:
        """The sub-queries made since the last call, in call order."""
        taken = tuple(sorted(self.subqueries, key=lambda s: s.position))
        self.subqueries.clear()
        return taken

    def take_events(self) -> list[Event]:
        """Events produced by helpers since the last call."""
        events, self.outbox = self.outbox, []
        return events
