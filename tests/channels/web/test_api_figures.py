"""Figures over HTTP: the PNG route (its conversation checked, the digest one of its figures,
image type, cache headers), the chat page and the inspector showing them, and a DataFrame value
as a table. The sandbox has the data libraries loaded."""

from __future__ import annotations

import hashlib
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from cove.channels.web import create_app
from cove.conversation import scripted_factory
from tests.channels.web.serve import login, served
from tests.channels.web.test_api_turns import send_and_finish
from tests.scripted import reply, settings_for

pytestmark = pytest.mark.slow  # real turns in sandbox workers behind a server

PLOT = "import matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nplt.title('squares')"
FRAME = "import pandas as pd\npd.DataFrame({'region': ['north', 'east'], 'units': [7, 2]})"


@asynccontextmanager
async def data_web(tmp_path: Path, replies: list[str]) -> AsyncIterator[httpx.AsyncClient]:
    """The web app over a sandbox with numpy, pandas and matplotlib, logged in."""
    settings = settings_for(tmp_path, sandbox_libraries=True)
    app = create_app(settings, llm_factory=scripted_factory(replies))
    async with served(app) as url, httpx.AsyncClient(base_url=url, timeout=60) as client:
        yield await login(client)


async def test_a_figure_is_served_from_its_conversation_only(tmp_path: Path) -> None:
    replies = [reply([PLOT], "drawn"), reply(["x = 1"], "no figure")]
    async with data_web(tmp_path, replies) as client:
        cid = (await client.post("/api/conversations", json={})).json()["id"]
        events = await send_and_finish(client, cid, "Draw the squares.")
        [finished] = [e for e in events if e["type"] == "block_finished"]
        [figure] = finished["block"]["figures"]
        assert "png" not in figure  # the bytes never travel with events
        assert (figure["width"], figure["height"], figure["title"]) == (640, 480, "squares")
        url = f"/api/conversations/{cid}/figures/{figure['digest']}"

        got = await client.get(url)
        assert got.status_code == 200
        assert got.headers["content-type"] == "image/png"
        assert hashlib.sha256(got.content).hexdigest() == figure["digest"]
        assert got.headers["cache-control"] == "private, max-age=31536000, immutable"
        assert got.headers["x-content-type-options"] == "nosniff"
        assert "img-src 'self';" in got.headers["content-security-policy"]
        assert "data:" not in got.headers["content-security-policy"]
        again = await client.get(url, headers={"if-none-match": got.headers["etag"]})
        assert again.status_code == 304 and not again.content

        # Another conversation does not see it; nor does anyone logged out.
        other = (await client.post("/api/conversations", json={})).json()["id"]
        await send_and_finish(client, other, "Nothing to draw.")
        foreign = await client.get(f"/api/conversations/{other}/figures/{figure['digest']}")
        assert foreign.status_code == 404
        unknown = await client.get(f"/api/conversations/{cid}/figures/{'0' * 64}")
        assert unknown.status_code == 404
        for bad in ("..%2F..%2Fcove.db", "ABC", figure["digest"].upper()):
            assert (await client.get(f"/api/conversations/{cid}/figures/{bad}")).status_code == 404
        assert (await client.get(f"/api/conversations/nope/figures/{figure['digest']}")).is_error
        async with httpx.AsyncClient(base_url=str(client.base_url)) as stranger:
            assert (await stranger.get(url)).status_code == 401

        # The Markdown export links each figure to its address here.
        export = (await client.get(f"/api/conversations/{cid}/export?format=md")).text
        assert f"- [figure 1: 640×480 px; title 'squares']({client.base_url}{url})" in export

        # A fork sees the figures of the turns it shares with its parent.
        fork = (await client.post(f"/api/conversations/{cid}/fork", json={"turn": 1})).json()
        forked = await client.get(f"/api/conversations/{fork['id']}/figures/{figure['digest']}")
        assert forked.status_code == 200 and forked.content == got.content


async def test_the_chat_page_and_the_inspector_show_every_figure(tmp_path: Path) -> None:
    two = PLOT + "\nplt.figure()\nplt.bar([1, 2], [3, 4])\nplt.xlabel('bucket')"
    replies = [reply([two, FRAME], "two figures and a table")]
    async with data_web(tmp_path, replies) as client:
        cid = (await client.post("/api/conversations", json={})).json()["id"]
        events = await send_and_finish(client, cid, "Two charts, then a table.")
        figures = [
            f for e in events if e["type"] == "block_finished" for f in e["block"]["figures"]
        ]
        assert len(figures) == 2

        page = (await client.get(f"/c/{cid}")).text
        for index, figure in enumerate(figures):
            url = f"/api/conversations/{cid}/figures/{figure['digest']}"
            assert f'<img src="{url}"' in page
            assert f'download="t1-i1-b1-{index + 1}.png"' in page
        assert "squares" in page and "x &#39;bucket&#39;" in page  # captions, escaped
        # The DataFrame the second block ended with, as a table rather than text.
        table = re.search(r'<table class="frame-table">(.*?)</table>', page, re.S)
        assert table is not None
        assert re.findall(r"<th scope=\"col\">(\w*)</th>", table.group(1)) == [
            "",
            "region",
            "units",
        ]
        assert re.search(r'<th scope="row">0</th><td>north</td><td>7</td>', table.group(1))

        inspector = (await client.get(f"/c/{cid}/inspect/1/1")).text
        assert "<h2>Figures</h2>" in inspector
        assert all(f["digest"] in inspector for f in figures)
