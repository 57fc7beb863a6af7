"""Fixtures for the web channel's API tests: an app on real uvicorn with a scripted model."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import httpx
import pytest

from cove.channels.web import create_app
from cove.conversation import LLMFactory, scripted_factory
from tests.channels.web.browser import browser, page, site  # noqa: F401 (browser fixtures)
from tests.channels.web.serve import login as logged_in
from tests.channels.web.serve import served
from tests.scripted import settings_for

Web = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]


@pytest.fixture
def web(tmp_path: Path) -> Web:
    """``async with web(replies or factory, upload_limit=..., login=...) as client``.

    The client is logged in (``login``) unless ``login=False``.
    """

    @asynccontextmanager
    async def start(
        replies: Sequence[str] | LLMFactory = (),
        *,
        upload_limit: int | None = None,
        login: bool = True,
    ) -> AsyncIterator[httpx.AsyncClient]:
        factory = replies if callable(replies) else scripted_factory(list(replies))
        app = create_app(settings_for(tmp_path), llm_factory=factory, upload_limit=upload_limit)
        async with served(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
            yield await logged_in(client) if login else client

    return start
