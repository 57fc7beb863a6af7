"""The environment: one live conversation's runtime.

It owns a sandbox worker (from the pool), the active extensions and the variable index, and turns
what the sandbox reports after each block into numbered variable versions for the engine to commit.

Rules that keep the stored state equal to the sandbox state:

- Version numbers continue the store's numbering of each name (deleted versions included).
- A variable the sandbox could not bring back (an ``opaque`` value after a restart or a reopen)
  gets a ``deleted`` version whose preview says it was lost; for a reopen it is written with the
  first block that runs afterwards.
- ``forget(*names)`` only records names while the block runs; when the block has finished the
  environment runs ``del`` for those still defined, and the deletions become versions of the same
  block. A name created and forgotten in one block leaves no version at all.
"""

from __future__ import annotations

import asyncio
import logging
import reprlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cove import codec
from cove.codec.preview import text_of
from cove.codec.shapes import Definition, Opaque
from cove.environment.data_docs import data_docs
from cove.environment.extensions import builtin_extensions
from cove.environment.extensions.approval import (
    RULES,
    ApprovalRequest,
    Rule,
    Ruling,
    Verdict,
    decide,
    refusal,
)
from cove.environment.extensions.base import CallContext, Extension, NudgeContext, TurnHooks
from cove.environment.extensions.docs import render_docs
from cove.environment.extensions.observers import EventObservers
from cove.environment.extensions.quota import WorkspaceQuota
from cove.environment.extensions.registry import ExtensionRegistry, registry_for
from cove.environment.imports import import_binding, import_changes, import_snapshots
from cove.environment.sandbox.outcome import BlockOutcome, RestartReport
from cove.environment.var_index import VarIndex
from cove.errors import SandboxError
from cove.results import VarVersion

if TYPE_CHECKING:
    from cove.config import SandboxSettings
    from cove.environment.sandbox.host.client import SandboxClient
    from cove.environment.sandbox.host.pool import WorkerPool
    from cove.persistence.store import Store

log = logging.getLogger(__name__)

REOPEN_REASON = "reopened from the database"


