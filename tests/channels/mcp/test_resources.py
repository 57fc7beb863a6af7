"""The ``cove://`` resources through the SDK's in-memory client: conversations, a transcript,
variables, a variable's value and its versions; unknown names are not found."""

from __future__ import annotations

import json

import pytest
from mcp import Client, MCPError
from mcp.types import TextResourceContents

from cove.channels.mcp import build_server
from cove.conversation import Conversations
from tests.channels.mcp.helpers import run


async def read(client: Client, uri: str) -> str:
    (contents,) = (await client.read_resource(uri)).contents
    assert isinstance(contents, TextResourceContents)
    return contents.text


async def test_every_resource_reads_under_one_scheme(convs: Conversations) -> None:
    async with Client(build_server(convs)) as client:
        made = await run(client, "table = [{'n': i, 'square': i * i} for i in range(200)]")
        cid = made["conversation_id"]
        await run(client, "table[7]['square'] = -1\ndef double(x):\n    return 2 * x", cid)

        assert [str(r.uri) for r in (await client.list_resources()).resources] == [
            "cove://conversations"
        ]
        templates = {
            t.uri_template for t in (await client.list_resource_templates()).resource_templates
        }
        assert all(t.startswith("cove://conversations/{conversation}") for t in templates)
        assert len(templates) == 6

        listed = json.loads(await read(client, "cove://conversations"))["conversations"]
        assert [(c["id"], c["channel"], c["uri"]) for c in listed] == [
            (cid, "mcp", f"cove://conversations/{cid}")
        ]
        transcript = await read(client, f"cove://conversations/{cid}")
        assert "## Turn 2 — done" in transcript and "def double(x):" in transcript
        base = f"cove://conversations/{cid}/variables"
        variables = json.loads(await read(client, base))["variables"]
        assert {(v["name"], v["version"]) for v in variables} == {("table", 2), ("double", 1)}

        value = await read(client, f"{base}/table")
        assert value.startswith("# table v2 (value, list)")
        assert "{'n': 199, 'square': 39601}" in value  # in full, far past the preview
        assert "{'n': 7, 'square': -1}" in value
        first = await read(client, f"{base}/table/versions/1")
        assert "{'n': 7, 'square': 49}" in first
        assert (await read(client, f"{base}/double")).endswith("def double(x):\n    return 2 * x")
        versions = json.loads(await read(client, f"{base}/table/versions"))["versions"]
        assert [(v["version"], v["turn_position"]) for v in versions] == [(1, 1), (2, 2)]

        for missing in (f"{base}/nope", f"{base}/table/versions/9", f"{base}/table/versions/x"):
            with pytest.raises(MCPError, match=r"no variable|no version|not a version"):
                await client.read_resource(missing)
        with pytest.raises(MCPError, match="no conversation"):
            await client.read_resource("cove://conversations/0123456789abcdef")
