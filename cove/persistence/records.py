"""The shapes of what the store writes and reads.

Write shapes (``*Write``, and the shared ``BlockResult`` and ``VarVersion`` of
``cove.results``) are built by the engine and handed to ``Store``; record shapes (``*Record``)
come back from the read API, a stored block or variable version extending the shared shape with
where it is stored. All are frozen dataclasses; encoded values are the codec's JSON text (see
``cove.codec``), never pickles.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Literal

from cove.results import FLAT, BlockResult, TurnOutcome, TurnStatus, Usage, VarVersion
from cove.text import headline

ModelOption = float | int | str | bool  # one model option's value (temperature=0.2)

IterationStatus = Literal["running", "ok", "error", "parse_error", "interrupted", "cancelled"]


#: The longest name a conversation is listed under when it has no title yet.
LABEL_CHARS = 48
UNTITLED = "(untitled)"


@dataclass(frozen=True)
class ConversationRecord:
    """One conversation; ``parent_id``/``fork_turn`` are set on forks.

    ``first_request`` (the start of its first own turn's request) and ``last_status`` (the
    status of its latest own turn) are what lists show; both are None before its first turn.
    """

    id: str
    channel: str
    external_id: str | None
    title: str | None
    parent_id: str | None
    fork_turn: int | None
    workspace: str | None
    created_at: float
    updated_at: float
    lease_owner: str | None = None
    lease_until: float | None = None
    turn_count: int = 0
    owner: str | None = None  # the principal a channel set; None: no owner (local use)
    first_request: str | None = None
    last_status: str | None = None

    @property
    def label(self) -> str:
        """What lists call the conversation: its title, else the start of its first request."""
        return conversation_label(self.title, self.first_request)


def conversation_label(title: str | None, first_request: str | None) -> str:
    """The title, else the start of the first request (one line, cut), else ``(untitled)``."""
    if title and title.strip():
        return title
    if first_request and first_request.strip():
        return headline(first_request, LABEL_CHARS)
    return UNTITLED


@dataclass(frozen=True)
class SubqueryWrite:
    """One ``llm_query`` sub-query made from a block, in call order."""

    position: int
    block_position: int | None
    prompt: str
    reply: str | None
    model: str
    usage: Usage = field(default=Usage(), metadata=FLAT)
    duration_ms: float = 0.0
    error: str | None = None


@dataclass(frozen=True)
class ReplyWrite:
    """The model's reply to an iteration, recorded as soon as it arrives (``record_reply``).

    ``IterationRecord`` extends it, as ``BlockRecord`` extends ``BlockResult``: the reply's
    fields are declared here once. ``raw_reply`` is None only in the record of an iteration
    whose model call never answered.
    """

    raw_reply: str | None
    thinking: str | None = None
    usage: Usage = field(default=Usage(), metadata=FLAT)
    llm_ms: float = 0.0
    planned_blocks: tuple[str, ...] = ()  # the code of each block the reply asks to run
    model: str | None = None  # the model that answered (a fallback one when the turn's failed)


@dataclass(frozen=True)
class IterationWrite:
    """How an iteration ended; committed in one transaction by ``finish_iteration``.

    ``blocks``, ``var_versions`` and ``subqueries`` are what was not recorded yet (blocks
    recorded as they finished are not repeated). ``reply`` is the model's reply when it was not
    recorded on arrival (one that could not be parsed); None leaves what ``record_reply``
    stored, or no reply at all when the model call failed.
    """

    status: IterationStatus
    parse_error: str | None = None
    duration_ms: float = 0.0
    blocks: tuple[BlockResult, ...] = ()
    var_versions: tuple[VarVersion, ...] = ()
    subqueries: tuple[SubqueryWrite, ...] = ()
    refusal: str | None = None  # why the reply's answer was refused (status ``error``)
    reply: ReplyWrite | None = None


@dataclass(frozen=True)
class BlockRecord(BlockResult):
    """A stored block."""

    id: int = 0
    iteration_id: int = 0

    def result(self) -> BlockResult:
        """The block's result alone, without where it is stored."""
        return BlockResult(**{f.name: getattr(self, f.name) for f in fields(BlockResult)})


@dataclass(frozen=True)
class SubqueryRecord(SubqueryWrite):
    """A stored sub-query."""

    id: int = 0
    iteration_id: int = 0


