"""``Conversations``: the one API every channel uses (DESIGN §2).

It owns the store, the worker pool, the LLM clients and the live-environment cache. A turn runs
as a background task feeding a queue, so a channel that stops listening (a closed browser tab)
never loses the turn; ``cancel`` is the only way to stop one.
"""

from __future__ import annotations

import asyncio
import builtins
import shutil
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any

from cove.config import Settings
from cove.conversation.follow import CommitPoller
from cove.conversation.handle import TurnHandle, withdrawn_event
from cove.conversation.hub import ConversationHub
from cove.conversation.lease import held_lease, new_owner_id, owner_is_dead
from cove.conversation.live import LiveCache, LiveConversation
from cove.conversation.opener import Opener
from cove.conversation.rebuild import keep_note
from cove.conversation.turn_queue import TurnQueue
from cove.conversation.watch_api import WatchAPI
from cove.conversation.watching import Watching
from cove.engine.llm import LLMClient
from cove.engine.query import Query, TurnOptions
from cove.engine.replay import replay_conversation
from cove.environment.environment import Environment
from cove.environment.sandbox.pool import WorkerPool
from cove.errors import Busy, ConfigError, CoveError, NotFound, StoreError
from cove.events import Event, TurnQueued
from cove.persistence.leases import INTERRUPTED
from cove.persistence.records import (
    ConversationRecord,
    IterationRecord,
    SearchHit,
    Transcript,
    VarVersionRecord,
)
from cove.persistence.store import Store

LLMFactory = Callable[[Settings, str], LLMClient]


def _openai_factory(settings: Settings, model: str) -> LLMClient:
    if not settings.api_key and not settings.base_url:
        raise ConfigError(
            "no model endpoint is configured: set OPENAI_API_KEY (and OPENAI_BASE_URL for "
            "another OpenAI-compatible server), or try `cove demo` offline"
        )
    # Imported here: the openai package takes most of a second to import, and inspection
    # commands never talk to a model.
    from cove.engine.llm_openai import OpenAIClient

    return OpenAIClient(settings, model=model)


