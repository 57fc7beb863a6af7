"""A real engine stack for tests: store file, worker pool, environment, and an LLM client."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from cove.config import Settings
from cove.engine.llm import LLMClient
from cove.engine.query import Query, TurnRequest
from cove.environment.environment import Environment
from cove.environment.sandbox.host.pool import WorkerPool
from cove.events import Event, TurnFinished
from cove.persistence.records import ConversationRecord
from cove.persistence.store import Store


@dataclass
class Stack:
    """One conversation on real parts."""

    settings: Settings
    store: Store
    pool: WorkerPool
    env: Environment
    conversation: ConversationRecord
    llm: LLMClient

    def query(self, request: str, **options: int) -> Query:
        """A turn in this conversation."""
        return Query(
            settings=self.settings,
            store=self.store,
            env=self.env,
            llm=self.llm,
            conversation=self.conversation,
            request=TurnRequest(self.conversation.id, request, **options),
        )

    async def turn(self, request: str, **options: int) -> tuple[list[Event], TurnFinished]:
        """Run a whole turn; its events and the final one."""
        events = [event async for event in self.query(request, **options).run()]
        self.conversation = await self.store.get_conversation(self.conversation.id)
        final = events[-1]
        assert isinstance(final, TurnFinished)
        return events, final


@contextlib.asynccontextmanager
async def engine_stack(settings: Settings, llm: LLMClient, tmp_path: Path) -> AsyncIterator[Stack]:
    """A store on ``tmp_path``, a worker pool, one conversation and its environment."""
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    async with Store.open(str(tmp_path / "cove.db")) as store:
        pool = WorkerPool(settings.sandbox, size=1)
        await pool.start()
        try:
            conversation = await store.create_conversation(channel="test")
            env = await Environment.open(
                conversation_id=conversation.id,
                settings=settings.sandbox,
                pool=pool,
                store=store,
                workspace=workspace,
            )
            try:
                yield Stack(settings, store, pool, env, conversation, llm)
            finally:
                await env.aclose()
        finally:
            await pool.aclose()
