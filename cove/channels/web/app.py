"""The Starlette application factory: routes, templates and one ``Conversations``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from cove.channels.figures import figure_name, turn_figures
from cove.channels.web import (
    api_approvals,
    api_conversations,
    api_figures,
    api_files,
    api_profile,
    api_turns,
    listing,
    pages,
)
from cove.channels.web.api_figures import figure_url
from cove.channels.web.errors import handle
from cove.channels.web.render import code, markdown, pygments_css
from cove.channels.web.state import WebState
from cove.channels.web.tables import frame_table
from cove.config import Settings
from cove.conversation import Conversations, LLMFactory
from cove.errors import CoveError

HERE = Path(__file__).parent


def _templates() -> Jinja2Templates:
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    env = templates.env
    env.filters["markdown"] = markdown
    env.filters["code"] = code
    env.globals["when"] = _when
    env.globals["size"] = _size
    env.globals["figure_url"] = figure_url
    env.globals["figure_name"] = figure_name
    env.globals["turn_figures"] = turn_figures
    env.globals["frame_table"] = frame_table
    return templates


def _when(timestamp: float | None) -> str:
    import datetime as dt

    if not timestamp:
        return ""
    return dt.datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M")


def _size(size: int | None) -> str:
    if size is None:
        return ""
    return f"len {size}"  # the store's size of a variable is its length


async def stop_app(app: Starlette) -> None:
    """End the app's event streams and stop reading the turns it sent.

    Its lifespan does this; call it yourself when the app is mounted inside another whose
    lifespan runs instead. The turns run on in their ``Conversations`` (which waits for them
    when it closes).
    """
    state: WebState | None = getattr(app.state, "web", None)
    if state is None:
        return
    state.closing.set()
    for task in list(state.drains):
        task.cancel()
    await asyncio.gather(*state.drains, return_exceptions=True)


async def _pygments(request: Request) -> Response:
    return Response(pygments_css(), media_type="text/css")


def create_app(
    settings: Settings,
    *,
    convs: Conversations | None = None,
    llm_factory: LLMFactory | None = None,
    upload_limit: int | None = None,
) -> Starlette:
    """Build the web app over one ``Conversations``.

    ``cove web`` serves it alone; a process running several channels passes the
    ``Conversations`` they share. The app uses absolute paths: serve it at a root.

    The app has no access control of its own: whoever serves it puts its whole HTTP surface
    behind one ``security.Guard`` (the login, the ``Host`` and ``Origin`` checks, the security
    headers), as ``cove web`` and ``cove serve`` do.

    Args:
        settings: The configuration (the API key stays on the server).
        convs: An open ``Conversations`` the caller owns (several channels in one
            process share it); the app's lifespan uses it and leaves it open. None: the
            lifespan opens its own and closes it at the end.
        llm_factory: Builds model clients when the app opens its own ``Conversations``
            (tests pass a scripted one).
        upload_limit: Largest upload in bytes; default ``web_upload_limit_bytes``, else
            ``max_file_read_bytes`` (the sandbox refuses to read larger files anyway).
    """

    limit = upload_limit or settings.web.upload_limit_bytes or settings.sandbox.max_file_read_bytes

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if convs is not None:
            try:
                yield
            finally:
                await stop_app(app)
            return
        async with Conversations.open(settings, llm_factory=llm_factory) as opened:
            app.state.web = WebState(settings=settings, convs=opened, upload_limit=limit)
            try:
                yield
            finally:
                await stop_app(app)

    routes = [
        *api_conversations.ROUTES,
        *api_turns.ROUTES,
        *api_approvals.ROUTES,
        *api_files.ROUTES,
        *api_figures.ROUTES,
        *api_profile.ROUTES,
        *pages.ROUTES,
        *listing.ROUTES,
        Route("/static/pygments.css", _pygments, methods=["GET"]),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={CoveError: handle, HTTPException: handle, Exception: handle},
    )
    app.state.templates = _templates()
    if convs is not None:  # ready at once: also when mounted where no lifespan runs
        app.state.web = WebState(settings=settings, convs=convs, upload_limit=limit)
    return app
