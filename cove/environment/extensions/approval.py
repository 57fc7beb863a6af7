"""Approval for side effects: which extension calls run, which are refused, which ask first.

A *policy* maps a function's name, an extension's name or an effect (``write``, ``network``,
``spend``, …) to ``allow``, ``ask`` or ``deny``; the most specific entry wins (function, then
extension, then effect). With no entry, a call is allowed when it only reads or comes from a
built-in extension, and asked about when an installed plugin declares an effect::

    decide(policy, function="notes_add", extension="notes_add", effect="write", builtin=False)
    -> Ruling("ask", "default")

A ruling other than the default ``allow`` goes to the running turn (``TurnHooks.approve``),
which asks the person when the ruling is ``ask``, records the verdict with the iteration and
gives it back; replay gives the recorded verdict back instead of asking. A denied call fails in
the sandbox with ``PermissionError`` and a message the model can act on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from cove.errors import ConfigError

Rule = Literal["allow", "ask", "deny"]
RULES: tuple[Rule, ...] = ("allow", "ask", "deny")
#: Why a call got its verdict: a policy entry, the person (now, or remembered from an earlier
#: answer), no answer in time, or nobody to ask (no channel that can ask, ``--reject-all``).
Reason = Literal["policy", "person", "remembered", "timeout", "nobody", "flag"]


@dataclass(frozen=True)
class Ruling:
    """What the policy says of one call: its rule and the entry that gave it (``default``)."""

    rule: Rule
    entry: str

    @property
    def needs_turn(self) -> bool:
        """Whether the call goes to the turn (asked about, or recorded): all but default allow."""
        return not (self.rule == "allow" and self.entry == "default")


@dataclass(frozen=True)
class ApprovalRequest:
    """One extension call waiting for a person's answer.

    Attributes:
        conversation_id: The conversation whose sandbox code made the call.
        extension: The extension the function belongs to.
        function: The function called.
        effect: What the call does (``write``, ``network``, …).
        arguments: A short text of the call's arguments, for the person to judge.
    """

    conversation_id: str
    extension: str
    function: str
    effect: str
    arguments: str

    @property
    def text(self) -> str:
        """One line asking for the answer."""
        return f"{self.function}({self.arguments}) [{self.extension}: {self.effect}]"


@dataclass(frozen=True)
class ApprovalAnswer:
    """An answer to an ``ApprovalRequest``.

    Attributes:
        approved: Whether the call may run.
        remember: The answer holds for the rest of the conversation (for this function).
        reason: ``person`` for an answer someone gave; ``flag`` for one given for the whole
            run (``cove run --approve-all`` / ``--reject-all``); ``nobody`` when the channel
            could not ask after all (its question could not be sent): a denial.
    """

    approved: bool
    remember: bool = False
    reason: Literal["person", "flag", "nobody"] = "person"


#: How a channel asks its person: an answer for each request (it may take its time; the turn
#: stops waiting after ``approval_timeout_s`` and denies).
Approver = Callable[[ApprovalRequest], Awaitable[ApprovalAnswer]]


@dataclass(frozen=True)
class Verdict:
    """The decision on one call, as recorded with its iteration.

    Attributes:
        approved: Whether the call ran.
        reason: What decided it (``Reason``).
        remember: The person asked that the answer hold for the rest of the conversation.
    """

    approved: bool
    reason: str
    remember: bool = False


def parse_policy(entries: Sequence[str], *, setting: str = "extension_policy") -> dict[str, Rule]:
    """``["write=ask", "notes_add=deny"]`` as a mapping from key to rule.

    Raises:
        ConfigError: An entry is not ``key=allow|ask|deny``.
    """
    policy: dict[str, Rule] = {}
    for entry in entries:
        key, sep, rule = (part.strip() for part in entry.partition("="))
        if not sep or not key or rule not in RULES:
            raise ConfigError(
                f"setting {setting}: {entry!r} is not NAME=allow, NAME=ask or NAME=deny "
                "(NAME: a function, an extension or an effect)",
                setting=setting,
            )
        policy[key] = RULES[RULES.index(rule)]
    return policy


def decide(
    policy: Mapping[str, Rule], *, function: str, extension: str, effect: str, builtin: bool
) -> Ruling:
    """The policy's ruling on one call (see the module docstring for the order)."""
    for key in (function, extension, effect):
        rule = policy.get(key)
        if rule is not None:
            return Ruling(rule, key)
    if effect == "read" or builtin:
        return Ruling("allow", "default")
    return Ruling("ask", "default")


def refusal(function: str, effect: str, verdict: Verdict) -> PermissionError:
    """The error sandbox code gets for a denied call (the model reads it)."""
    why = {
        "policy": "this conversation's policy denies it",
        "person": "the person denied it",
        "remembered": "the person denied it earlier in this conversation",
        "timeout": "nobody answered the approval request in time",
        "nobody": "it needs approval and there is nobody to ask (e.g. `cove run --reject-all`)",
        "flag": "approval was refused for the whole run (--reject-all)",
    }.get(verdict.reason, verdict.reason)
    return PermissionError(
        f"{function}() was not run: its effect is {effect!r} and {why}. Do not retry it; "
        "tell the person what you wanted to do, or do without it"
    )
