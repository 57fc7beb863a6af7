"""The web: a plugin's call that needs asking is denied there (nobody can be asked in the web
yet), and the inspector shows the decision under its iteration."""

from __future__ import annotations

from html import unescape
from pathlib import Path

import pytest

from tests.channels.web.conftest import Web, web  # noqa: F401 (the web fixture)
from tests.channels.web.test_api_turns import send_and_finish
from tests.plugins.test_example_plugin import notes
from tests.scripted import reply

pytestmark = pytest.mark.slow  # a sandbox worker


async def test_the_inspector_lists_the_iterations_approvals(web: Web, notes_file: Path) -> None:  # noqa: F811
    replies = [reply(['notes_add("from the web")']), reply(answer="it was not allowed")]
    async with web(replies) as client:
        cid = (await client.post("/api/conversations", json={})).json()["id"]
        events = await send_and_finish(client, cid, "note it")
        assert events[-1]["answer"] == "it was not allowed"
        first = unescape((await client.get(f"/c/{cid}/inspect/1/1")).text)
        second = unescape((await client.get(f"/c/{cid}/inspect/1/2")).text)
    assert "<h2>Approvals</h2>" in first
    assert "<code>notes_add('from the web')</code> · write · <strong>denied</strong> · " in first
    assert "nobody to ask" in first
    assert "<h2>Approvals</h2>" not in second  # the next iteration made no such call
    assert notes(notes_file) == []
