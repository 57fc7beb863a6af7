"""The tools that read a conversation (its list, variables, versions, a diff, search) and
``fork_conversation``. None of them runs a turn; each answers with a short text and the same
facts as structured content."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.types import CallToolResult, TextContent
from pydantic import Field

from cove.channels.export import versions_json
from cove.channels.mcp import uris
from cove.channels.mcp.errors import tool
from cove.conversation import ConversationRecord, Conversations, SearchHit

ConversationId = Annotated[
    str, Field(description="The conversation (its id, or a unique prefix of it).")
]
Name = Annotated[str, Field(description="The variable's name.")]
Version = Annotated[int, Field(ge=1, description="A version number (from 1).")]
Limit = Annotated[int, Field(ge=1, le=200, description="At most this many.")]
Words = Annotated[str, Field(description="Words to find (full-text search).")]
InConversation = Annotated[
    str | None, Field(description="Search only this conversation (id or prefix).")
]
Turn = Annotated[int, Field(ge=1, description="The turn to fork at (its position, from 1).")]


def conversation_json(record: ConversationRecord) -> dict[str, Any]:
    """A conversation as the list shows it."""
    return {
        "id": record.id,
        "label": record.label,
        "channel": record.channel,
        "turns": record.turn_count,
        "last_status": record.last_status,
        "parent_id": record.parent_id,
        "fork_turn": record.fork_turn,
        "updated_at": record.updated_at,
        "uri": uris.conversation(record.id),
    }


def hit_json(hit: SearchHit) -> dict[str, Any]:
    """A search hit: where it is and the passage found."""
    return {
        "conversation_id": hit.conversation_id,
        "label": hit.label,
        "turn": hit.turn_position,
        "kind": hit.kind,
        "text": hit.text,
    }


class ReadTools:
    """The reading tools and ``fork_conversation`` over one ``Conversations``."""

    def __init__(self, convs: Conversations) -> None:
        self.convs = convs

    @tool
    async def list_conversations(self, limit: Limit = 20) -> CallToolResult:
        """List cove's conversations, newest first: id, name, channel, turns, how the last
        turn ended."""
        records = await self.convs.list(limit=limit)
        lines = [
            f"{r.id} · {r.label} · {r.channel} · {r.turn_count} turn(s) · "
            f"{r.last_status or 'no turn yet'}"
            for r in records
        ]
        data = {"conversations": [conversation_json(r) for r in records]}
        return _answer("\n".join(lines) or "no conversations yet", data)

    @tool
    async def list_variables(self, conversation: ConversationId) -> CallToolResult:
        """List a conversation's variables: each one's current version, type and preview."""
        record = await self.convs.get(conversation)
        current = await self.convs.variables(record.id)
        rows = versions_json(list(current.values()))
        lines = [f"{v['name']} v{v['version']} ({v['type_name']}) = {v['preview']}" for v in rows]
        data = {"conversation_id": record.id, "variables": rows}
        return _answer("\n".join(lines) or "no variables yet", data)

    @tool
    async def variable_versions(self, conversation: ConversationId, name: Name) -> CallToolResult:
        """Every version of one variable, oldest first: version, where it was written (turn,
        iteration, block), type and preview. Read a version's value in full from the
        resource cove://conversations/{id}/variables/{name}/versions/{version}."""
        record = await self.convs.get(conversation)
        rows = versions_json(await self.convs.var_history(record.id, name))
        lines = [
            f"v{v['version']} · turn {v['turn_position']} · {v['kind']} ({v['type_name']}) = "
            f"{v['preview']}" + (" · thinned" if v["thinned"] else "")
            for v in rows
        ]
        return _answer("\n".join(lines), {"conversation_id": record.id, "versions": rows})

    @tool
    async def diff_variable(
        self, conversation: ConversationId, name: Name, from_version: Version, to_version: Version
    ) -> CallToolResult:
        """A unified diff between two versions of a variable (values in full, one item per
        line)."""
        diff = await self.convs.var_diff(conversation, name, from_version, to_version)
        return _answer(diff, {"diff": diff})

    @tool
    async def search(
        self, query: Words, conversation: InConversation = None, limit: Limit = 20
    ) -> CallToolResult:
        """Full-text search over the requests, answers and code of cove's conversations."""
        hits = (await self.convs.search(query, conversation))[:limit]
        lines = [f"{h.conversation_id} · turn {h.turn_position} · {h.kind}: {h.text}" for h in hits]
        return _answer("\n".join(lines) or "nothing found", {"hits": [hit_json(h) for h in hits]})

    @tool
    async def fork_conversation(self, conversation: ConversationId, turn: Turn) -> CallToolResult:
        """Fork a conversation at a turn: a new conversation whose sandbox starts from the
        variables as they were after that turn (nothing is copied; the original goes on)."""
        fork = await self.convs.fork(conversation, turn)
        text = f"conversation {fork.id}: a fork of {fork.parent_id} at turn {fork.fork_turn}"
        return _answer(text, conversation_json(fork))


def _answer(text: str, data: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(text=text)], structured_content=data)
