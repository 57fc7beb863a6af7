"""The Starlette application factory: routes, templates, security and one ``Conversations``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from cove.channels.web import api_conversations, api_files, api_turns, pages
from cove.channels.web.errors import handle
from cove.channels.web.render import code, markdown, pygments_css
from cove.channels.web.security import Guard
from cove.channels.web.state import WebState
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


async def _pygments(request: Request) -> Response:
    return Response(pygments_css(), media_type="text/css")


@asynccontextmanager
async def _conversations(
    settings: Settings, llm_factory: LLMFactory | None, given: Conversations | None
) -> AsyncIterator[Conversations]:
    if given is not None:
        yield given
        return
    async with Conversations.open(settings, llm_factory=llm_factory) as opened:
        yield opened


def create_app(
    settings: Settings,
    *,
    llm_factory: LLMFactory | None = None,
    token: str | None = None,
    upload_limit: int | None = None,
    convs: Conversations | None = None,
) -> Starlette:
    """Build the web app; its lifespan opens (and at the end closes) one ``Conversations``.

    Args:
        settings: The configuration (the API key stays on the server).
        llm_factory: Builds model clients (tests pass a scripted one).
        token: The login token; None serves loopback ``Host`` names only, without login.
        upload_limit: Largest upload in bytes; default ``web_upload_limit_bytes``, else
            ``max_file_read_bytes`` (the sandbox refuses to read larger files anyway).
        convs: An open ``Conversations`` to use instead (``cove serve`` shares one between
            channels); the app then neither opens nor closes it.
    """

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with _conversations(settings, llm_factory, convs) as opened:
            state = WebState(
                settings=settings,
                convs=opened,
                upload_limit=upload_limit
                or settings.channels.web_upload_limit_bytes
                or settings.sandbox.max_file_read_bytes,
            )
            app.state.web = state
            try:
                yield
            finally:
                state.closing.set()  # ends every event stream
                for task in list(state.drains):
                    task.cancel()
                await asyncio.gather(*state.drains, return_exceptions=True)

    routes = [
        *api_conversations.ROUTES,
        *api_turns.ROUTES,
        *api_files.ROUTES,
        *pages.ROUTES,
        Route("/static/pygments.css", _pygments, methods=["GET"]),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[Middleware(Guard, token=token)],
        exception_handlers={CoveError: handle, HTTPException: handle, Exception: handle},
    )
    app.state.templates = _templates()
    return app
