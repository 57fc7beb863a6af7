"""``Conversations``: the one API every channel uses (DESIGN §2).

It owns the store, the worker pool, the LLM clients and the live-environment cache, and hands
the work to its parts: ``Turns`` (send, cancel, steer), ``Workspaces`` (files, attachments),
``Watching`` (watchers of conversations and of the list). All of them are private: a channel
reaches them only through the public methods (``stats``, ``observe``, ``workspace``,
``database_created``, …), which a test keeps so.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterable, AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path

from cove.config import ModelSettings, Settings
from cove.conversation.deliveries import DeliveriesAPI
from cove.conversation.extensions import ConversationExtensions, ConversationPolicy
from cove.conversation.fork_titles import fork_title
from cove.conversation.handle import TurnHandle
from cove.conversation.lease import new_owner_id, owner_is_dead
from cove.conversation.live import LiveCache
from cove.conversation.memory import live_capacity, live_memory_budget, pss_bytes
from cove.conversation.profiles import ProfileAPI
from cove.conversation.reading import Reading
from cove.conversation.stats import ProcessStats
from cove.conversation.turns import Turns
from cove.conversation.variables import VariablesAPI
from cove.conversation.watch.api import WatchAPI
from cove.conversation.watch.watching import Tap, Watching
from cove.conversation.workspaces import Workspaces
from cove.engine.llm import LLMClient
from cove.engine.llm.fallback import FallbackClient
from cove.engine.prompt import checked_instructions
from cove.engine.query import TurnRequest
from cove.engine.replay import replay_conversation
from cove.environment.environment import Environment
from cove.environment.extensions.approval import Approver
from cove.environment.extensions.installed import Catalog
from cove.environment.sandbox.host.pool import WorkerPool
from cove.errors import Busy, ConfigError, CoveError, NotFound, StoreError
from cove.events import Event
from cove.persistence.opener import Opener
from cove.persistence.pacing import SendSlot
from cove.persistence.records import ConversationRecord, ModelOption
from cove.persistence.store import Store

LLMFactory = Callable[[ModelSettings, str], LLMClient]


def _openai_factory(settings: ModelSettings, model: str) -> LLMClient:
    if not settings.api_key and not settings.base_url:
        raise ConfigError(
            "no model endpoint is configured: set OPENAI_API_KEY (and OPENAI_BASE_URL for "
            "another OpenAI-compatible server), or try `cove demo` offline"
        )
    # Imported here: the openai package takes most of a second to import, and inspection
    # commands never talk to a model.
    from cove.engine.llm.openai import OpenAIClient

    return OpenAIClient(settings, model=model)


def _worker_memory(env: Environment) -> int | None:
    """What a live environment's worker takes (PSS), or None when it has none."""
    pid = env.worker_pid
    return pss_bytes(pid) if pid is not None else None


