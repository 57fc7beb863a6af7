"""The conversation layer: the one API channels use.

Create, send, cancel, fork, delete, inspect, search and replay conversations.
"""

from cove.conversation.conversations import Conversations, LLMFactory
from cove.conversation.scripted import scripted_factory
from cove.persistence.records import (
    BlockRecord,
    ConversationRecord,
    IterationRecord,
    SearchHit,
    Transcript,
    TurnRecord,
    VarVersionRecord,
)

__all__ = [
    "BlockRecord",
    "ConversationRecord",
    "Conversations",
    "IterationRecord",
    "LLMFactory",
    "SearchHit",
    "Transcript",
    "TurnRecord",
    "VarVersionRecord",
    "scripted_factory",
]