class Conversations(WatchAPI):
    """Create, drive, inspect, fork, replay and watch conversations. Use ``async with``."""

    def __init__(self, settings: Settings, store: Store, pool: WorkerPool, llm_factory: LLMFactory):
        self.settings = settings
        self.store = store
        self.pool = pool
        self._llm_factory = llm_factory
        self._llms: dict[str, LLMClient] = {}
        self.owner = new_owner_id()
        self.live = LiveCache(settings.max_live_environments, self._open_environment)
        self._tasks: set[asyncio.Task[None]] = set()
        self._handles: set[TurnHandle] = set()  # turns sent and not yet ended
        self._pool_started = False
        self._admission = asyncio.Lock()
        self._turn_queues: dict[str, TurnQueue] = {}
        self._running: dict[str, Query] = {}
        self._closed = False
        self.watching = Watching(
            store,
            CommitPoller(store.path),
            cost_known=lambda model: settings.price_of(model or settings.model) is not None,
        )

    @staticmethod
    def open(
        settings: Settings, *, llm_factory: LLMFactory | None = None, read_only: bool = False
    ) -> Opener[Conversations]:
        """Open (and migrate) the database; the worker pool starts with the first turn.

        ``await`` the result, or use it directly: ``async with Conversations.open(s) as convs``.

        Args:
            settings: The configuration.
            llm_factory: Builds the LLM client for a model name; default ``OpenAIClient``.
            read_only: Only inspect: the database is opened for reading, nothing is created
                or written (no migration, no lease reaping); a missing database reads as empty.
        """
        return Opener(
            lambda: Conversations._open(settings, llm_factory, read_only), Conversations.aclose
        )

    @classmethod
    async def _open(
        cls, settings: Settings, llm_factory: LLMFactory | None, read_only: bool
    ) -> Conversations:
        store = await Store.open(settings.database, read_only=read_only)
        try:
            if not read_only:
                await store.reap_dead_leases(owner_is_dead)
        except BaseException:
            await store.aclose()
            raise
        return cls(settings, store, WorkerPool(settings), llm_factory or _openai_factory)

    async def __aenter__(self) -> Conversations:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- lifecycle of conversations --------------------------------------------------------

    async def create(
        self,
        channel: str = "cli",
        title: str | None = None,
        external_id: str | None = None,
        *,
        owner: str | None = None,
    ) -> ConversationRecord:
        """Create a conversation with its own workspace directory.

        ``owner`` is the principal the channel acts for (a web user, a Telegram chat); calls
        that pass the same ``owner`` see only that owner's conversations. None: no owner.
        """
        self._check_open()
        record = await self.store.create_conversation(
            channel=channel, title=title, external_id=external_id, owner=owner
        )
        workspace = self._workspace(record.id)
        workspace.mkdir(parents=True, exist_ok=True)
        return record

    async def for_external(
        self, channel: str, external_id: str, *, owner: str | None = None
    ) -> ConversationRecord:
        """Find the conversation bound to a channel's external id, creating it if needed."""
        self._check_open()
        found = await self.store.find_external(channel, external_id)
        if found is not None:
            return found
        try:
            return await self.create(channel=channel, external_id=external_id, owner=owner)
        except StoreError:  # created meanwhile by a concurrent caller (unique channel + id)
            found = await self.store.find_external(channel, external_id)
            if found is None:
                raise
            return found

    async def get(self, id_or_prefix: str, *, owner: str | None = None) -> ConversationRecord:
        """A conversation by id or unique id prefix (raises NotFound / AmbiguousId).

        With ``owner``, only that owner's conversations are found.
        """
        self._check_open()
        return await self.store.resolve(id_or_prefix, owner=owner)

    async def list(
        self,
        channel: str | None = None,
        limit: int = 50,
        before: float | None = None,
        *,
        owner: str | None = None,
    ) -> builtins.list[ConversationRecord]:
        """Conversations, newest first (only ``owner``'s when given)."""
        self._check_open()
        return await self.store.list_conversations(
            channel=channel, limit=limit, before=before, owner=owner
        )

    async def rename(
        self, conversation_id: str, title: str, *, owner: str | None = None
    ) -> ConversationRecord:
        """Give a conversation a new title (stripped, at most 200 characters); the record after.

        Raises:
            CoveError: The title is empty. NotFound: Unknown conversation (or not ``owner``'s).
        """
        title = title.strip()[:200]
        if not title:
            raise CoveError("the title is empty")
        record = await self.get(conversation_id, owner=owner)
        await self.store.set_title(record.id, title)
        return await self.store.get_conversation(record.id)

    async def fork(self, conversation_id: str, at_turn: int) -> ConversationRecord:
        """A new conversation whose sandbox starts from the parent's variables as of ``at_turn``."""
        parent = await self.get(conversation_id)
        turns = await self.store.turns(parent.id)
        if not any(t.position == at_turn for t in turns):
            positions = ", ".join(str(t.position) for t in turns) or "none"
            raise NotFound(
                "turn",
                str(at_turn),
                f"conversation {parent.id} has no turn {at_turn} (turns: {positions})",
            )
        if any(t.position == at_turn and t.status == "running" for t in turns):
            raise Busy(parent.id, message=f"turn {at_turn} of {parent.id} is still running")
        title = f"{parent.title or 'untitled'} (fork at turn {at_turn})"
        record = await self.store.create_conversation(
            channel=parent.channel,
            title=title,
            parent_id=parent.id,
            fork_turn=at_turn,
            owner=parent.owner,
        )
        source = self._workspace(parent.id)
        target = self._workspace(record.id)
        if source.is_dir():
            shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
        target.mkdir(parents=True, exist_ok=True)
        return record

    async def delete(self, conversation_id: str) -> None:
        """Delete a conversation, its history and its workspace (refused while a turn runs)."""
        record = await self.get(conversation_id)
        if record.id in self._turn_queues:
            raise Busy(record.id, message=f"conversation {record.id} is running a turn")
        await self.live.drop(record.id)
        # The store refuses while another process holds the lease (its turn is running).
        await self.store.delete_conversation(record.id, lease_owner=self.owner)
        self.watching.forget(record.id)
        shutil.rmtree(self._workspace(record.id), ignore_errors=True)

    # -- turns -----------------------------------------------------------------------------

    def send(
        self,
        conversation_id: str,
        text: str,
        attachments: Sequence[tuple[str, bytes]] = (),
        *,
        model: str | None = None,
        max_iterations: int | None = None,
        owner: str | None = None,
    ) -> TurnHandle:
        """Run one turn; the handle streams its events (the last is ``TurnFinished``).

        Attachments are saved into the conversation's workspace before the turn starts.
        A second send on a busy conversation waits for its turn and first emits ``TurnQueued``;
        ``handle.cancel()`` withdraws it while it waits. Every watcher of the conversation sees
        the same events (``watch``).

        Raises:
            NotFound: Unknown conversation (or not ``owner``'s). Busy: Another process holds
                the conversation.
        """
        self._check_open()
        handle = TurnHandle(conversation_id)
        task = asyncio.create_task(
            self._run_turn(conversation_id, text, attachments, model, max_iterations, handle, owner)
        )
        handle.task = task
        self._tasks.add(task)
        self._handles.add(handle)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(lambda _: self._handles.discard(handle))
        return handle

    async def _run_turn(
        self,
        conversation_id: str,
        text: str,
        attachments: Sequence[tuple[str, bytes]],
        model: str | None,
        max_iterations: int | None,
        handle: TurnHandle,
        owner: str | None,
    ) -> None:
        stream = handle.watcher
        try:
            async with self._admission:  # FIFO: sends join their queues in the order they came
                record = await self.store.resolve(conversation_id, owner=owner)
                handle.conversation_id = record.id
                turns = self._turn_queues.setdefault(record.id, TurnQueue())
                ticket = turns.join()
            try:
                if not ticket.is_set():
                    stream.push(TurnQueued(conversation_id=record.id, request=text))
                    await ticket.wait()
                handle.started = True
                hub = self.watching.hub(record.id)
                hub.local_turns += 1  # before the turn's first commit: the follower stands by
                hub.attach(stream)
                try:
                    async with self.live.use(record.id) as entry:
                        await self._turn_locked(
                            entry, record.id, text, attachments, model, max_iterations, hub, handle
                        )
                finally:
                    hub.local_turns -= 1
                    hub.detach(stream)
            finally:
                turns.leave(ticket)
                if not turns.busy:
                    self._turn_queues.pop(record.id, None)
        except asyncio.CancelledError as exc:
            if handle.withdrawn and not handle.started:
                stream.push(withdrawn_event(handle.conversation_id))
                stream.close()
                return
            stream.close(exc)
            raise
        except BaseException as exc:
            stream.close(exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            stream.close()

    async def _turn_locked(
        self,
        entry: LiveConversation,
        conversation_id: str,
        text: str,
        attachments: Sequence[tuple[str, bytes]],
        model: str | None,
        max_iterations: int | None,
        hub: ConversationHub,
        handle: TurnHandle,
    ) -> None:
        record = await self.store.get_conversation(conversation_id)
        saved = self._save_attachments(record.id, attachments)
        query = Query(
            settings=self.settings,
            store=self.store,
            env=entry.env,
            llm=self._llm(model or self.settings.model),
            conversation=record,
            request=text,
            options=TurnOptions(max_iterations=max_iterations),
            attachments=saved,
        )

        def lost() -> None:
            task = asyncio.get_running_loop().create_task(query.cancel())
            self._tasks.add(task)  # held until done: no task without a reference
            task.add_done_callback(self._tasks.discard)

        async with held_lease(self.store, record.id, self.owner, self.settings.lease_ttl_s, lost):
            self._running[record.id] = query
            handle.query = query
            try:
                async for event in query.run():
                    stamped = hub.publish(event)
                    if stamped is not None:
                        await keep_note(self.store, stamped)
            finally:
                del self._running[record.id]
                handle.query = None
        late = query.take_unshown_steering()
        if late and not self._closed:  # came after the last iteration began: the next turn
            self.send(record.id, "\n\n".join(late))

    def check_model(self, model: str | None = None) -> None:
        """Build the client for ``model`` now, so a missing endpoint fails before any turn.

        Raises:
            ConfigError: No model endpoint is configured.
        """
        self._llm(model or self.settings.model)

    async def cancel(self, conversation_id: str) -> bool:
        """Cancel the running turn of a conversation; False when none is running here."""
        query = self._running.get((await self.get(conversation_id)).id)
        if query is None:
            return False
        await query.cancel()
        return True

    # -- inspection ------------------------------------------------------------------------

    async def inspect(
        self, conversation_id: str, turn: int | None = None, *, owner: str | None = None
    ) -> Transcript:
        """The transcript: turns → iterations → blocks, variable versions, usage."""
        record = await self.get(conversation_id, owner=owner)
        transcript = await self.store.transcript(record.id, turn=turn)
        if turn is not None and not transcript.turns:
            positions = [t.position for t in await self.store.turns(record.id)]
            shown = f"{positions[0]}..{positions[-1]}" if positions else "none yet"
            raise NotFound(
                "turn", str(turn), f"conversation {record.id} has no turn {turn} (turns: {shown})"
            )
        if self.store.read_only:
            return _as_recovered(transcript)
        return transcript

    async def system_prompt(self, digest: str) -> str:
        """The system prompt stored under ``digest`` (an iteration's ``system_prompt_hash``)."""
        self._check_open()
        return await self.store.system_prompt(digest)

    async def var_history(self, conversation_id: str, name: str) -> builtins.list[VarVersionRecord]:
        """Every version of one variable, oldest first."""
        record = await self.get(conversation_id)
        return await self.store.var_history(record.id, name)

    async def variables(self, conversation_id: str) -> dict[str, VarVersionRecord]:
        """The current version of every variable."""
        record = await self.get(conversation_id)
        return await self.store.vars_as_of(record.id)

    async def search(
        self, text: str, conversation_id: str | None = None, *, owner: str | None = None
    ) -> builtins.list[SearchHit]:
        """Full-text search over requests, answers and code (in ``owner``'s conversations)."""
        self._check_open()
        if conversation_id is not None:
            conversation_id = (await self.get(conversation_id, owner=owner)).id
        return await self.store.search(text, conversation_id=conversation_id, owner=owner)

    def replay(self, conversation_id: str) -> AsyncIterator[Event]:
        """Re-run the recorded replies in a fresh sandbox and scratch database; compare."""
        self._check_open()
        return replay_conversation(self.settings, self.store, self.pool, conversation_id)

    # -- internals -------------------------------------------------------------------------

    def _workspace(self, conversation_id: str) -> Path:
        return self.settings.workspaces / conversation_id

    def _save_attachments(
        self, conversation_id: str, attachments: Sequence[tuple[str, bytes]]
    ) -> tuple[tuple[str, int], ...]:
        """Write the files into the workspace; return their (name, size) for the request."""
        workspace = self._workspace(conversation_id)
        workspace.mkdir(parents=True, exist_ok=True)
        saved: dict[str, int] = {}
        for name, data in attachments:
            safe = Path(name).name
            if not safe or safe.startswith("."):
                raise CoveError(f"attachment name {name!r} is not allowed")
            (workspace / safe).write_bytes(data)
            saved[safe] = len(data)
        return tuple(saved.items())

    def _llm(self, model: str) -> LLMClient:
        client = self._llms.get(model)
        if client is None:
            client = self._llms[model] = self._llm_factory(self.settings, model)
        return client

    async def _open_environment(self, conversation_id: str) -> Environment:
        if not self._pool_started:
            self._pool_started = True
            await self.pool.start()
        workspace = self._workspace(conversation_id)
        workspace.mkdir(parents=True, exist_ok=True)
        return await Environment.open(
            conversation_id=conversation_id,
            settings=self.settings,
            pool=self.pool,
            store=self.store,
            workspace=workspace,
        )

    def _check_open(self) -> None:
        if self._closed:
            raise CoveError("Conversations is closed")

    async def aclose(self) -> None:
        """Withdraw queued turns, cancel running ones, stop every worker, close the database.

        Idempotent.
        """
        if self._closed:
            return
        self._closed = True
        for handle in list(self._handles):
            if not handle.started:
                await handle.cancel()
        for query in list(self._running.values()):
            await query.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.watching.aclose()
        await self.live.aclose()
        for client in self._llms.values():
            await client.aclose()
        await self.pool.aclose()
        await self.store.aclose()


def _as_recovered(transcript: Transcript) -> Transcript:
    """Show a dead process's running turns as crash recovery would record them.

    A read-only open cannot run recovery, so a turn whose process died would still read as
    ``running``; it is shown ``interrupted`` (nothing is written).
    """
    conv = transcript.conversation
    live = (
        conv.lease_owner is not None
        and (conv.lease_until or 0) > time.time()
        and not owner_is_dead(conv.lease_owner)
    )
    if live or not any(t.status == "running" for t in transcript.turns):
        return transcript
    turns = []
    for turn in transcript.turns:
        if turn.status == "running" and turn.conversation_id == conv.id:
            iterations = tuple(
                replace(it, status="interrupted") if it.status == "running" else it
                for it in turn.iterations
            )
            turn = replace(
                turn,
                status="interrupted",
                error=INTERRUPTED,
                iterations=iterations,
                tokens_in=max(turn.tokens_in, _recorded(iterations, "tokens_in")),
                tokens_out=max(turn.tokens_out, _recorded(iterations, "tokens_out")),
                cost_usd=max(turn.cost_usd, _recorded(iterations, "cost_usd")),
            )
        turns.append(turn)
    return replace(transcript, turns=tuple(turns))


def _recorded(iterations: tuple[IterationRecord, ...], field: str) -> Any:
    """A total over iterations and their sub-queries, as crash recovery sums it."""
    return sum(getattr(it, field) for it in iterations) + sum(
        getattr(sq, field) for it in iterations for sq in it.subqueries
    )
