"""JSON API: a conversation's workspace files (upload, list, download).

Uploads stream through the conversation layer (``Conversations.receive_file``): staged outside
the workspace and renamed into place only when complete, under the upload limit and admitted by
the workspace quota, so a refused upload leaves nothing behind. Downloads are always attachments
(the sandbox wrote them: never rendered by the browser) and never follow a symbolic link.
"""

from __future__ import annotations

import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from cove.channels.web.errors import BadInput, TooLarge
from cove.channels.web.state import web
from cove.errors import NotFound

MAX_LISTED = 1000


def _workspace(request: Request, cid: str) -> Path:
    return web(request).convs.workspace(cid)


def _checked_name(name: str) -> str:
    if not name or name.startswith(".") or "/" in name or "\\" in name or "\x00" in name:
        raise BadInput(f"file name {name!r} is not allowed (a plain name, not hidden)")
    if len(name) > 200:
        raise BadInput("file name is over 200 characters")
    return name


def _inside(workspace: Path, relative: str) -> Path:
    """``relative`` inside ``workspace``, refusing hidden parts, ``..`` and symbolic links."""
    parts = [p for p in relative.split("/") if p]
    if not parts:
        raise BadInput("no file name given")
    for part in parts:
        _checked_name(part)
    path = workspace.joinpath(*parts)
    probe = workspace
    for part in parts:
        probe = probe / part
        if probe.is_symlink():
            raise NotFound("file", relative)
    return path


async def upload(request: Request) -> Response:
    state = web(request)
    name = _checked_name(request.path_params["name"])
    limit = state.upload_limit
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise TooLarge(f"the file is over the upload limit of {limit:,} bytes")

    async def within_limit() -> AsyncIterator[bytes]:
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise TooLarge(f"the file is over the upload limit of {limit:,} bytes")
            yield chunk

    size = await state.convs.receive_file(request.path_params["cid"], name, within_limit())
    return JSONResponse({"name": name, "size": size}, status_code=201)


async def list_files(request: Request) -> Response:
    record = await web(request).convs.get(request.path_params["cid"])
    workspace = _workspace(request, record.id)
    files: list[dict[str, object]] = []
    if workspace.is_dir():
        for root, dirs, names in os.walk(workspace):  # os.walk does not follow links
            if len(files) >= MAX_LISTED:
                break
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(names):
                path = Path(root) / name
                info = path.lstat()
                if name.startswith(".") or not stat.S_ISREG(info.st_mode):
                    continue
                rel = path.relative_to(workspace).as_posix()
                files.append({"path": rel, "size": info.st_size, "modified": info.st_mtime})
                if len(files) >= MAX_LISTED:
                    break
    return JSONResponse({"files": files})


async def download(request: Request) -> Response:
    record = await web(request).convs.get(request.path_params["cid"])
    relative = request.path_params["path"]
    path = _inside(_workspace(request, record.id), relative)
    if not path.is_file():
        raise NotFound("file", relative)
    return FileResponse(
        path,
        media_type="application/octet-stream",
        filename=path.name,
        content_disposition_type="attachment",
    )


ROUTES = [
    Route("/api/conversations/{cid}/files", list_files, methods=["GET"]),
    Route("/api/conversations/{cid}/files/{name}", upload, methods=["PUT"]),
    Route("/api/conversations/{cid}/files/{path:path}", download, methods=["GET"]),
]
