"""Replay: re-run a conversation's recorded replies in a fresh sandbox and compare.

Each recorded turn runs again through the same engine, with a ``RecordedClient`` giving back the
raw replies and sub-query answers, and ``RecordedInputs`` giving each block its recorded seed and
clock, against a scratch database. Every block's outcome and every variable version is compared
with the record. Workspace files are not versioned: the replay starts from a copy of the
conversation's current workspace.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from cove import codec
from cove.codec import DEFAULT_MAX_DEPTH
from cove.config import Settings
from cove.engine.approvals import RecordedVerdicts, recorded_verdicts
from cove.engine.determinism import RecordedInputs
from cove.engine.given import NoModel, given_block
from cove.engine.iteration import NOT_RUN_CANCELLED
from cove.engine.journal import block_ref
from cove.engine.llm.scripted import RecordedClient
from cove.engine.protocol import CodeBlock
from cove.engine.query import Query, TurnRequest
from cove.environment.environment import Environment
from cove.environment.extensions import builtin_extensions
from cove.environment.extensions.approval import Rule
from cove.environment.extensions.base import Extension
from cove.environment.sandbox.host.pool import WorkerPool
from cove.errors import CodecError
from cove.events import Event, ReplayFinished, ReplayTurnChecked, TurnFinished, TurnStarted
from cove.persistence.records import BlockRecord, IterationRecord, TurnRecord, VarVersionRecord
from cove.persistence.store import Store

COMPARED_FIELDS = ("ok", "result_preview", "stdout", "stderr", "error", "figures")
#: How a block killed by a cancellation reports its error.
KILLED = "CancelledError:"


async def replay_conversation(
    settings: Settings,
    store: Store,
    pool: WorkerPool,
    conversation_id: str,
    *,
    extensions: Sequence[Extension] | None = None,
    policy: Mapping[str, Rule] | None = None,
) -> AsyncIterator[Event]:
    """Replay a conversation, yielding one ``ReplayTurnChecked`` per turn and ``ReplayFinished``.

    Args:
        settings: The configuration (the scratch run uses the same sandbox limits).
        store: The store holding the recorded conversation (only read).
        pool: The worker pool the fresh sandbox comes from.
        conversation_id: Id or unique prefix of the conversation.
        extensions: The conversation's extensions (default: cove's built-ins).
        policy: Its approval policy; the recorded verdicts are given back whatever it says,
            and nobody is asked.
    """
    record = await store.resolve(conversation_id)
    transcript = await store.transcript(record.id)
    recorded_versions = _versions_by_turn(transcript.var_versions)
    approvals = await store.approvals(record.id)
    async with _scratch(settings.store.workspaces / record.id) as scratch:
        workspace = scratch / "workspace"
        async with Store.open(str(scratch / "replay.db")) as scratch_store:
            copy = await scratch_store.create_conversation(channel="replay", title=record.title)
            chosen = builtin_extensions() if extensions is None else tuple(extensions)
            await scratch_store.set_extension_use(copy.id, [e.name for e in chosen], {})
            env = await Environment.open(
                conversation_id=copy.id,
                settings=settings.sandbox,
                pool=pool,
                store=scratch_store,
                workspace=workspace,
                extensions=chosen,
                policy=policy,
            )
            total_blocks = total_mismatches = 0
            try:
                for turn in transcript.turns:
                    recorded = await store.profile(record.id, at_turn=turn.position)
                    checked = await _replay_turn(
                        settings,
                        scratch_store,
                        env,
                        copy.id,
                        turn,
                        recorded_versions.get(turn.position, []),
                        recorded_verdicts(approvals, turn.position),
                        recorded.instructions,
                    )
                    total_blocks += checked.blocks
                    total_mismatches += len(checked.mismatches)
                    yield checked
            finally:
                await env.aclose()
    yield ReplayFinished(
        conversation_id=record.id,
        turns=len(transcript.turns),
        blocks=total_blocks,
        mismatches=total_mismatches,
        ok=total_mismatches == 0,
    )


async def _replay_turn(
    settings: Settings,
    store: Store,
    env: Environment,
    conversation_id: str,
    turn: TurnRecord,
    versions: Sequence[VarVersionRecord],
    verdicts: RecordedVerdicts,
    instructions: str | None,
) -> ReplayTurnChecked:
    stop = stop_point(turn)
    # The iterations whose model call is replayed: all but one stopped before its reply came.
    iterations = [it for it in turn.iterations if stop is None or (it.position, None) != stop]
    conversation = await store.get_conversation(conversation_id)
    query = Query(
        settings=settings,
        store=store,
        env=env,
        llm=NoModel() if turn.model is None else _recorded_client(turn, iterations),
        conversation=conversation,
        request=replace(_request(conversation_id, turn, iterations), instructions=instructions),
        inputs=_recorded_inputs(turn, iterations, stop),
        steering={it.position: list(it.steering) for it in iterations if it.steering},
        attachments=turn.attachments,
        approvals=verdicts,
    )
    replayed_status, position = await _run(query, turn.position)
    replayed = await store.transcript(conversation_id, turn=position)  # that turn only
    mismatches = _compare_blocks(turn, replayed.turns[0])
    mismatches += _compare_steering(turn, replayed.turns[0])
    mismatches += _compare_prompts(turn, replayed.turns[0])
    mismatches += _compare_versions(turn.position, versions, replayed.var_versions)
    blocks = sum(len(it.blocks) for it in turn.iterations)
    return ReplayTurnChecked(
        position=turn.position,
        blocks=blocks,
        matched=blocks - sum(1 for m in mismatches if m.startswith("block ")),
        mismatches=tuple(mismatches),
        recorded_status=turn.status,
        replayed_status=replayed_status,
    )


def _request(
    conversation_id: str, turn: TurnRecord, iterations: Sequence[IterationRecord]
) -> TurnRequest:
    """The turn as it was asked; a turn with no model runs its recorded block again."""
    if turn.model is None:  # a turn with no model (``given.py``)
        replies = [it.raw_reply for it in iterations if it.raw_reply is not None]
        block = given_block(replies[0]) if replies else CodeBlock(turn.request)
        return TurnRequest(conversation_id, block.code, no_model=True, timeout_s=block.timeout_s)
    return TurnRequest(
        conversation_id,
        turn.request,
        max_iterations=max(len(iterations), 1),
        model_options=turn.model_options,
    )


def stop_point(turn: TurnRecord) -> tuple[int, int | None] | None:
    """Where a cancelled or interrupted turn was stopped: (iteration, block), or None.

    The block is the position of the first block that did not finish (the number of blocks
    when all did), or None when the turn stopped before that iteration's reply arrived. A
    replay stops the turn at the same place, as a cancel would, instead of running the stopped
    code again (to its timeout, for the code someone had to stop).
    """
    if turn.status not in ("cancelled", "interrupted"):
        return None
    if not turn.iterations:
        return (0, None)
    last = turn.iterations[-1]
    if last.raw_reply is None:
        return (last.position, None)
    if last.status in ("ok", "error", "parse_error"):
        return (last.position + 1, None)  # stopped between two iterations
    finished = 0
    for block in sorted(last.blocks, key=lambda b: b.position):
        if _stopped(block):
            break
        finished += 1
    return (last.position, finished)


def _stopped(block: BlockRecord) -> bool:
    """A block the turn's stop killed or kept from running."""
    error = block.error or ""
    return not block.ok and (error == NOT_RUN_CANCELLED or error.startswith(KILLED))