class Environment:
    """One live conversation's runtime: a sandbox worker, its extensions and variable index.

    Build with ``Environment.open``; close with ``aclose``.

    Attributes:
        conversation_id: The conversation this environment runs.
        settings: The sandbox settings it was opened with.
        store: The store it reads history from (the engine writes).
        workspace: The conversation's workspace directory (the worker's working directory).
        extensions: The active extensions, in the order given.
        var_index: The current variables, most recently written first.
        restored: What came back, and what was lost, when the environment was opened.
        quota: The workspace's running usage, which the ``files`` extension writes through.
        policy: The approval policy of its extension calls (``approval.py``): the settings'
            entries, then the conversation's own, then answers remembered while it runs.
    """

    def __init__(
        self,
        *,
        conversation_id: str,
        settings: SandboxSettings,
        store: Store,
        workspace: Path,
    ) -> None:
        """Not for direct use: ``Environment.open`` builds a working environment."""
        self.conversation_id = conversation_id
        self.settings = settings
        self.store = store
        self.workspace = workspace
        self.extensions: tuple[Extension, ...] = ()
        self.var_index = VarIndex()
        self.restored = RestartReport(reason=REOPEN_REASON)
        #: The lease epoch its state was read or last written at, while nobody else held the
        #: lease; None when that is not known (see ``current_at``).
        self.state_epoch: int | None = None
        self.quota = WorkspaceQuota(workspace, settings)
        self.policy: dict[str, Rule] = {}
        self._remembered: set[str] = set()  # functions whose rule a person's answer set
        self._policy_read = True  # the conversation's own entries read in this turn (or open)
        self._owners: dict[
            str, tuple[str, str, bool]
        ] = {}  # function -> extension, effect, built in
        self._registry = ExtensionRegistry(())
        #: The event observers of its extensions (``Extension.observe``).
        self.observers = EventObservers(())
        self._client: SandboxClient | None = None
        self._hooks: TurnHooks | None = None
        self._closed = False
        self._block_position: int | None = None
        self._forget: list[str] = []
        self._calls = 0  # extension calls of the running block so far
        self._lost_on_open: dict[str, str] = {}  # name -> type name, written with the next block

    @classmethod
    async def open(
        cls,
        *,
        conversation_id: str,
        settings: SandboxSettings,
        pool: WorkerPool,
        store: Store,
        workspace: Path,
        extensions: Sequence[Extension] | None = None,
        as_of_turn: int | None = None,
        policy: Mapping[str, Rule] | None = None,
    ) -> Environment:
        """Acquire a worker and bring back the conversation's variables from the store.

        A fork needs nothing special: the store reads a fork's variables through its parent up to
        the fork turn.

        Args:
            conversation_id: The conversation (it must exist in the store).
            settings: The sandbox settings (limits, quotas).
            pool: The worker pool to acquire the sandbox worker from.
            store: The open store.
            workspace: The conversation's workspace directory (created if missing).
            extensions: The candidate extensions (default: core, files, llm); each one's
                ``activate(env)`` decides whether it is bound.
            as_of_turn: Restore the variables as of this turn position (default: the latest).
            policy: The approval policy of extension calls (default: none, so a plugin's
                call with an effect asks, and everything else runs).

        Raises:
            NotFound: The conversation does not exist in the store.
            SandboxError: The worker could not be started or configured.
            ConfigError: Two extensions bind the same name.
        """
        await asyncio.to_thread(workspace.mkdir, parents=True, exist_ok=True)
        env = cls(
            conversation_id=conversation_id, settings=settings, store=store, workspace=workspace
        )
        candidates = builtin_extensions() if extensions is None else tuple(extensions)
        env.extensions = tuple(e for e in candidates if e.activate is None or e.activate(env))
        env._registry = registry_for(env.extensions)
        env.observers = EventObservers(env.extensions)
        env.policy = dict(policy or {})
        builtins = builtin_extensions()
        env._owners = {
            f.name: (e.name, e.effect_of(f), any(e is b for b in builtins))
            for e in env.extensions
            for f in e.functions
        }
        env._client = await pool.acquire(workspace=workspace, on_call=env._on_call)
        try:
            await env._configure()
            await env._restore(as_of_turn)
        except BaseException:
            await env.aclose()
            raise
        return env

    def current_at(self, epoch: int) -> bool:
        """Whether the state it holds is still the conversation's, under a new lease ``epoch``.

        Every lease holder raises the epoch, so only the lease right after the one this state
        was read or written at proves that no other process wrote in between.
        """
        return self.state_epoch is not None and epoch == self.state_epoch + 1

    async def _restore(self, as_of_turn: int | None) -> None:
        # Read before the variables: a lease taken since shows as a later epoch.
        self.state_epoch = await self.store.settled_epoch(self.conversation_id)
        everything = await self.store.vars_as_of(self.conversation_id, None, include_deleted=True)
        for record in everything.values():
            self.var_index.reserve(record.name, record.version)
        if as_of_turn is None:
            state = everything
        else:
            state = await self.store.vars_as_of(
                self.conversation_id, as_of_turn, include_deleted=True
            )
        live = [r for r in state.values() if r.kind != "deleted"]
        modules = {r.name: import_binding(r) for r in live if r.kind == "module"}
        values = [r for r in live if r.kind != "module"]
        chunks = await self.store.value_chunks([r.encoded for r in values if r.encoded])
        report = await self._live().restore(
            [r.var_version() for r in values], imports=modules, chunks=chunks
        )
        current = {**self._live().snapshots(), **import_snapshots(self._live().imports())}
        lost = set(report.lost)
        for record in live:
            snap = current.get(record.name)
            if record.name in lost or snap is None:
                lost.add(record.name)
                self._lost_on_open[record.name] = record.type_name
                continue
            self.var_index.add(replace(snap, version=record.version))
        restored = tuple(r.name for r in live if r.name not in lost)
        self.restored = RestartReport(
            reason=REOPEN_REASON, restored=restored, lost=tuple(sorted(lost))
        )

    # -- turns ---------------------------------------------------------------------------------

    async def begin_turn(self, hooks: TurnHooks) -> None:
        """Bind the turn's hooks and refresh the per-turn constants (``REQUEST``...); the
        turn's first extension call takes in policy entries set since the last turn."""
        self._live()
        self._hooks = hooks
        self._policy_read = False
        await self._configure()

    async def _refresh_policy(self) -> None:
        """Take in the conversation's own policy entries changed since the environment read
        them (``cove policy``, an answer remembered in another process): once per turn, at
        its first extension call (a turn that calls none reads nothing)."""
        if self._policy_read:
            return
        self._policy_read = True
        use = await self.store.conversation_extensions(self.conversation_id)
        for key, rule in (use.policy if use is not None else {}).items():
            if rule in RULES and self.policy.get(key) != rule:
                self.policy[key] = rule
                self._remembered.discard(key)  # set by someone, not by an answer here

    def end_turn(self) -> None:
        """Unbind the turn's hooks; functions needing them fail clearly until the next turn."""
        self._hooks = None

    async def run_block(
        self, code: str, *, position: int, timeout_s: float, seed: int, clock: float
    ) -> BlockOutcome:
        """Run one code block and number the variable versions it produced.

        Args:
            code: The block's source.
            position: The block's position in its iteration (stored with each version).
            timeout_s: Wall-clock limit; on expiry the worker is replaced.
            seed: The block's random seed.
            clock: The wall-clock time the block sees.

        Returns:
            The sandbox's outcome, its ``changes`` numbered: the versions to commit with the
            block.

        Raises:
            SandboxError: The environment is closed or the sandbox failed beyond recovery.
        """
        client = self._live()
        self._block_position = position
        self._forget = []
        self._calls = 0
        imports_before = client.imports()
        try:
            outcome = await client.execute(
                code, timeout_s=timeout_s, seed=seed, clock=clock, position=position
            )
        finally:
            self._block_position = None
        changes = {snap.name: snap for snap in outcome.changes}
        changes.update(import_changes(imports_before, client.imports(), changes))
        lost = dict(self._lost_on_open)
        self._lost_on_open.clear()
        restart_reason = REOPEN_REASON
        if outcome.restart is not None:
            restart_reason = outcome.restart.reason
            for name in outcome.restart.lost:
                entry = self.var_index.get(name)
                lost[name] = entry.var.type_name if entry else "unknown"
        for name, type_name in lost.items():
            if name not in changes or changes[name].kind == "deleted":
                changes[name] = VarVersion(
                    name, "deleted", None, type_name, f"lost: not restorable ({restart_reason})"
                )
        for name, snap in (await self._apply_forget(timeout_s, seed, clock)).items():
            changes[name] = replace(snap, preview="forgotten")
        numbered = self._number(changes.values(), position, known=set(lost))
        return replace(outcome, changes=numbered)

    def _number(
        self, changes: Iterable[VarVersion], position: int, known: set[str]
    ) -> tuple[VarVersion, ...]:
        writes = []
        for snap in changes:
            entry = self.var_index.get(snap.name)
            if snap.kind == "deleted":
                if entry is None and snap.name not in known:
                    continue  # never stored as live: nothing to delete
                # The worker reports a deletion bare; the history reads better with the type.
                snap = replace(
                    snap,
                    type_name=snap.type_name or (entry.var.type_name if entry else ""),
                    preview=snap.preview or "deleted",
                )
            version = self.var_index.next_version(snap.name)
            numbered = replace(snap, version=version, block_position=position)
            writes.append(numbered)
            self.var_index.add(numbered)
        return tuple(writes)

    def forget_after_block(self, names: Sequence[str]) -> None:
        """Schedule ``names`` for deletion when the running block finishes (``core.forget``).

        Raises:
            RuntimeError: No block is running.
            ValueError: A name is an extension function or constant, or starts with ``_``.
        """
        if self._block_position is None:
            raise RuntimeError("forget() can only be called from a running block")
        bound = set(self._registry.names) | {c.name for e in self.extensions for c in e.constants}
        for name in names:
            if name in bound:
                raise ValueError(f"forget(): {name!r} is provided by an extension, not a variable")
            if name.startswith("_"):
                raise ValueError(f"forget(): {name!r} is not a variable name")
        self._forget.extend(names)

    async def _apply_forget(
        self, timeout_s: float, seed: int, clock: float
    ) -> dict[str, VarVersion]:
        names, self._forget = list(dict.fromkeys(self._forget)), []
        client = self._live()
        names = [n for n in names if (snap := client.snapshot(n)) and snap.kind != "deleted"]
        if not names:
            return {}
        outcome = await self._live().execute(
            f"del {', '.join(names)}", timeout_s=timeout_s, seed=seed, clock=clock
        )
        if not outcome.result.ok:
            deleting = ", ".join(names)
            raise SandboxError(f"forget() could not delete {deleting}: {outcome.result.error}")
        return {snap.name: snap for snap in outcome.changes}

    # -- what the engine reads -----------------------------------------------------------------

    def system_prompt_docs(self) -> str:
        """The active extensions' documentation for the system prompt (stable text), and the
        data libraries' when the sandbox offers them (``data_docs``)."""
        docs = render_docs(self.extensions)
        data = data_docs(self.settings)
        return f"{docs}\n\n{data}" if data else docs

    def extension_nudges(
        self, *, iteration: int | None = None, budget: int | None = None
    ) -> list[str]:
        """The active extensions' nudges for the next context message.

        A failing ``nudge`` is logged and skipped: a broken hint must not break the turn.

        Args:
            iteration: The coming iteration's 1-based number, when the caller knows it.
            budget: The turn's live iteration budget, when the caller knows it.
        """
        ctx = NudgeContext(self, self.conversation_id, self._hooks, iteration, budget)
        texts = []
        for ext in self.extensions:
            if ext.nudge is None:
                continue
            try:
                text = ext.nudge(ctx)
            except Exception:
                log.exception("nudge of extension %s failed", ext.name)
                continue
            if text:
                texts.append(text)
        return texts

    def value_text(self, name: str) -> str | None:
        """The text of variable ``name``'s current value (for ``{{name}}``), None if undefined."""
        snap = self._live().snapshot(name)
        if snap is None or snap.kind == "deleted":
            return None
        if snap.kind != "value" or not snap.encoded or not codec.is_restorable(snap.encoded):
            return snap.signature or snap.preview
        if codec.refs(snap.encoded):  # a large value: its text would not fit the answer anyway
            return snap.preview
        value: object = codec.decode(snap.encoded)
        if isinstance(value, (Definition, Opaque)):
            return snap.signature or snap.preview
        return text_of(value)  # never raises: any value the codec holds has a text

    # -- lifecycle -----------------------------------------------------------------------------

    async def kill_running(self) -> None:
        """Kill the running block at once (cancellation); the worker is replaced and restored."""
        await self._live().kill()

    async def aclose(self) -> None:
        """Release the worker and stop the event observers (after a short grace). Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._hooks = None
        client, self._client = self._client, None
        try:
            if client is not None:
                await client.aclose()
        finally:
            await self.observers.aclose()

    @property
    def closed(self) -> bool:
        """Whether ``aclose`` was called."""
        return self._closed

    @property
    def worker_pid(self) -> int | None:
        """The process id of the sandbox worker, while one runs for this environment."""
        return self._client.pid if self._client is not None else None

    def _live(self) -> SandboxClient:
        if self._closed or self._client is None:
            raise SandboxError(f"the environment of conversation {self.conversation_id} is closed")
        return self._client

    def _context(self) -> CallContext:
        return CallContext(
            environment=self,
            conversation_id=self.conversation_id,
            workspace=self.workspace,
            store=self.store,
            settings=self.settings,
            hooks=self._hooks,
            block_position=self._block_position,
            quota=self.quota,
        )

    async def _configure(self) -> None:
        ctx = self._context()
        constants = {c.name: c.resolve(ctx) for e in self.extensions for c in e.constants}
        await self._live().configure(functions=self._registry.names, constants=constants)

    async def _on_call(self, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        call, self._calls = self._calls, self._calls + 1  # every call counts: a stable place
        await self._approve(name, args, kwargs, call)
        return await self._registry.dispatch(self._context(), name, args, kwargs)

    async def _approve(self, name: str, args: list[Any], kwargs: dict[str, Any], call: int) -> None:
        """Let the call run, or raise the ``PermissionError`` the sandbox code sees.

        A call the policy does not simply allow goes to the turn, which asks (when the ruling
        is ``ask``) and records; the block's clocks stop while it waits. Outside a turn nobody
        can be asked: ``ask`` is a denial there.
        """
        owner = self._owners.get(name)
        if owner is None:
            return  # not a function of these extensions: the registry says so
        extension, effect, builtin = owner
        await self._refresh_policy()
        ruling = decide(
            self.policy, function=name, extension=extension, effect=effect, builtin=builtin
        )
        if name in self._remembered:
            ruling = Ruling(ruling.rule, "remembered")
        if not ruling.needs_turn:
            return
        request = ApprovalRequest(
            self.conversation_id, extension, name, effect, _arguments_text(args, kwargs)
        )
        if self._hooks is None:
            verdict = Verdict(
                ruling.rule == "allow", "policy" if ruling.rule != "ask" else "nobody"
            )
        else:
            async with self._live().paused():
                verdict = await self._hooks.approve(request, ruling, call)
        if verdict.remember and verdict.reason == "person":
            rule: Rule = "allow" if verdict.approved else "deny"
            self.policy[name] = rule
            self._remembered.add(name)
            await self.store.remember_rule(self.conversation_id, name, rule)
        if not verdict.approved:
            raise refusal(name, effect, verdict)


_ARGUMENTS = reprlib.Repr()
_ARGUMENTS.maxstring = _ARGUMENTS.maxother = 60


def _arguments_text(args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    """A short text of a call's (decoded, plain) arguments for the person to judge."""
    parts = [_ARGUMENTS.repr(a) for a in args] + [
        f"{k}={_ARGUMENTS.repr(v)}" for k, v in kwargs.items()
    ]
    text = ", ".join(parts)
    return text if len(text) <= 300 else text[:299] + "…"
