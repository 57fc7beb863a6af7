"""Approval cards: an extension call the policy asks about, answered in the conversation's page.

A turn the web sends asks through ``WebApprovals.ask``. Each request gets an id and goes to
every page open on the conversation as an ``approval_asked`` notice, kept for the pages that
open while it waits. The first answer posted to ``/api/conversations/{cid}/approvals/{id}``
wins: the turn gets it, and every page an ``approval_resolved`` notice; a later answer is
refused (409) naming the outcome. When the turn stops waiting (no answer within
``approval_timeout_s``, or the turn was stopped) the pages are told so, and the turn records
the denial as it records every verdict.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Literal

from starlette.exceptions import HTTPException

from cove.channels.web.notices import Notices
from cove.conversation import ApprovalAnswer, ApprovalRequest
from cove.errors import NotFound

#: How an asked call ended: answered either way, or not answered before the turn stopped
#: waiting (its timeout, or the turn ended).
Outcome = Literal["approved", "denied", "timeout", "withdrawn"]
#: Outcomes kept for answers that come late (to say what happened instead of "not found").
_KEEP_OUTCOMES = 1024


@dataclass
class _Waiting:
    """A call waiting for its answer."""

    id: str
    request: ApprovalRequest
    answered: asyncio.Future[ApprovalAnswer]
    asked_at: float


class WebApprovals:
    """The approval requests of the turns the web sent, and their answers."""

    def __init__(self, notices: Notices, timeout_s: float) -> None:
        """Publish cards through ``notices``; ``timeout_s`` is the turns' approval timeout
        (shown on the card; the turn itself stops waiting then)."""
        self._notices = notices
        self._timeout_s = timeout_s
        self._waiting: dict[str, _Waiting] = {}
        self._outcomes: OrderedDict[str, tuple[str, Outcome]] = OrderedDict()

    async def ask(self, request: ApprovalRequest) -> ApprovalAnswer:
        """The ``Approver`` of the web's turns: a card on the conversation's pages, and the
        first answer given there."""
        loop = asyncio.get_running_loop()
        waiting = _Waiting(
            secrets.token_urlsafe(12), request, loop.create_future(), time.monotonic()
        )
        cid = request.conversation_id
        self._waiting[waiting.id] = waiting
        self._notices.publish(cid, self._asked(waiting), keep=waiting.id)
        try:
            return await asyncio.shield(waiting.answered)
        except asyncio.CancelledError:
            if not waiting.answered.done():
                late = time.monotonic() - waiting.asked_at >= self._timeout_s * 0.95
                self._resolve(waiting, "timeout" if late else "withdrawn", remember=False)
            raise

    def answer(
        self, conversation_id: str, approval_id: str, approved: bool, remember: bool
    ) -> None:
        """Answer a waiting call of the conversation (the first answer wins).

        Raises:
            NotFound: No call of the conversation was asked about with that id.
            HTTPException: 409, the call was answered already or is no longer waiting.
        """
        waiting = self._waiting.get(approval_id)
        if waiting is None or waiting.request.conversation_id != conversation_id:
            past = self._outcomes.get(approval_id)
            if past is None or past[0] != conversation_id:
                raise NotFound("approval request", approval_id)
            raise HTTPException(409, f"this call was already decided: {_said(past[1])}")
        waiting.answered.set_result(ApprovalAnswer(approved, remember=remember))
        self._resolve(waiting, "approved" if approved else "denied", remember=remember)

    def _resolve(self, waiting: _Waiting, outcome: Outcome, *, remember: bool) -> None:
        """Forget the waiting call and tell the pages how it ended."""
        cid = waiting.request.conversation_id
        self._waiting.pop(waiting.id, None)
        self._outcomes[waiting.id] = (cid, outcome)
        while len(self._outcomes) > _KEEP_OUTCOMES:
            self._outcomes.popitem(last=False)
        self._notices.withdraw(cid, waiting.id)
        notice = {"type": "approval_resolved", "id": waiting.id, "outcome": outcome}
        self._notices.publish(cid, {**notice, "remember": remember, "said": _said(outcome)})

    def _asked(self, waiting: _Waiting) -> dict[str, Any]:
        request = waiting.request
        return {
            "type": "approval_asked",
            "id": waiting.id,
            "extension": request.extension,
            "function": request.function,
            "effect": request.effect,
            "arguments": request.arguments,
            "timeout_s": self._timeout_s,
        }


def _said(outcome: Outcome) -> str:
    """What the card says once the call is decided."""
    return {
        "approved": "Approved.",
        "denied": "Denied.",
        "timeout": "Nobody answered in time: denied.",
        "withdrawn": "The turn stopped waiting: denied.",
    }[outcome]