def _recorded_client(turn: TurnRecord, iterations: Sequence[IterationRecord]) -> RecordedClient:
    """A client that answers with the recorded replies and sub-query replies, in order.

    An iteration whose model call failed has no reply: the replay fails there again.
    """
    return RecordedClient(
        [it.raw_reply for it in iterations],
        [sq.reply for it in iterations for sq in sorted(it.subqueries, key=lambda s: s.position)],
        model=turn.model or "recorded",
    )


def _recorded_inputs(
    turn: TurnRecord, iterations: Sequence[IterationRecord], stop: tuple[int, int | None] | None
) -> RecordedInputs:
    """The recorded seeds and clocks of the turn's iterations and blocks, and its stop."""
    return RecordedInputs(
        {(turn.position, it.position): it.seed or 0 for it in iterations},
        {
            (turn.position, it.position, b.position): (b.seed, b.clock)
            for it in iterations
            for b in it.blocks
        },
        None if stop is None else (turn.position, *stop),
    )


async def _run(query: Query, position: int) -> tuple[str, int]:
    """Run the replayed turn: its final status and the position it was recorded at."""
    status = "failed"
    async for event in query.run():
        if isinstance(event, TurnStarted):
            position = event.position
        elif isinstance(event, TurnFinished):
            status = event.status
    return status, position