@dataclass(frozen=True, kw_only=True)
class IterationRecord(ReplyWrite):
    """A stored iteration: its exact prompt, the reply (``ReplyWrite``'s fields) and how it
    ended."""

    id: int
    turn_id: int
    position: int
    status: IterationStatus
    system_prompt_hash: str
    context_message: str
    request_message: str
    parse_error: str | None
    duration_ms: float
    seed: int | None
    started_at: float
    blocks: tuple[BlockRecord, ...] = ()
    subqueries: tuple[SubqueryRecord, ...] = ()
    steering: tuple[str, ...] = ()  # the person's messages this iteration first showed
    refusal: str | None = None  # why the reply's answer was refused, if it was

    @property
    def running_block(self) -> int | None:
        """The position of the block running now, or running when the iteration stopped.

        Set for a running or interrupted (crash, lost process) iteration whose reply's blocks
        have not all been recorded; None otherwise.
        """
        if self.status in ("running", "interrupted") and len(self.blocks) < len(
            self.planned_blocks
        ):
            return len(self.blocks)
        return None


@dataclass(frozen=True)
class TurnRecord:
    """A stored turn; ``iterations`` is filled by transcript reads only."""

    id: int
    conversation_id: str
    position: int
    request: str
    status: TurnStatus
    answer: str | None
    confidence: str | None
    model: str | None
    usage: Usage = field(metadata=FLAT)
    started_at: float
    finished_at: float | None
    error: str | None
    iterations: tuple[IterationRecord, ...] = ()
    attachments: tuple[tuple[str, int], ...] = ()  # (file name, size in bytes)
    model_options: Mapping[str, ModelOption] = field(
        default_factory=dict
    )  # as sent, e.g. temperature
    cost_known: bool = True  # False: the model had no price, and ``cost_usd`` means unknown

    @property
    def outcome(self) -> TurnOutcome:
        """How the turn ended (for a running turn: ``running``, its usage so far)."""
        return TurnOutcome(self.status, self.answer, self.confidence, self.error, self.usage)


@dataclass(frozen=True, kw_only=True)
class VarVersionRecord(VarVersion):
    """A stored version of a named variable, with where and when it was written.

    ``encoded`` is the value's root (``cove.codec.chunks``): decode it with the chunks
    ``Store.value_chunks`` reads for it. ``digest`` names the value (equal values, equal
    digests), also once the history budget ``thinned`` the version (its value then is gone:
    ``encoded`` is None).
    """

    conversation_id: str
    turn_position: int
    iteration_position: int
    created_at: float
    digest: str | None = None
    thinned: bool = False

    def var_version(self) -> VarVersion:
        """The version alone, as the sandbox reports it, without where it is stored.

        The store keeps no signature: a function's preview is its signature.
        """
        shared = {f.name: getattr(self, f.name) for f in fields(VarVersion)}
        return VarVersion(
            **{**shared, "signature": self.preview if self.kind == "function" else None}
        )


NoteKind = Literal["nudge", "sandbox_restarted", "model_retry"]


@dataclass(frozen=True)
class TurnNote:
    """A nudge, sandbox restart or endpoint retry a turn's timeline showed, with the seq it was
    published under."""

    turn_id: int
    turn_position: int
    seq: int
    kind: NoteKind
    text: str  # the nudge; the restart's reason; the retry's reason
    restored: tuple[str, ...] = ()  # restarts: the variables restored
    lost: tuple[str, ...] = ()  # restarts: the variables lost
    nudge_kind: str | None = None  # nudges: the rule that gave it (``NudgeKind``)
    retry: tuple[int, int] | None = None  # retries: (which retry, how many the call may make)


@dataclass(frozen=True)
class Transcript:
    """A whole conversation: its turns (with iterations and blocks) and variable versions.

    For a fork, ``turns`` holds the parent's turns up to the fork point followed by its own.
    """

    conversation: ConversationRecord
    turns: tuple[TurnRecord, ...]
    var_versions: tuple[VarVersionRecord, ...] = field(default=())
    notes: tuple[TurnNote, ...] = field(default=())


@dataclass(frozen=True)
class SearchHit:
    """One full-text search match."""

    conversation_id: str
    turn_id: int | None
    turn_position: int | None
    kind: Literal["request", "answer", "code"]
    snippet: str  # the matched passage with each match in [brackets]
    text: str = ""  # the same passage without markup
    matches: tuple[tuple[int, int], ...] = ()  # (start, end) offsets of each match in ``text``
    label: str = UNTITLED  # what lists call the conversation (``ConversationRecord.label``)


@dataclass(frozen=True)
class ConversationScan:
    """What changed in the conversation list: for channels that keep a list current."""

    changed: tuple[ConversationRecord, ...]  # updated at or after the time asked for
    running: frozenset[str]  # conversations with a running turn
    count: int  # how many conversations exist
