"""The app factory: its own ``Conversations``, or one it shares with other channels."""

from __future__ import annotations

from pathlib import Path

import httpx
from starlette.applications import Starlette
from starlette.routing import Mount

from cove.channels.web import create_app, stop_app
from cove.conversation import Conversations, scripted_factory
from tests.channels.web.serve import login, served
from tests.channels.web.test_api_turns import send_and_finish
from tests.scripted import reply, settings_for


async def test_a_shared_conversations_is_used_and_left_open(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    factory = scripted_factory([reply([], "from the web"), reply([], "from elsewhere")])
    async with Conversations.open(settings, llm_factory=factory) as convs:
        app = create_app(settings, convs=convs)
        async with served(app) as url, httpx.AsyncClient(base_url=url) as client:
            await login(client)
            cid = (await client.post("/api/conversations", json={"title": "shared"})).json()["id"]
            events = await send_and_finish(client, cid, "hello")
            assert events[-1]["answer"] == "from the web"
        # The server stopped; the Conversations it was given is still open and usable.
        assert (await convs.get(cid)).title == "shared"
        final = await convs.send(cid, "and now?").finished()
        assert final.answer == "from elsewhere"


async def test_mounted_where_its_lifespan_does_not_run_it_still_serves(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    async with Conversations.open(settings, llm_factory=scripted_factory([])) as convs:
        web = create_app(settings, convs=convs)
        outer = Starlette(routes=[Mount("/", app=web)])  # only the outer lifespan runs
        async with served(outer) as url, httpx.AsyncClient(base_url=url) as client:
            await login(client)
            created = await client.post("/api/conversations", json={"title": "mounted"})
            assert created.status_code == 201
            page = await client.get(f"/c/{created.json()['id']}")
            assert page.status_code == 200 and "mounted" in page.text
            assert "content-security-policy" in page.headers
        await stop_app(web)
        assert web.state.web.closing.is_set()
        assert [c.title for c in await convs.list()] == ["mounted"]
