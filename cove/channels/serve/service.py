"""``cove serve``: the chosen channels in one process and one event loop over one
``Conversations``, with health, metrics, structured logs and a graceful stop.

Stopping (SIGTERM or SIGINT):

1. new turns are refused (``Conversations.accepting``; the HTTP side answers 503 to changes and
   ``/readyz`` says ``stopping``), and turns still queued behind a running one are never started:
   their senders are told to send them again (the web's refused notice; a Telegram message that
   came by webhook is given back to the store's inbox instead, for another node to run);
2. running turns get ``grace_s`` seconds to finish;
3. the ones still running are cancelled — recorded ``cancelled``, watchers see them end;
4. the channels stop, the workers stop, the database closes; exit 0.

A second signal exits at once (status 128 + the signal's number). Every unit a turn commits is
durable when committed, so nothing committed is lost; the turns cut short are marked
``interrupted`` by the next process that opens the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from starlette.routing import BaseRoute

from cove.channels.serve.affinity import FORWARD_KEEP_ALIVE_S, mark_forwarded
from cove.channels.serve.channel import Channel, ChannelFactory, routes_of, runs_everywhere
from cove.channels.serve.channels import channel_factory
from cove.channels.serve.http import Access, HttpServer, build_app, claims
from cove.channels.serve.logs import PROCESS
from cove.channels.serve.metrics import ServeMetrics
from cove.channels.serve.ops import OpsState
from cove.channels.serve.supervisor import FIRST, ChildSockets, Supervisor
from cove.channels.web.listen import listen
from cove.channels.web.security import login_url, new_token
from cove.config import Settings
from cove.conversation import Conversations, LLMFactory
from cove.conversation.memory import live_memory_budget, open_files_at_least
from cove.conversation.service.operations import Readiness
from cove.errors import ConfigError

log = logging.getLogger("cove.serve")

#: Running turns get this long to finish after a stop signal (``--grace``; the CLI's default
#: is the ``channels.shutdown_grace_s`` setting).
DEFAULT_GRACE_S = 30.0
#: How long cancelled turns get to record their end before the database closes anyway.
CANCEL_WAIT_S = 10.0
#: Open files a serving process asks for (as far as its hard limit allows): every client's
#: connection, event stream and forwarded stream is one, besides the live environments.
SERVE_OPEN_FILES = 65_536


@dataclass(frozen=True)
class ServeOptions:
    """What ``cove serve`` runs and how."""

    #: The channels to run, by name (``channels.py``): cove's ``web``, ``telegram`` and
    #: ``mcp``, and those installed packages add. The web serves pages at ``/`` and MCP at
    #: ``/mcp``, behind the login.
    channels: tuple[str, ...] = ("web",)
    host: str = "127.0.0.1"
    port: int = 8000
    grace_s: float = DEFAULT_GRACE_S
    #: The login token of the HTTP side (every bind has one); a new one unless configured.
    token: str = field(default_factory=new_token, repr=False)
    #: The token was configured (``COVE_WEB_TOKEN``): it is never printed.
    token_configured: bool = False
    #: More ``Host`` names to answer on a loopback bind (a reverse proxy's public name).
    allow_hosts: tuple[str, ...] = ()

    @property
    def web(self) -> bool:
        """Whether the web channel runs."""
        return "web" in self.channels

    @property
    def mcp(self) -> bool:
        """Whether MCP is served (at ``/mcp``)."""
        return "mcp" in self.channels


class Service:
    """One running service; ``run`` returns the exit status.

    Alone it binds its address; as one of ``cove serve --processes N`` (``child``) it serves on
    the sockets the supervisor bound, forwards turns to their home process, and tells the
    supervisor it serves instead of printing the address.
    """

    def __init__(
        self,
        settings: Settings,
        options: ServeOptions,
        llm_factory: LLMFactory | None = None,
        child: ChildSockets | None = None,
    ) -> None:
        self.settings = settings
        self.options = options
        self.llm_factory = llm_factory
        self.child = child
        self.stopping = asyncio.Event()
        self._signals = 0
        # Loaded before anything starts: a channel that is not installed stops the service now.
        self._factories = {name: channel_factory(name) for name in options.channels}

    def _on_signal(self, signum: int) -> None:
        self._signals += 1
        if self._signals == 1:
            log.info("stopping", extra={"fields": {"signal": signal.Signals(signum).name}})
            self.stopping.set()
            return
        log.warning("second signal: exiting at once; committed work is kept")
        logging.shutdown()
        os._exit(128 + signum)

    async def run(self) -> int:
        """Serve until a stop signal, then stop gracefully; returns 0.

        Raises:
            ListenError: The address cannot be bound (the port is in use, …).
        """
        # Bound first: a busy port fails at once, before a worker starts or a URL is printed.
        sock = self.child.tcp if self.child else listen(self.options.host, self.options.port)
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self._on_signal, signum)
        try:
            async with Conversations.open(self.settings, llm_factory=self.llm_factory) as convs:
                await self._serve(convs, sock)
        finally:
            sock.close()
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(signum)
        log.info("stopped")
        return 0

    async def _serve(self, convs: Conversations, sock: socket.socket) -> None:
        placement = self.child.placement if self.child else None
        if placement is not None:  # a conversation created here runs its turns here
            convs.new_ids = placement.at_home
        metrics = ServeMetrics(convs, placement)
        convs.observe(metrics.observe)
        made = self._channels(convs, metrics)
        ops = OpsState(metrics=metrics, readiness=Readiness(self.settings), channels=tuple(made))
        access = Access(self.options.token, self.options.host, self.options.allow_hosts)
        app = build_app(ops, _routes(made, self._factories), access, placement)
        http = HttpServer(app, sock)
        channels: list[Channel] = [http]
        if self.child is not None:  # turns forwarded by the other processes
            forwarded = mark_forwarded(app)
            # Kept open longer than the forwarding side keeps an idle connection, so that
            # side never sends on a connection this one is closing.
            keep = 2 * FORWARD_KEEP_ALIVE_S
            channels.append(
                HttpServer(forwarded, self.child.unix, lifespan=False, keep_alive_s=keep)
            )
        channels += made.values()
        started: list[Channel] = []
        try:
            for channel in channels:
                await channel.start()
                started.append(channel)
            self._announce(http)
            await self.stopping.wait()
            ops.draining = True
            await self._drain(convs, metrics)
        finally:
            # Last started first: the channels (the web ends its event streams), then the
            # HTTP servers, which wait for the connections still open.
            for channel in reversed(started):
                await channel.stop()

    def _channels(self, convs: Conversations, metrics: ServeMetrics) -> dict[str, Channel]:
        """Each chosen channel over ``convs``, by name, told where to count in ``metrics``.

        Raises:
            ConfigError: A channel's factory made a channel of another name.
        """
        made: dict[str, Channel] = {}
        for name, factory in self._factories.items():
            channel = factory(convs, self.settings)
            if getattr(channel, "name", None) != name:
                named = getattr(channel, "name", None)
                raise ConfigError(f"the channel {name!r} made a channel named {named!r}")
            count_with = getattr(channel, "count_with", None)
            if callable(count_with):
                count_with(metrics.counts(name))
            made[name] = channel
        return made

    def _announce(self, http: HttpServer) -> None:
        """Say the service serves: the address on stderr, or to the supervisor (which prints
        it once every process serves)."""
        log.info("serving", extra={"fields": {"port": http.port, "grace_s": self.options.grace_s}})
        if self.child is None:
            announce(self.options, http.port)
            return
        os.write(self.child.ready_fd, b"r")
        os.close(self.child.ready_fd)

    async def _drain(self, convs: Conversations, metrics: ServeMetrics) -> None:
        """Refuse new turns, give running ones the grace period, then cancel the rest."""
        convs.accepting = False
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(metrics.wait_idle(), self.options.grace_s)
        left = metrics.running_conversations()
        if left:
            log.info("cancelling turns", extra={"fields": {"turns": len(left)}})
        for conversation_id in left:
            await convs.cancel(conversation_id)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(metrics.wait_idle(), CANCEL_WAIT_S)


def run_service(settings: Settings, options: ServeOptions, processes: int) -> int:
    """Serve as ``processes`` processes on one port (one: this process, as a ``Service``);
    returns the exit status.

    Raises:
        ListenError: The address cannot be bound.
    """
    files = open_files_at_least(SERVE_OPEN_FILES)  # inherited by every process
    log.debug("open-file limit", extra={"fields": {"limit": files}})
    if processes <= 1:
        code: int = asyncio.run(Service(settings, options).run())
        return code
    settings = memory_shared(settings, processes)
    # Loaded here, before a fork: one not installed stops the service at once.
    everywhere = [name for name in options.channels if runs_everywhere(channel_factory(name))]
    once = tuple(name for name in options.channels if name not in everywhere)

    def run_child(sockets: ChildSockets) -> int:
        index = sockets.placement.index
        PROCESS.set(index)
        mine = options if index == FIRST else replace(options, channels=tuple(everywhere))
        child_code: int = asyncio.run(Service(settings, mine, child=sockets).run())
        return child_code

    supervisor = Supervisor(
        settings,
        options.host,
        options.port,
        processes,
        run_child,
        lambda port: announce(options, port),
        once=once,
    )
    return supervisor.run()


def memory_shared(settings: Settings, processes: int) -> Settings:
    """The settings of each of ``processes`` processes: the live environments' memory budget
    (``live_memory_mb``, or its default share of the machine) divided among them."""
    budget_mb = live_memory_budget(settings.sandbox.live_memory_mb) // (1024 * 1024)
    sandbox = replace(settings.sandbox, live_memory_mb=max(1, budget_mb // processes))
    return replace(settings, sandbox=sandbox)


def announce(options: ServeOptions, port: int) -> None:
    """The address on stderr once the socket listens; with the web, how to log in; with
    MCP, its URL and the header its clients send.

    A configured token is never printed (it may reach a log collector); a new one is, in
    the login URL and the MCP line, as it is the only way in.
    """
    if not options.web:
        line = login_url(options.host, port, None)
    elif options.token_configured:
        url = login_url(options.host, port, None)
        line = f"{url} (log in at {url}login?token=<COVE_WEB_TOKEN>)"
    else:
        line = login_url(options.host, port, options.token)
    print(f"cove serve: {line}", file=sys.stderr, flush=True)
    if options.mcp:
        url = login_url(options.host, port, None)
        shown = "<COVE_WEB_TOKEN>" if options.token_configured else options.token
        line = f"MCP at {url}mcp (Authorization: Bearer {shown})"
        print(f"cove serve: {line}", file=sys.stderr, flush=True)


def _routes(
    channels: Mapping[str, Channel], factories: Mapping[str, ChannelFactory]
) -> list[BaseRoute]:
    """The HTTP routes of ``channels``: those of the channels that run once first, then those
    of the channels every process runs (the web, which answers every other path).

    Raises:
        ConfigError: A route outside its channel's ``/NAME``, or a channel that runs once
            whose ``/NAME`` the web answers (in several processes its requests would go to
            the wrong one).
    """
    first: list[BaseRoute] = []
    last: list[BaseRoute] = []
    for name, channel in channels.items():
        everywhere = runs_everywhere(factories[name])
        (last if everywhere else first).extend(routes_of(channel, everywhere))
    for name, factory in factories.items():
        if not runs_everywhere(factory) and claims(last, name):
            raise ConfigError(
                f"the channel {name!r} cannot run beside the web: the web serves /{name}"
            )
    return [*first, *last]
