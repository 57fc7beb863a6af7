"""The web as a channel of ``cove serve`` (the entry point ``web`` of the group
``cove.channels``): the app at ``/`` of the service's HTTP server, behind its login, in every
process of the service."""

from __future__ import annotations

from starlette.routing import Mount

from cove.channels.web.app import create_app, stop_app
from cove.config import Settings
from cove.conversation import Conversations


class WebChannel:
    """The web app over the service's ``Conversations``, mounted at ``/`` (its lifespan runs
    with the service's HTTP server)."""

    name = "web"
    #: Served by every process of ``cove serve --processes N``: a conversation's requests
    #: are forwarded to its home process by the service itself.
    every_process = True

    def __init__(self, convs: Conversations, settings: Settings) -> None:
        self.app = create_app(settings, convs=convs)
        self.routes = (Mount("/", app=self.app),)

    async def start(self) -> None:
        """Nothing to start: the app serves once the HTTP server does."""

    async def stop(self) -> None:
        """End the app's event streams, before the HTTP server waits for its connections."""
        await stop_app(self.app)
