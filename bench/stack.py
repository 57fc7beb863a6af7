"""The real engine stack for benchmarks: a store file, a worker pool, one conversation's
environment — all in a temporary directory."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from cove.config import Settings
from cove.environment.environment import Environment
from cove.environment.sandbox.host.pool import WorkerPool
from cove.persistence.records import ConversationRecord
from cove.persistence.store import Store


@dataclass
class BenchStack:
    """What a benchmark drives: settings, store, environment and its conversation."""

    settings: Settings
    store: Store
    env: Environment
    conversation: ConversationRecord


@contextlib.asynccontextmanager
async def bench_stack(**settings: object) -> AsyncIterator[BenchStack]:
    """A fresh store, one pre-started worker and a conversation's environment; all cleaned up."""
    with tempfile.TemporaryDirectory(prefix="cove-bench-") as tmp:
        config = Settings.load(env={}, data_dir=Path(tmp)).replace(**settings)
        async with Store.open(str(Path(tmp) / "cove.db")) as store:
            pool = WorkerPool(config.sandbox, size=1)
            await pool.start()
            try:
                conversation = await store.create_conversation(channel="bench")
                env = await Environment.open(
                    conversation_id=conversation.id,
                    settings=config.sandbox,
                    pool=pool,
                    store=store,
                    workspace=Path(tmp) / "workspace",
                )
                try:
                    yield BenchStack(config, store, env, conversation)
                finally:
                    await env.aclose()
            finally:
                await pool.aclose()
