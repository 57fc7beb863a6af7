"""The resources: conversations, a transcript, variables and their versions, figures, all
under ``cove://`` (``uris.py``). Reading one never runs anything."""

from __future__ import annotations

import json
from typing import Any

from cove.channels.export import to_markdown, versions_json
from cove.channels.mcp import uris
from cove.channels.mcp.errors import resource
from cove.channels.mcp.reads import conversation_json
from cove.conversation import Conversations, VarVersionRecord
from cove.errors import NotFound

#: How many conversations ``cove://conversations`` lists (the newest).
LISTED = 200


class Resources:
    """What each ``cove://`` URI reads, over one ``Conversations``."""

    def __init__(self, convs: Conversations) -> None:
        self.convs = convs

    @resource
    async def conversations(self) -> str:
        """The newest conversations (JSON): id, name, channel, turns, last status, URI."""
        records = await self.convs.list(limit=LISTED)
        return _json({"conversations": [conversation_json(r) for r in records]})

    @resource
    async def transcript(self, conversation: str) -> str:
        """A conversation's transcript (Markdown): every turn, iteration, block and answer."""
        return to_markdown(await self.convs.inspect(conversation))

    @resource
    async def variables(self, conversation: str) -> str:
        """A conversation's variables (JSON): each one's current version."""
        record = await self.convs.get(conversation)
        current = await self.convs.variables(record.id)
        rows = versions_json(list(current.values()))
        return _json({"conversation_id": record.id, "variables": rows})

    @resource
    async def variable(self, conversation: str, name: str) -> str:
        """A variable's current value, in full (text)."""
        record, text = await self.convs.var_text(conversation, name)
        return _value(record, text)

    @resource
    async def versions(self, conversation: str, name: str) -> str:
        """Every version of a variable, oldest first (JSON)."""
        record = await self.convs.get(conversation)
        rows = versions_json(await self.convs.var_history(record.id, name))
        return _json({"conversation_id": record.id, "name": name, "versions": rows})

    @resource
    async def version(self, conversation: str, name: str, version: str) -> str:
        """One version of a variable, its value in full (text)."""
        if not version.isdigit():
            raise NotFound("version", version, f"{version!r} is not a version number")
        record, text = await self.convs.var_text(conversation, name, int(version))
        return _value(record, text)

    @resource
    async def figure(self, conversation: str, digest: str) -> bytes:
        """The PNG of a figure a block of the conversation made."""
        return await self.convs.figure(conversation, digest)


#: (URI template, reader, MIME type) of every resource.
LISTING: tuple[tuple[str, str, str], ...] = (
    (uris.CONVERSATIONS, "conversations", "application/json"),
    (uris.CONVERSATION, "transcript", "text/markdown"),
    (uris.VARIABLES, "variables", "application/json"),
    (uris.VARIABLE, "variable", "text/plain"),
    (uris.VERSIONS, "versions", "application/json"),
    (uris.VERSION, "version", "text/plain"),
    (uris.FIGURE, "figure", "image/png"),
)


def _json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1)


def _value(record: VarVersionRecord, text: str) -> str:
    """A version's value with a first line saying which version it is."""
    head = f"# {record.name} v{record.version} ({record.kind}, {record.type_name})"
    return f"{head}\n{text}"
