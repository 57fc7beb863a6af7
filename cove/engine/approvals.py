"""A turn's approvals: asking the person about extension calls, and recording each verdict.

The environment hands the turn each call its policy did not simply allow (``approval.py``).
``TurnApprovals`` turns the ruling into a verdict — the policy's own for ``allow`` and ``deny``,
the channel's ``Approver`` for ``ask`` (nobody to ask, or no answer within the timeout, is a
denial) — and records it with its place: the iteration, the block and the call's order among
the block's extension calls. A replay is given the recorded verdicts and never asks; a call
with none recorded was allowed by default when it ran, and is allowed again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass

from cove.environment.extensions.approval import ApprovalRequest, Approver, Ruling, Verdict
from cove.persistence.extension_use import ApprovalRecord
from cove.persistence.store import Store

#: Recorded verdicts by (iteration, block, order of the call among the block's calls).
RecordedVerdicts = Mapping[tuple[int, int, int], Verdict]


def recorded_verdicts(records: list[ApprovalRecord], turn_position: int) -> RecordedVerdicts:
    """The verdicts of one turn's recorded approvals, for its replay."""
    return {
        (r.iteration_position, r.block_position, r.seq): Verdict(r.approved, r.reason, r.remember)
        for r in records
        if r.turn_position == turn_position
    }


@dataclass
class TurnApprovals:
    """The approvals of one turn.

    Attributes:
        store: Where verdicts are recorded.
        conversation_id: The conversation.
        turn_position: The turn's position.
        approver: How the channel asks its person; None: nobody can be asked (``ask`` denies).
        timeout_s: How long to wait for an answer before denying.
        recorded: Replay: the recorded verdicts (nothing is asked).
    """

    store: Store
    conversation_id: str
    turn_position: int
    approver: Approver | None = None
    timeout_s: float = 120.0
    recorded: RecordedVerdicts | None = None

    async def approve(
        self, place: tuple[int, int, int], request: ApprovalRequest, ruling: Ruling
    ) -> Verdict:
        """The verdict on the call at ``place`` (iteration, block, order among the block's
        extension calls), recorded before it is returned."""
        iteration, block, seq = place
        if self.recorded is not None:
            verdict = self.recorded.get(place) or Verdict(True, "policy")
        else:
            verdict = await self._decide(request, ruling)
        record = ApprovalRecord(
            turn_position=self.turn_position,
            iteration_position=iteration,
            block_position=block,
            seq=seq,
            extension=request.extension,
            function=request.function,
            effect=request.effect,
            arguments=request.arguments,
            approved=verdict.approved,
            reason=verdict.reason,
            remember=verdict.remember,
        )
        await self.store.record_approval(self.conversation_id, record)
        return verdict

    async def _decide(self, request: ApprovalRequest, ruling: Ruling) -> Verdict:
        if ruling.rule != "ask" or self.approver is None:
            return _by_policy(ruling)
        try:
            async with asyncio.timeout(self.timeout_s):
                answer = await self.approver(request)
        except TimeoutError:
            return Verdict(False, "timeout")
        return Verdict(answer.approved, answer.reason, answer.remember)


def _by_policy(ruling: Ruling) -> Verdict:
    """The verdict when nobody answers: ``allow`` and ``deny`` as ruled, ``ask`` denied."""
    if ruling.rule == "ask":
        return Verdict(False, "nobody")
    reason = "remembered" if ruling.entry == "remembered" else "policy"
    return Verdict(ruling.rule == "allow", reason)
