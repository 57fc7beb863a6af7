"""Workspace files: upload (with the size limit), list, download as an attachment."""

from __future__ import annotations

import os
from pathlib import Path

import httpx

from cove.channels.web import create_app
from tests.channels.web.conftest import Web
from tests.channels.web.serve import login, served
from tests.scripted import settings_for


async def test_upload_list_download(web: Web, tmp_path: Path) -> None:
    async with web() as client:
        cid = (await client.post("/api/conversations", json={})).json()["id"]
        data = b"a,b\n1,2\n"
        put = await client.put(f"/api/conversations/{cid}/files/data.csv", content=data)
        assert put.status_code == 201 and put.json() == {"name": "data.csv", "size": len(data)}
        assert (tmp_path / "workspaces" / cid / "data.csv").read_bytes() == data
        (tmp_path / "workspaces" / cid / "out").mkdir()
        (tmp_path / "workspaces" / cid / "out" / "page.html").write_text("<script>x</script>")
        files = (await client.get(f"/api/conversations/{cid}/files")).json()["files"]
        assert [(f["path"], f["size"]) for f in files] == [("data.csv", 8), ("out/page.html", 18)]
        got = await client.get(f"/api/conversations/{cid}/files/out/page.html")
        assert got.status_code == 200 and got.text == "<script>x</script>"
        assert got.headers["content-disposition"].startswith("attachment")
        assert got.headers["content-type"] == "application/octet-stream"
        assert (await client.get(f"/api/conversations/{cid}/files/nope.txt")).status_code == 404


async def test_oversize_upload_is_413_and_writes_nothing(web: Web, tmp_path: Path) -> None:
    async with web(upload_limit=1000) as client:
        cid = (await client.post("/api/conversations", json={})).json()["id"]
        workspace = tmp_path / "workspaces" / cid
        declared = await client.put(f"/api/conversations/{cid}/files/big.bin", content=b"x" * 1001)
        assert declared.status_code == 413 and "1,000 bytes" in declared.json()["message"]

        async def chunks():  # no Content-Length: the limit is enforced while streaming
            for _ in range(5):
                yield b"y" * 300

        streamed = await client.put(f"/api/conversations/{cid}/files/big.bin", content=chunks())
        assert streamed.status_code == 413
        assert os.listdir(workspace) == []
        ok = await client.put(f"/api/conversations/{cid}/files/small.bin", content=b"z" * 1000)
        assert ok.status_code == 201


async def test_names_that_escape_or_hide_are_refused(web: Web, tmp_path: Path) -> None:
    async with web() as client:
        cid = (await client.post("/api/conversations", json={})).json()["id"]
        workspace = tmp_path / "workspaces" / cid
        hidden = await client.put(f"/api/conversations/{cid}/files/.bashrc", content=b"x")
        assert hidden.status_code == 422
        escaped = await client.put(f"/api/conversations/{cid}/files/..%2Fescape", content=b"x")
        assert escaped.status_code in (404, 405, 422)  # never a write outside the workspace
        assert not (tmp_path / "workspaces" / "escape").exists()
        secret = tmp_path / "secret.txt"
        secret.write_text("do not serve")
        (workspace / "link.txt").symlink_to(secret)
        assert (await client.get(f"/api/conversations/{cid}/files/link.txt")).status_code == 404
        traversal = await client.get(f"/api/conversations/{cid}/files/../../secret.txt")
        assert traversal.status_code in (404, 422) and "do not serve" not in traversal.text
        listed = (await client.get(f"/api/conversations/{cid}/files")).json()["files"]
        assert listed == []
        assert (
            await client.put("/api/conversations/nope/files/a.txt", content=b"x")
        ).status_code == 404


async def test_the_upload_limit_comes_from_the_settings(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, web_upload_limit_bytes=10)
    async with served(create_app(settings)) as url, httpx.AsyncClient(base_url=url) as client:
        await login(client)
        cid = (await client.post("/api/conversations", json={})).json()["id"]
        page = await client.get(f"/c/{cid}")
        assert 'data-upload-limit="10"' in page.text
        fits = await client.put(f"/api/conversations/{cid}/files/ten.txt", content=b"x" * 10)
        assert fits.status_code == 201
        over = await client.put(f"/api/conversations/{cid}/files/eleven.txt", content=b"x" * 11)
        assert over.status_code == 413 and "10 bytes" in over.json()["message"]
    assert sorted(p.name for p in (settings.store.workspaces / cid).iterdir()) == ["ten.txt"]


async def test_an_upload_past_the_workspace_quota_is_413_and_leaves_nothing(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, workspace_quota_mb=1)
    async with served(create_app(settings)) as url, httpx.AsyncClient(base_url=url) as client:
        await login(client)
        cid = (await client.post("/api/conversations", json={})).json()["id"]
        first = await client.put(f"/api/conversations/{cid}/files/a.bin", content=b"a" * 600_000)
        assert first.status_code == 201
        second = await client.put(f"/api/conversations/{cid}/files/b.bin", content=b"b" * 600_000)
        assert second.status_code == 413
        assert "quota of 1 MB would be exceeded" in second.json()["message"]
        again = await client.put(f"/api/conversations/{cid}/files/a.bin", content=b"c" * 700_000)
        assert again.status_code == 201  # replacing a file counts only the difference
    workspaces = settings.store.workspaces
    assert sorted(p.name for p in (workspaces / cid).iterdir()) == ["a.bin"]
    assert list((workspaces / ".incoming").iterdir()) == []  # nothing staged is left
