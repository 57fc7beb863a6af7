"""The web: a plugin's call that needs asking waits for an answer given on the conversation's
event stream's card (here through the API a page uses), and the inspector shows the decision
under its iteration."""

from __future__ import annotations

import json
from html import unescape
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.channels.web.conftest import Web, web  # noqa: F401 (the web fixture)
from tests.plugins.test_example_plugin import notes
from tests.scripted import reply

pytestmark = pytest.mark.slow  # a sandbox worker


async def answered(client: httpx.AsyncClient, cid: str, text: str, approved: bool) -> list[str]:
    """Send ``text``, answer the card its turn shows with ``approved``; the stream's types."""
    seen: list[str] = []
    sent = await client.post(f"/api/conversations/{cid}/messages", json={"text": text})
    assert sent.status_code == 202, sent.text
    async with client.stream("GET", f"/api/conversations/{cid}/events") as stream:
        async for line in stream.aiter_lines():
            if not line.startswith("data: "):
                continue
            event: dict[str, Any] = json.loads(line[6:])
            seen.append(event["type"])
            if event["type"] == "approval_asked":
                url = f"/api/conversations/{cid}/approvals/{event['id']}"
                assert (await client.post(url, json={"approved": approved})).status_code == 200
            if event["type"] == "turn_finished":
                return seen
    raise AssertionError("the stream ended before the turn")


async def test_the_inspector_lists_the_iterations_approvals(web: Web, notes_file: Path) -> None:  # noqa: F811
    replies = [reply(['notes_add("from the web")']), reply(answer="it was not allowed")]
    async with web(replies) as client:
        cid = (await client.post("/api/conversations", json={})).json()["id"]
        seen = await answered(client, cid, "note it", approved=False)
        first = unescape((await client.get(f"/c/{cid}/inspect/1/1")).text)
        second = unescape((await client.get(f"/c/{cid}/inspect/1/2")).text)
    assert seen.index("approval_asked") < seen.index("approval_resolved") < len(seen) - 1
    assert "<h2>Approvals</h2>" in first
    assert "<code>notes_add('from the web')</code> · write · <strong>denied</strong> · " in first
    assert "by the person" in first
    assert "<h2>Approvals</h2>" not in second  # the next iteration made no such call
    assert notes(notes_file) == []
