"""The conversation routes of the JSON API, against a real server and store."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from cove.channels.web import create_app
from tests.channels.web.conftest import Web
from tests.channels.web.serve import login, served, sse_events
from tests.scripted import reply, settings_for


async def test_create_list_get_rename_delete(web: Web) -> None:
    async with web() as client:
        created = await client.post("/api/conversations", json={"title": "First"})
        assert created.status_code == 201
        cid = created.json()["id"]
        assert created.json()["channel"] == "web"
        listed = (await client.get("/api/conversations")).json()["conversations"]
        assert [c["id"] for c in listed] == [cid]
        assert (await client.get(f"/api/conversations/{cid[:10]}")).json()["title"] == "First"
        renamed = await client.patch(f"/api/conversations/{cid}", json={"title": "Renamed"})
        assert renamed.status_code == 200 and renamed.json()["title"] == "Renamed"
        assert (await client.delete(f"/api/conversations/{cid}")).status_code == 204
        missing = await client.get(f"/api/conversations/{cid}")
        assert missing.status_code == 404
        assert missing.json() == {
            "error": "NotFound",
            "message": missing.json()["message"],
            "status": 404,
        }
        assert cid[:8] in missing.json()["message"]


async def test_bad_input_is_422_with_a_message(web: Web) -> None:
    async with web() as client:
        cid = (await client.post("/api/conversations", json={})).json()["id"]
        not_json = await client.post(
            "/api/conversations", content=b"{nope", headers={"content-type": "application/json"}
        )
        assert not_json.status_code == 422 and "not JSON" in not_json.json()["message"]
        assert (await client.post("/api/conversations", json=[1])).status_code == 422
        assert (await client.patch(f"/api/conversations/{cid}", json={})).status_code == 422
        assert (await client.get("/api/conversations?limit=x")).status_code == 422
        assert (await client.get("/api/conversations?limit=0")).status_code == 422
        assert (await client.get("/api/search")).status_code == 422
        bad_fork = await client.post(f"/api/conversations/{cid}/fork", json={"turn": "1"})
        assert bad_fork.status_code == 422
        bad_request = {"turn": 0, "request": ["not", "text"]}
        assert (
            await client.post(f"/api/conversations/{cid}/fork", json=bad_request)
        ).status_code == 422
        assert len((await client.get(f"/api/conversations/{cid}/forks")).json()["forks"]) == 0
        bad_format = await client.get(f"/api/conversations/{cid}/export?format=pdf")
        assert bad_format.status_code == 422
        assert (await client.get("/api/nothing-here")).status_code == 404


async def test_search_export_fork_replay(web: Web) -> None:
    replies = [reply(["x = 20 + 22"], "x is {{x}}"), reply(["y = x + 1"], "y is {{y}}")]
    async with web(replies) as client:
        cid = (await client.post("/api/conversations", json={})).json()["id"]
        for text in ("compute the answer", "and one more"):
            from tests.channels.web.test_api_turns import send_and_finish

            await send_and_finish(client, cid, text)
        hits = (await client.get("/api/search", params={"q": "compute"})).json()["hits"]
        assert hits and hits[0]["conversation_id"] == cid and hits[0]["turn_position"] == 1

        md = await client.get(f"/api/conversations/{cid}/export?format=md")
        assert md.headers["content-disposition"].startswith("attachment;")
        assert "x is 42" in md.text and "compute the answer" in md.text
        exported = await client.get(f"/api/conversations/{cid}/export?format=json")
        assert exported.headers["content-disposition"].startswith("attachment;")
        data = json.loads(exported.text)
        assert [t["answer"] for t in data["turns"]] == ["x is 42", "y is 43"]

        fork = await client.post(f"/api/conversations/{cid}/fork", json={"turn": 1})
        assert fork.status_code == 201 and fork.json()["parent_id"] == cid
        names = [
            v["name"]
            for v in (await client.get(f"/api/conversations/{fork.json()['id']}/vars")).json()[
                "variables"
            ]
        ]
        assert names == ["x"]  # the branch starts from turn 1: y does not exist there
        nowhere = await client.post(f"/api/conversations/{cid}/fork", json={"turn": 9})
        assert nowhere.status_code == 404
        before_any = await client.post(f"/api/conversations/{cid}/fork", json={"turn": 0})
        assert before_any.status_code == 201 and before_any.json()["turn_count"] == 0
        empty = (await client.get(f"/api/conversations/{before_any.json()['id']}/vars")).json()
        assert empty["variables"] == []  # a branch before turn 1 holds none of the parent

        listed = (await client.get(f"/api/conversations/{cid}/forks")).json()["forks"]
        assert [(f["id"], f["fork_turn"]) for f in listed] == [
            (before_any.json()["id"], 0),
            (fork.json()["id"], 1),
        ]
        # A fork told what it will ask is named a retry (the same request) or an edit.
        titles = [
            (await client.post(f"/api/conversations/{cid}/fork", json=body)).json()["label"]
            for body in (
                {"turn": 1, "request": "and one more"},
                {"turn": 1, "request": "and two more"},
            )
        ]
        label = (await client.get(f"/api/conversations/{cid}")).json()["label"]
        assert titles == [f"Retry of turn 2 · {label}", f"Edit of turn 2: “and two more” · {label}"]
        assert fork.json()["label"] == f"Branch from turn 1 · {label}"
        unknown = await client.get("/api/conversations/no-such-id/forks")
        assert unknown.status_code == 404

        replayed = (await client.post(f"/api/conversations/{cid}/replay")).json()
        assert replayed["finished"]["ok"] is True
        assert [t["position"] for t in replayed["turns"]] == [1, 2]


async def test_create_with_a_first_message_starts_its_turn(web: Web) -> None:
    async with web([reply([], "hello back")]) as client:
        created = await client.post("/api/conversations", json={"text": "hello"})
        assert created.status_code == 201, created.text
        cid = created.json()["id"]
        events = await sse_events(
            client, f"/api/conversations/{cid}/events?after=0", until="turn_finished"
        )
        assert events[0]["type"] == "turn_started" and events[0]["request"] == "hello"
        assert events[-1]["answer"] == "hello back"
        too_long = await client.post("/api/conversations", json={"text": "x" * 100_001})
        assert too_long.status_code == 422
        empty = await client.post("/api/conversations", json={"text": " "})
        assert empty.status_code == 422
        listed = (await client.get("/api/conversations")).json()["conversations"]
        assert [c["id"] for c in listed] == [cid]  # the refused ones left nothing


async def test_create_with_a_message_that_cannot_be_sent_creates_nothing(tmp_path: Path) -> None:
    app = create_app(settings_for(tmp_path))  # the real OpenAI factory, no key, no base URL
    async with served(app) as url, httpx.AsyncClient(base_url=url) as client:
        await login(client)
        sent = await client.post("/api/conversations", json={"text": "hi"})
        assert sent.status_code == 503 and sent.json()["error"] == "ConfigError"
        assert (await client.get("/api/conversations")).json()["conversations"] == []
