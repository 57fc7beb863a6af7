"""The event vocabulary: what a turn reports while it runs.

The engine yields these as an async iterator; the same stream feeds every channel (web SSE, TUI,
Telegram, ``cove run --events`` JSON lines). Each event is a frozen dataclass with a ``type``
discriminator and ``to_json()``. Events never carry secrets.

Every event carries ``conversation_id`` and ``seq``: the conversation layer stamps both as events
pass through it (the engine leaves them at their defaults). ``seq`` orders a conversation's
events across turns and processes; see ``cove.conversation.watch.sequence`` for how it is derived.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from cove.results import FLAT, BlockResult, TurnOutcome, TurnStatus, Usage, VarVersion

FINAL_STATUSES: frozenset[str] = frozenset(
    {"done", "max_iterations", "error_budget", "cancelled", "failed", "interrupted"}
)
#: How a turn's status reads in a list: ``running``, ``done``, ``failed`` (the model failed, ran
#: out of iterations or of its error budget), ``cancelled`` or ``interrupted`` (its process died).
Outcome = Literal["running", "done", "failed", "cancelled", "interrupted"]


def outcome(status: str | None) -> Outcome | None:
    """The group a turn status belongs to in lists (None: no turn yet)."""
    if status is None:
        return None
    return _OUTCOMES.get(status, "failed")


_OUTCOMES: dict[str, Outcome] = {
    "running": "running",
    "done": "done",
    "cancelled": "cancelled",
    "interrupted": "interrupted",
}


@dataclass(frozen=True)
class Event:
    """Base class of every event."""

    type: ClassVar[str] = "event"
    conversation_id: str = field(default="", kw_only=True)
    seq: int = field(default=0, kw_only=True)

    def to_json(self) -> dict[str, Any]:
        """The event as a JSON-ready dict with its ``type`` first."""
        return {"type": self.type, **jsonable(self, sent=True)}


def jsonable(value: Any, *, sent: bool = False) -> Any:
    """``value`` with dataclasses (events, records) turned into dicts, recursively, for JSON.

    The fields of a field marked ``cove.results.FLAT`` (a usage) stand in its place.

    Args:
        value: What to turn into JSON types.
        sent: Leave out the fields marked ``cove.results.LOCAL`` (encoded values), as events do.
    """
    kind: type = type(value)
    if kind in _PLAIN:
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        body: dict[str, Any] = {}
        for name, local, flat in _plan(kind):
            if sent and local:
                continue
            item = jsonable(getattr(value, name), sent=sent)
            if flat and isinstance(item, dict):
                body.update(item)
            else:
                body[name] = item
        return body
    if isinstance(value, (list, tuple)):
        return [jsonable(v, sent=sent) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v, sent=sent) for k, v in value.items()}
    return value


#: Types that are already JSON: returned as they are, without a look at their fields.
_PLAIN: frozenset[type] = frozenset({str, int, float, bool, type(None)})


@functools.cache
def _plan(kind: type) -> tuple[tuple[str, bool, bool], ...]:
    """Each field's name and whether it is marked ``local`` or ``flat``, read from the
    dataclass's metadata once (events are turned into JSON once each, many per turn)."""
    return tuple(
        (f.name, bool(f.metadata.get("local")), bool(f.metadata.get("flat")))
        for f in dataclasses.fields(kind)
    )


@dataclass(frozen=True)
class TurnQueued(Event):
    """A send waits because another turn of the same conversation is running."""

    type: ClassVar[str] = "turn_queued"
    request: str


@dataclass(frozen=True)
class TurnStarted(Event):
    """A turn began and was recorded with status ``running``."""

    type: ClassVar[str] = "turn_started"
    turn_id: int
    position: int
    request: str


@dataclass(frozen=True)
class IterationStarted(Event):
    """An LLM round-trip begins; ``budget`` is the live iteration budget of the turn."""

    type: ClassVar[str] = "iteration_started"
    turn_id: int
    iteration: int
    budget: int


@dataclass(frozen=True)
class ModelDelta(Event):
    """A chunk of the model's raw reply text, as it streams."""

    type: ClassVar[str] = "model_delta"
    turn_id: int
    iteration: int
    text: str


@dataclass(frozen=True)
class ModelRetry(Event):
    """The model endpoint failed for a moment and the request is being sent again.

    ``attempt`` counts the retries of this call from 1, ``of`` is how many it may make;
    ``reason`` says what failed (``server error (HTTP 503)``, ``no response``, …).
    """

    type: ClassVar[str] = "model_retry"
    turn_id: int
    iteration: int
    attempt: int
    of: int
    reason: str


@dataclass(frozen=True)
class ModelReply(Event):
    """The model's parsed reply for one iteration; ``model`` is the model that answered (a
    fallback model when the turn's own was unavailable; None for a turn with no model)."""

    type: ClassVar[str] = "model_reply"
    turn_id: int
    iteration: int
    thinking: str
    code: tuple[str, ...]
    answer: str | None = None
    parse_error: str | None = None
    model: str | None = None


@dataclass(frozen=True)
class BlockStarted(Event):
    """A code block starts running in the sandbox."""

    type: ClassVar[str] = "block_started"
    turn_id: int
    iteration: int
    index: int
    code: str