def _compare_blocks(recorded: TurnRecord, replayed: TurnRecord) -> list[str]:
    mismatches: list[str] = []
    new = {(it.position, b.position): b for it in replayed.iterations for b in it.blocks}
    for it in recorded.iterations:
        for block in it.blocks:
            ref = block_ref(recorded.position, it.position, block.position)
            other = new.get((it.position, block.position))
            if other is None:
                mismatches.append(f"block {ref}: not re-executed")
                continue
            diff = _block_diff(block, other)
            if diff:
                mismatches.append(f"block {ref}: {diff}")
    return mismatches


def _compare_steering(recorded: TurnRecord, replayed: TurnRecord) -> list[str]:
    """The person's mid-turn messages must reach the same iterations again."""
    new = {it.position: it.steering for it in replayed.iterations}
    return [
        f"steering of iteration {it.position + 1} (turn {recorded.position}) was not replayed"
        for it in recorded.iterations
        if it.steering and new.get(it.position) != it.steering
    ]


def _compare_prompts(recorded: TurnRecord, replayed: TurnRecord) -> list[str]:
    """Each iteration must be sent the same system prompt again (the recorded instructions)."""
    new = {it.position: it.system_prompt_hash for it in replayed.iterations}
    return [
        f"the system prompt of iteration {it.position + 1} (turn {recorded.position}) differs"
        for it in recorded.iterations
        if it.position in new and new[it.position] != it.system_prompt_hash
    ]


def _block_diff(recorded: BlockRecord, replayed: BlockRecord) -> str | None:
    if _stopped(recorded) and _stopped(replayed):
        return None  # stopped in both: what a killed block had printed so far is not compared
    for name in COMPARED_FIELDS:
        before, after = getattr(recorded, name), getattr(replayed, name)
        if before != after:
            return f"{name} was {_short(before)}, replay gave {_short(after)}"
    return None


def _compare_versions(
    position: int, recorded: Sequence[VarVersionRecord], replayed: Sequence[VarVersionRecord]
) -> list[str]:
    def key(v: VarVersionRecord) -> tuple[str, int]:
        return (v.name, v.version)

    before = {key(v): v for v in recorded}
    after = {key(v): v for v in replayed}
    mismatches: list[str] = []
    for k in sorted(before.keys() | after.keys()):
        old, new = before.get(k), after.get(k)
        label = f"variable {k[0]} v{k[1]} (turn {position})"
        if old is None:
            mismatches.append(f"{label}: only in the replay")
        elif new is None:
            mismatches.append(f"{label}: missing from the replay")
        elif (old.kind, old.preview) != (new.kind, new.preview) or not _same_value(old, new):
            mismatches.append(
                f"{label}: was {_short(old.preview)}, replay gave {_short(new.preview)}"
            )
    return mismatches


def _same_value(recorded: VarVersionRecord, replayed: VarVersionRecord) -> bool:
    """Whether two versions hold the same value: the same digest (a thinned version keeps
    its own), or, for a value recorded whole before values were chunked, the same tree."""
    if recorded.digest == replayed.digest:
        return True
    if recorded.encoded is None or codec.refs(recorded.encoded):
        return False
    try:
        value = codec.decode(recorded.encoded)
        tree = codec.encode_tree(value, max_bytes=1 << 40, max_depth=DEFAULT_MAX_DEPTH)
    except CodecError:
        return False
    return tree.digest == replayed.digest


def _versions_by_turn(versions: Sequence[VarVersionRecord]) -> dict[int, list[VarVersionRecord]]:
    grouped: dict[int, list[VarVersionRecord]] = {}
    for version in versions:
        grouped.setdefault(version.turn_position, []).append(version)
    return grouped


def _short(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@contextlib.asynccontextmanager
async def _scratch(source: Path) -> AsyncIterator[Path]:
    """A temporary directory holding a copy of the workspace ``source`` as ``workspace``.

    Copying and removing run in a worker thread, off the event loop.
    """
    scratch = await asyncio.to_thread(tempfile.TemporaryDirectory, prefix="cove-replay-")
    try:
        await asyncio.to_thread(_copy_workspace, source, Path(scratch.name) / "workspace")
        yield Path(scratch.name)
    finally:
        await asyncio.to_thread(scratch.cleanup)


def _copy_workspace(source: Path, workspace: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, workspace, symlinks=True)
    workspace.mkdir(exist_ok=True)
