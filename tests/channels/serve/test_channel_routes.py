"""The HTTP routes channels add to ``cove serve``'s one server: where they may lie and in what
order the service tries them (``service._routes``), with the real web app beside them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

from cove.channels.serve.channel import runs_everywhere
from cove.channels.serve.channels import channel_factory
from cove.channels.serve.service import _routes
from cove.channels.web import create_app
from cove.errors import ConfigError
from tests.scripted import settings_for


def _ok(request: Any) -> PlainTextResponse:
    return PlainTextResponse("ok")


class Plain:
    """A channel as a package writes it: a name, start and stop, and routes."""

    def __init__(self, name: str, *paths: str) -> None:
        self.name = name
        self.routes = [Route(path, _ok) for path in paths]

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


def plain_factory(convs: object, settings: object) -> Plain:
    raise AssertionError("not made here")


class Web(Plain):
    def __init__(self, tmp_path: Path) -> None:
        super().__init__("web")
        self.routes = [Mount("/", app=create_app(settings_for(tmp_path)))]


def web_factory(convs: object, settings: object) -> Web:
    raise AssertionError("not made here")


web_factory.every_process = True  # type: ignore[attr-defined]


def test_cove_s_web_runs_in_every_process_and_its_other_channels_in_the_first() -> None:
    assert runs_everywhere(channel_factory("web"))
    assert not runs_everywhere(channel_factory("mcp"))
    assert not runs_everywhere(channel_factory("telegram"))


def test_a_channel_s_routes_come_before_the_web_which_answers_every_other_path(
    tmp_path: Path,
) -> None:
    inbox, web = Plain("inbox", "/inbox", "/inbox/{name}"), Web(tmp_path)
    routes = _routes({"web": web, "inbox": inbox}, {"web": web_factory, "inbox": plain_factory})
    assert routes == [*inbox.routes, *web.routes]


@pytest.mark.parametrize("path", ["/", "/inboxes", "/api/inbox", "/c/inbox"])
def test_a_route_outside_the_channel_s_own_path_is_refused(path: str) -> None:
    with pytest.raises(ConfigError, match="its paths must be /inbox or lie under /inbox/"):
        _routes({"inbox": Plain("inbox", "/inbox", path)}, {"inbox": plain_factory})


@pytest.mark.parametrize("name", ["api", "c", "static", "conversations"])
def test_a_channel_named_like_a_path_the_web_answers_cannot_run_beside_it(
    tmp_path: Path, name: str
) -> None:
    web, clash = Web(tmp_path), Plain(name)
    with pytest.raises(ConfigError, match=f"the web serves /{name}"):
        _routes({"web": web, name: clash}, {"web": web_factory, name: plain_factory})
    # Alone, without the web, the same channel may run.
    assert _routes({name: clash}, {name: plain_factory}) == []