@dataclass(frozen=True)
class BlockFinished(Event):
    """A code block finished (or failed, or timed out); ``index`` is 1-based like the model's."""

    type: ClassVar[str] = "block_finished"
    turn_id: int
    iteration: int
    index: int
    block: BlockResult


@dataclass(frozen=True)
class VarsChanged(Event):
    """Variables created, changed or deleted by an iteration's blocks (``kind`` ``deleted``)."""

    type: ClassVar[str] = "vars_changed"
    turn_id: int
    iteration: int
    changes: tuple[VarVersion, ...]


@dataclass(frozen=True)
class AnswerRefused(Event):
    """The reply's answer was refused (an undefined ``{{name}}``, a failed block of the same
    reply): the iteration is an error and the turn goes on; ``reason`` says why."""

    type: ClassVar[str] = "answer_refused"
    turn_id: int
    iteration: int
    reason: str


@dataclass(frozen=True)
class Nudge(Event):
    """A hint the engine will show the model in its next context message.

    ``kind`` names the rule that gave it (``cove.engine.nudges.NudgeKind``). Nudges are for the
    model alone: channels show them only where the exact prompts are shown (the inspector,
    ``cove show --prompts``, ``--events``); people see a refused answer as ``AnswerRefused``.
    """

    type: ClassVar[str] = "nudge"
    turn_id: int
    text: str
    kind: str = "extension"


@dataclass(frozen=True)
class SandboxRestarted(Event):
    """The sandbox worker was replaced; lists what was restored and what was lost."""

    type: ClassVar[str] = "sandbox_restarted"
    turn_id: int
    reason: str
    restored: tuple[str, ...] = ()
    lost: tuple[str, ...] = ()


@dataclass(frozen=True)
class TitleChanged(Event):
    """The conversation got a (new) title."""

    type: ClassVar[str] = "title_changed"
    title: str


@dataclass(frozen=True)
class TurnFinished(Event):
    """The turn ended, with its ``outcome`` (spelled flat in the JSON: ``status``, ``answer``,
    ``confidence``, ``error``, ``tokens_in``, ``tokens_out``, ``cost_usd``).

    The outcome's fields read through the event too (``event.status``, ``event.usage``, …).
    """

    type: ClassVar[str] = "turn_finished"
    turn_id: int
    outcome: TurnOutcome = field(metadata=FLAT)
    iterations: int
    duration_ms: float
    cost_known: bool = True  # False when the model is missing from the price table

    @property
    def status(self) -> TurnStatus:
        """One of the final turn statuses."""
        return self.outcome.status

    @property
    def answer(self) -> str | None:
        """The turn's answer (``TurnOutcome.answer``)."""
        return self.outcome.answer

    @property
    def confidence(self) -> str | None:
        """The model's stated confidence in its answer."""
        return self.outcome.confidence

    @property
    def error(self) -> str | None:
        """What went wrong, for a turn that failed or stopped."""
        return self.outcome.error

    @property
    def usage(self) -> Usage:
        """The tokens and cost of the turn's model calls."""
        return self.outcome.usage

    def to_json(self) -> dict[str, Any]:
        """The event as JSON; an unknown cost is ``null``, never ``0.0``."""
        data = super().to_json()
        if not self.cost_known:
            data["cost_usd"] = None
        return data


@dataclass(frozen=True)
class ReplayTurnChecked(Event):
    """One recorded turn was re-executed and compared with its record."""

    type: ClassVar[str] = "replay_turn_checked"
    position: int
    blocks: int
    matched: int
    mismatches: tuple[str, ...]
    recorded_status: str
    replayed_status: str


@dataclass(frozen=True)
class ReplayFinished(Event):
    """A replay finished; ``ok`` is True only when every block and variable version matched."""

    type: ClassVar[str] = "replay_finished"
    turns: int
    blocks: int
    mismatches: int
    ok: bool


@dataclass(frozen=True)
class SteerReceived(Event):
    """A person's message folded into the running turn; the model sees it next iteration."""

    type: ClassVar[str] = "steer_received"
    turn_id: int
    iteration: int  # the iteration whose context message carries it
    text: str


@dataclass(frozen=True)
class Resync(Event):
    """A watcher fell behind and events were dropped: reload from the store, then continue.

    ``seq`` is the last dropped event's; the events that follow are newer.
    """

    type: ClassVar[str] = "resync"
    reason: str = "the watcher fell behind"


ChangeKind = Literal["created", "updated", "deleted"]


@dataclass(frozen=True)
class ConversationChanged(Event):
    """A conversation was created, deleted or changed (title, status, a new turn).

    ``label`` and ``status`` are those of ``ConversationRecord`` (a last turn left running by a
    dead process reads ``interrupted``).

    Not part of any conversation's sequence (``seq`` is 0); see ``Conversations.watch_list``.
    """

    type: ClassVar[str] = "conversation_changed"
    kind: ChangeKind
    title: str | None = None
    updated_at: float = 0.0
    running: bool = False
    label: str = ""  # what lists call it: the title, else the start of its first request
    status: str | None = None  # the status of its last turn (None: no turn yet)
