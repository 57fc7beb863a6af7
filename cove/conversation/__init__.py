"""The conversation layer: the one API channels use.

Create, send, cancel, fork, delete, inspect, search, replay and watch conversations.

Each name is imported from its module when it is first used (``__getattr__``), so a channel
that only reads (``Reading``, the record types) never imports the engine, the sandbox or a
model client (``cove list`` starts in a fraction of what ``cove run`` needs).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cove.conversation.conversations import Conversations, LLMFactory
    from cove.conversation.extensions import ConversationPolicy, FunctionRule, installed
    from cove.conversation.handle import TurnHandle
    from cove.conversation.profiles import KEEP, Profile
    from cove.conversation.reading import Reading, open_reading
    from cove.conversation.scripted import scripted_factory
    from cove.conversation.stats import ProcessStats
    from cove.conversation.watch.lists import ListWatch
    from cove.conversation.watch.rebuild import iteration_budget, timeline
    from cove.conversation.watch.sequence import turn_of
    from cove.conversation.watch.stream import WatchStream
    from cove.engine.budgets import INSTRUCTIONS_CHARS
    from cove.engine.prompt import checked_instructions
    from cove.environment.extensions.approval import ApprovalAnswer, ApprovalRequest, Approver
    from cove.environment.extensions.installed import Catalog, InstalledExtension, PluginProblem
    from cove.persistence.extension_use import ApprovalRecord
    from cove.persistence.history import HistoryFigures
    from cove.persistence.inbox import InboxEntry
    from cove.persistence.pacing import SendSlot
    from cove.persistence.records import (
        BlockRecord,
        ConversationRecord,
        IterationRecord,
        SearchHit,
        Transcript,
        TurnNote,
        TurnRecord,
        VarVersionRecord,
    )

#: The module each name is imported from.
_SOURCES: dict[str, str] = {
    "Conversations": "cove.conversation.conversations",
    "LLMFactory": "cove.conversation.conversations",
    "ConversationPolicy": "cove.conversation.extensions",
    "FunctionRule": "cove.conversation.extensions",
    "installed": "cove.conversation.extensions",
    "TurnHandle": "cove.conversation.handle",
    "KEEP": "cove.conversation.profiles",
    "Profile": "cove.conversation.profiles",
    "scripted_factory": "cove.conversation.scripted",
    "ProcessStats": "cove.conversation.stats",
    "ListWatch": "cove.conversation.watch.lists",
    "iteration_budget": "cove.conversation.watch.rebuild",
    "timeline": "cove.conversation.watch.rebuild",
    "turn_of": "cove.conversation.watch.sequence",
    "WatchStream": "cove.conversation.watch.stream",
    "INSTRUCTIONS_CHARS": "cove.engine.budgets",
    "checked_instructions": "cove.engine.prompt",
    "ApprovalAnswer": "cove.environment.extensions.approval",
    "ApprovalRequest": "cove.environment.extensions.approval",
    "Approver": "cove.environment.extensions.approval",
    "Catalog": "cove.environment.extensions.installed",
    "InstalledExtension": "cove.environment.extensions.installed",
    "PluginProblem": "cove.environment.extensions.installed",
    "ApprovalRecord": "cove.persistence.extension_use",
    "HistoryFigures": "cove.persistence.history",
    "InboxEntry": "cove.persistence.inbox",
    "SendSlot": "cove.persistence.pacing",
    "BlockRecord": "cove.persistence.records",
    "ConversationRecord": "cove.persistence.records",
    "IterationRecord": "cove.persistence.records",
    "SearchHit": "cove.persistence.records",
    "Transcript": "cove.persistence.records",
    "TurnNote": "cove.persistence.records",
    "TurnRecord": "cove.persistence.records",
    "VarVersionRecord": "cove.persistence.records",
    "Reading": "cove.conversation.reading",
    "open_reading": "cove.conversation.reading",
}

__all__ = [
    "INSTRUCTIONS_CHARS",
    "KEEP",
    "ApprovalAnswer",
    "ApprovalRecord",
    "ApprovalRequest",
    "Approver",
    "BlockRecord",
    "Catalog",
    "ConversationPolicy",
    "ConversationRecord",
    "Conversations",
    "FunctionRule",
    "HistoryFigures",
    "InboxEntry",
    "InstalledExtension",
    "IterationRecord",
    "LLMFactory",
    "ListWatch",
    "PluginProblem",
    "ProcessStats",
    "Profile",
    "Reading",
    "SearchHit",
    "SendSlot",
    "Transcript",
    "TurnHandle",
    "TurnNote",
    "TurnRecord",
    "VarVersionRecord",
    "WatchStream",
    "checked_instructions",
    "installed",
    "iteration_budget",
    "open_reading",
    "scripted_factory",
    "timeline",
    "turn_of",
]


def __getattr__(name: str) -> Any:
    """The public name ``name``, imported from its module on first use (PEP 562)."""
    source = _SOURCES.get(name)
    if source is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(source), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