class Conversations(Reading, WatchAPI, VariablesAPI, ProfileAPI, DeliveriesAPI):
    """Create, drive, inspect, fork, replay and watch conversations. Use ``async with``.

    The reading methods (``get``, ``list``, ``inspect``, ``search``, …) are ``Reading``'s.
    """

    def __init__(
        self,
        settings: Settings,
        store: Store,
        pool: WorkerPool,
        llm_factory: LLMFactory,
        catalog: Catalog | None = None,
    ):
        super().__init__(settings, store)
        self._extensions = ConversationExtensions(settings, store, catalog)
        self._pool = pool
        self._llm_factory = llm_factory
        self._llms: dict[str, LLMClient] = {}
        self._fallbacks: dict[tuple[str, ...], FallbackClient] = {}
        self.owner = new_owner_id()
        #: Which ids new conversations may get (None: any). Several processes serving by
        #: conversation affinity set it so that a conversation created here runs here.
        self.new_ids: Callable[[str], bool] | None = None
        self._live = LiveCache(
            live_capacity(settings.sandbox.max_live_environments),
            self._open_environment,
            live_memory_budget(settings.sandbox.live_memory_mb),
            _worker_memory,
        )
        self._pool_started = False
        self._workspaces = Workspaces(settings.store.workspaces, settings.sandbox)
        self._watching = Watching(store, store.commits)
        self._turns = Turns(
            settings, store, self._live, self._watching, self._workspaces, self._llm, self.owner
        )

    @property
    def database_path(self) -> str:
        """The database: its file, or its URL without the password."""
        return self._store.path

    @property
    def database_created(self) -> bool:
        """True when opening created the database (it did not exist or was empty)."""
        return self._store.created

    def stats(self) -> ProcessStats:
        """What this process holds now: live environments, worker processes, watchers."""
        busy, idle = self._pool.worker_counts
        return ProcessStats(
            live_environments=len(self._live),
            live_capacity=self._live.capacity,
            live_memory_bytes=self._live.memory(),
            live_memory_budget_bytes=self._live.memory_budget or 0,
            evicted_for_memory=self._live.evicted_for_memory,
            workers_busy=busy,
            workers_idle=idle,
            watchers=self._watching.watcher_count(),
        )

    def observe(self, tap: Tap) -> None:
        """Call ``tap(event)`` for every event a turn run by this process publishes.

        Also for the ``TurnQueued`` notice of a send that waits and the ``cancelled`` end of
        one withdrawn while waiting. A tap runs synchronously on the publishing turn's task: it
        must be quick (a service derives its metrics and log context this way).
        """
        self._watching.observe(tap)

    def workspace(self, conversation_id: str) -> Path:
        """The directory of a conversation's files (it may not exist yet)."""
        return self._workspaces.path(conversation_id)

    async def receive_file(
        self, conversation_id: str, name: str, chunks: AsyncIterable[bytes]
    ) -> int:
        """Stream a file into a conversation's workspace as ``name`` (an upload); its size.

        Nothing is left behind when it is refused or the stream breaks.

        Raises:
            NotFound: No such conversation.
            CoveError: ``name`` is not a plain visible file name, or names a directory or link.
            QuotaExceeded: The file would take the workspace past its quota.
        """
        record = await self.get(conversation_id)
        return await self._workspaces.receive(record.id, name, chunks)

    async def running_elsewhere(self, conversation_id: str) -> bool:
        """Whether another live process holds the conversation's lease (runs its turn there):
        a lease that lapsed, or held by a process of this host that has died, does not count
        (``send`` takes it over).

        Raises:
            NotFound: Unknown conversation.
        """
        record = await self.get(conversation_id)
        holder, until = record.lease_owner, record.lease_until
        if holder in (None, self.owner) or (until or 0) <= time.time():
            return False
        return not owner_is_dead(holder)

    @property
    def accepting(self) -> bool:
        """False once the process stops taking turns (a service stopping): ``send`` refuses."""
        return self._turns.accepting

    @accepting.setter
    def accepting(self, value: bool) -> None:
        if value:
            self._turns.accepting = True
        else:
            self._turns.stop_accepting()

    @property
    def installed(self) -> Catalog:
        """The extensions installed (built in and from plugins) and the plugins that failed."""
        return self._extensions.catalog

    @staticmethod
    def open(
        settings: Settings,
        *,
        llm_factory: LLMFactory | None = None,
        read_only: bool = False,
        catalog: Catalog | None = None,
    ) -> Opener[Conversations]:
        """Open (and migrate) the database; the worker pool starts with the first turn.

        ``await`` the result, or use it directly: ``async with Conversations.open(s) as convs``.

        Args:
            settings: The configuration.
            llm_factory: Builds the LLM client for a model name; default ``OpenAIClient``.
            read_only: Only inspect: the database is opened for reading, nothing is created
                or written (no migration, no lease reaping); a missing database reads as empty.
            catalog: The installed extensions (default: discovered from the entry points
                when first needed).
        """
        return Opener(
            lambda: Conversations._open(settings, llm_factory, read_only, catalog),
            Conversations.aclose,
        )

    @classmethod
    async def _open(
        cls,
        settings: Settings,
        llm_factory: LLMFactory | None,
        read_only: bool,
        catalog: Catalog | None = None,
    ) -> Conversations:
        store = await Store.open(
            settings.store.database,
            read_only=read_only,
            history_budget=settings.store.history_budget_mb * 1024 * 1024,
        )
        try:
            if not read_only:
                await store.reap_dead_leases(owner_is_dead)
        except BaseException:
            await store.aclose()
            raise
        pool = WorkerPool(settings.sandbox)
        return cls(settings, store, pool, llm_factory or _openai_factory, catalog)

    # -- lifecycle of conversations --------------------------------------------------------

    async def create(
        self,
        channel: str = "cli",
        title: str | None = None,
        external_id: str | None = None,
        *,
        owner: str | None = None,
        extensions: Sequence[str] | None = None,
        policy: Mapping[str, str] | None = None,
        instructions: str | None = None,
        model: str | None = None,
    ) -> ConversationRecord:
        """Create a conversation with its own workspace directory.

        ``owner`` is the principal the channel acts for (a web user, a Telegram chat); calls
        that pass the same ``owner`` see only that owner's conversations. None: no owner.
        ``extensions`` names the extensions it gets (default: the settings' choice) and
        ``policy`` adds approval entries of its own (``{"write": "ask"}``); both are recorded
        with it and kept by its forks. ``instructions`` and ``model`` are its profile from its
        first turn (``set_profile``).

        Raises:
            ConfigError: An extension is not installed, or a policy entry is not
                allow, ask or deny; nothing is created.
            CoveError, ModelError: The instructions or the model are refused (as by
                ``set_profile``); nothing is created.
        """
        self._check_open()
        names = self._extensions.names_for_new(extensions)
        if instructions is not None:
            instructions = checked_instructions(instructions)
        if model is not None:
            model = await self.checked_model(model)
        record = await self._store.create_conversation(
            channel=channel,
            title=title,
            external_id=external_id,
            owner=owner,
            id_wanted=self.new_ids,
        )
        await self._extensions.record(record.id, names, policy)
        await self._workspaces.ensure(record.id)
        if instructions is not None or model is not None:
            await self._store.change_profile(record.id, instructions=instructions, model=model)
        return record

    async def for_external(
        self, channel: str, external_id: str, *, owner: str | None = None
    ) -> ConversationRecord:
        """Find the conversation bound to a channel's external id, creating it if needed."""
        self._check_open()
        found = await self._store.find_external(channel, external_id)
        if found is not None:
            return found
        try:
            return await self.create(channel=channel, external_id=external_id, owner=owner)
        except StoreError:  # created meanwhile by a concurrent caller (unique channel + id)
            found = await self._store.find_external(channel, external_id)
            if found is None:
                raise
            return found

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
        await self._store.set_title(record.id, title)
        return await self._store.get_conversation(record.id)

    async def fork(
        self, conversation_id: str, at_turn: int, *, request: str | None = None
    ) -> ConversationRecord:
        """A new conversation whose sandbox starts from the parent's variables as of ``at_turn``.

        ``at_turn`` 0 makes a branch that holds none of the parent's turns (its first turn is
        its own turn 1) but is linked to it: another first turn, as a retry of turn 1 wants.
        ``request``, what the fork is about to ask, names it a retry of the parent's turn
        ``at_turn + 1`` (the same request) or an edit of it (another one); without it the fork
        is a branch from ``at_turn`` (``fork_titles``).

        Raises:
            NotFound: Unknown conversation, or no such turn. Busy: That turn is still running.
        """
        parent = await self.get(conversation_id)
        turns = await self._store.turns(parent.id)
        if at_turn != 0 and not any(t.position == at_turn for t in turns):
            positions = ", ".join(str(t.position) for t in turns) or "none"
            raise NotFound(
                "turn",
                str(at_turn),
                f"conversation {parent.id} has no turn {at_turn} (turns: {positions})",
            )
        if any(t.position == at_turn and t.status == "running" for t in turns):
            raise Busy(parent.id, message=f"turn {at_turn} of {parent.id} is still running")
        asked = next((t.request for t in turns if t.position == at_turn + 1), None)
        siblings = await self._store.forks(parent.id)
        title = fork_title(
            parent.label,
            at_turn,
            asked=asked,
            request=request,
            taken=[s.title for s in siblings if s.title],
        )
        record = await self._store.create_conversation(
            channel=parent.channel,
            title=title,
            parent_id=parent.id,
            fork_turn=at_turn,
            owner=parent.owner,
        )
        await self._extensions.copy(parent.id, record.id)
        await self._workspaces.copy(parent.id, record.id)
        return record

    async def delete(self, conversation_id: str) -> None:
        """Delete a conversation, its history and its workspace (refused while a turn runs)."""
        record = await self.get(conversation_id)
        await self._turns.settled(record.id)
        if self._turns.busy(record.id):
            raise Busy(record.id, message=f"conversation {record.id} is running a turn")
        await self._live.drop(record.id)
        # The store refuses while another process holds the lease (its turn is running).
        await self._store.delete_conversation(record.id, lease_owner=self.owner)
        self._watching.forget(record.id)
        await self._workspaces.remove(record.id)

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
        model_options: Mapping[str, ModelOption] | None = None,
        approver: Approver | None = None,
        delivery: str | None = None,
    ) -> TurnHandle:
        """Run one turn; the handle streams its events (the last is ``TurnFinished``).

        ``model_options`` (``temperature``, ``max_tokens``, …) are sent with each of the turn's
        model calls and recorded with the turn. ``approver`` asks the sender's person about an
        extension call the policy says to ask about; without one such a call is denied.
        ``delivery`` names the kept delivery (``receive_delivery``) the turn answers: it starts
        only if that delivery has not started its turn, and finishes the delivery once recorded.

        Attachments are saved into the conversation's workspace before the turn starts.
        A second send on a busy conversation waits for its turn and first emits ``TurnQueued``;
        ``handle.cancel()`` withdraws it while it waits. Every watcher of the conversation sees
        the same events (``watch``).

        Raises:
            NotFound: Unknown conversation (or not ``owner``'s). Busy: Another process holds
                the conversation, or this one stopped accepting turns (it is shutting down).
                DeliveryTaken: ``delivery`` started its turn before, or is another process's.
        """
        self._check_open()
        if not self.accepting:
            raise Busy(conversation_id, message="cove is shutting down and takes no new turns")
        request = TurnRequest(
            conversation_id,
            text,
            tuple(attachments),
            model=model,
            max_iterations=max_iterations,
            model_options=dict(model_options or {}),
            owner=owner,
            approver=approver,
            delivery=delivery,
        )
        return self._turns.send(request)

    def execute(
        self,
        conversation_id: str,
        code: str,
        *,
        timeout_s: float | None = None,
        owner: str | None = None,
    ) -> TurnHandle:
        """Run ``code`` in the conversation's sandbox as a turn of its own, with no model.

        The caller wrote the code (an agent, a script): it runs as the turn's one block and
        is recorded, queued, watched, cancelled, forked and replayed like any turn (the turn
        records no model; ``engine/given.py``). The turn ends ``done`` when the block
        succeeded, ``failed`` with the block's error when it did not.

        Args:
            conversation_id: The conversation (id or unique prefix).
            code: The Python source of the block.
            timeout_s: The block's time limit, clamped to the sandbox's bounds; None: the
                configured ``block_timeout_s``.
            owner: The principal the conversation must belong to.

        Raises:
            CoveError: The code is empty. NotFound, Busy: as for ``send``.
        """
        self._check_open()
        if not code.strip():
            raise CoveError("the code is empty")
        if not self.accepting:
            raise Busy(conversation_id, message="cove is shutting down and takes no new turns")
        request = TurnRequest(
            conversation_id, code, owner=owner, no_model=True, timeout_s=timeout_s
        )
        return self._turns.send(request)

    def check_model(self, model: str | None = None) -> None:
        """Build the client for ``model`` now, so a missing endpoint fails before any turn.

        Raises:
            ConfigError: No model endpoint is configured.
        """
        self._llm(model or self.settings.model.name)

    async def cancel(self, conversation_id: str, *, owner: str | None = None) -> bool:
        """Cancel the running turn of a conversation, in this process or in another one.

        A turn this process runs stops at once. A turn another process runs is asked to stop
        through the store: that process cancels it as a local cancel would (the usual
        ``cancelled`` record, a running block killed) within moments, and every watcher —
        the caller's ``watch`` stream included — sees it end. A turn still queued here is
        withdrawn with its handle (``TurnHandle.cancel``), not with this call.

        Returns:
            True when a running turn was cancelled or asked to stop; False when none runs.

        Raises:
            NotFound: Unknown conversation (or not ``owner``'s).
        """
        return await self._turns.cancel((await self.get(conversation_id, owner=owner)).id)

    async def steer(
        self, conversation_id: str, text: str, *, owner: str | None = None
    ) -> TurnHandle | None:
        """Fold a message from the person into the turn running now.

        The next iteration shows it to the model in its context message, records it with that
        iteration (``cove show``, replay) and emits ``SteerReceived``. With no turn running in
        this process it is sent as a turn instead (queued like ``send``), and a message that
        arrives after the last iteration began becomes the next turn.

        Returns:
            None when the running turn took it; else the handle of the turn it became.

        Raises:
            NotFound: Unknown conversation (or not ``owner``'s). CoveError: Empty message.
        """
        self._check_open()
        if not text.strip():
            raise CoveError("the message is empty")
        record = await self.get(conversation_id, owner=owner)
        if self._turns.steer(record.id, text):
            return None
        return self.send(record.id, text, owner=owner)

    # -- what channels share through the store ----------------------------------------------

    async def take_send_slot(self, keys: Sequence[tuple[str, float]], horizon_s: float) -> SendSlot:
        """Take a slot of a pace every process on the database keeps (``persistence/pacing.py``):
        ``keys`` are ``(key, interval_s)`` pairs, a slot is never taken more than ``horizon_s``
        ahead. For a channel's calls to a rate-limited outside API."""
        self._check_open()
        return await self._store.take_send_slot(keys, horizon_s)

    def replay(self, conversation_id: str) -> AsyncIterator[Event]:
        """Re-run the recorded replies in a fresh sandbox and scratch database; compare.

        The replay has the conversation's recorded extensions and its recorded approvals
        (nobody is asked).

        Raises:
            ConfigError: An extension the conversation was created with is not installed.
        """
        self._check_open()
        return self._replay(conversation_id)

    async def _replay(self, conversation_id: str) -> AsyncIterator[Event]:
        record = await self.get(conversation_id)
        choice = await self._extensions.choice(record.id, doing="replayed")
        events = replay_conversation(
            self.settings,
            self._store,
            self._pool,
            record.id,
            extensions=choice.extensions,
            policy=choice.policy,
        )
        async for event in events:
            yield event

    async def policy(self, conversation_id: str, *, owner: str | None = None) -> ConversationPolicy:
        """The conversation's approval policy: its own entries, the settings', each function's
        rule.

        Raises:
            NotFound: Unknown conversation (or not ``owner``'s).
            ConfigError: An extension it was created with is no longer installed.
        """
        record = await self.get(conversation_id, owner=owner)
        return await self._extensions.policy(record.id)

    async def set_policy(
        self, conversation_id: str, key: str, rule: str, *, owner: str | None = None
    ) -> ConversationPolicy:
        """Set the conversation's own policy entry ``key`` (a function, an extension or an
        effect) to ``rule`` (allow, ask, deny); its policy afterwards. A turn running now keeps
        the rule it started with; the next one uses the new one, in any process.

        Raises:
            NotFound: Unknown conversation (or not ``owner``'s).
            ConfigError: A bad rule, or a key naming nothing of the conversation.
        """
        record = await self.get(conversation_id, owner=owner)
        return await self._extensions.set_rule(record.id, key, rule)

    # -- internals -------------------------------------------------------------------------

    def _llm(self, model: str) -> LLMClient:
        """The client a turn asking for ``model`` uses: with the fallback list, one that goes
        on with the next model when one is unavailable."""
        chain = tuple(self.settings.model.fallbacks(model))
        if len(chain) == 1:
            return self._client(model)
        # One per list, kept: it remembers which model is down across the turns.
        fallback = self._fallbacks.get(chain)
        if fallback is None:
            fallback = self._fallbacks[chain] = FallbackClient([self._client(n) for n in chain])
        return fallback

    def _client(self, model: str) -> LLMClient:
        """The one client of ``model`` (on its own endpoint when the settings give one)."""
        client = self._llms.get(model)
        if client is None:
            settings = self.settings.model.for_model(model)
            client = self._llms[model] = self._llm_factory(settings, model)
        return client

    async def _open_environment(self, conversation_id: str) -> Environment:
        if not self._pool_started:
            self._pool_started = True
            await self._pool.start()
        workspace = await self._workspaces.ensure(conversation_id)
        choice = await self._extensions.choice(conversation_id, doing="opened")
        return await Environment.open(
            conversation_id=conversation_id,
            settings=self.settings.sandbox,
            pool=self._pool,
            store=self._store,
            workspace=workspace,
            extensions=choice.extensions,
            policy=choice.policy,
        )

    async def aclose(self) -> None:
        """Withdraw queued turns, cancel running ones, stop every worker, close the database.

        Idempotent.
        """
        if self._closed:
            return
        self._closed = True
        await self._turns.aclose()
        await self._watching.aclose()
        await self._live.aclose()
        for client in self._llms.values():
            await client.aclose()
        await self._pool.aclose()
        await self._store.aclose()
