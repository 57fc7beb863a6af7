"""The conversation layer: the one API channels use.

Create, send, cancel, fork, delete, inspect, search, replay and watch conversations.
"""

from cove.conversation.conversations import Conversations, LLMFactory
from cove.conversation.extensions import ConversationPolicy, FunctionRule, installed
from cove.conversation.handle import TurnHandle
from cove.conversation.profiles import KEEP, Profile
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
    "InstalledExtension",
    "IterationRecord",
    "LLMFactory",
    "ListWatch",
    "PluginProblem",
    "ProcessStats",
    "Profile",
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
    "scripted_factory",
    "timeline",
    "turn_of",
]
