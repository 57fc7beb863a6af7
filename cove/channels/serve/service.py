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
from dataclasses import dataclass, field, replace

from starlette.applications import Starlette

from cove.channels.serve.affinity import FORWARD_KEEP_ALIVE_S, mark_forwarded
from cove.channels.serve.channel import Channel, telegram_channel
from cove.channels.serve.http import Access, HttpServer, build_app
from cove.channels.serve.logs import PROCESS
from cove.channels.serve.metrics import ServeMetrics
from cove.channels.serve.ops import OpsState
from cove.channels.serve.plugins import channel_factory
from cove.channels.serve.supervisor import MCP_HOME, ChildSockets, Supervisor
from cove.channels.web.listen import listen
from cove.channels.web.security import login_url, new_token
from cove.config import Settings
from cove.conversation import Conversations, LLMFactory
from cove.conversation.memory import live_memory_budget
from cove.conversation.service.operations import Readiness

log = logging.getLogger("cove.serve")

#: Running turns get this long to finish after a stop signal (``--grace``; the CLI's default
#: is the ``channels.shutdown_grace_s`` setting).
DEFAULT_GRACE_S = 30.0
#: How long cancelled turns get to record their end before the database closes anyway.
CANCEL_WAIT_S = 10.0


@dataclass(frozen=True)
class ServeOptions:
    """What ``cove serve`` runs and how."""

    web: bool = True
    telegram: bool = False
    #: Serve MCP over streamable HTTP at ``/mcp`` (``cove.channels.mcp``), behind the login.
    mcp: bool = False
    host: str = "127.0.0.1"
    port: int = 8000
    grace_s: float = DEFAULT_GRACE_S
    #: The login token of the HTTP side (every bind has one); a new one unless configured.
    token: str = field(default_factory=new_token, repr=False)
    #: The token was configured (``COVE_WEB_TOKEN``): it is never printed.
    token_configured: bool = False
    #: More ``Host`` names to answer on a loopback bind (a reverse proxy's public name).
    allow_hosts: tuple[str, ...] = ()
    #: Channels installed packages add (``plugins.py``), by name.
    channels: tuple[str, ...] = ()


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
        self._factories = [channel_factory(name) for name in options.channels]

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
        chosen = (
            ("web", self.options.web),
            ("telegram", self.options.telegram),
            ("mcp", self.options.mcp),
            *((name, True) for name in self.options.channels),
        )
        names = tuple(name for name, on in chosen if on)
        ops = OpsState(metrics=metrics, readiness=Readiness(self.settings), channels=names)
        web = self._web(convs)
        access = Access(self.options.token, self.options.host, self.options.allow_hosts)
        app = build_app(ops, web, access, self._mcp(convs), placement)
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
        if self.options.telegram:
            channels.append(telegram_channel(convs, self.settings, metrics))
        channels += [factory(convs, self.settings) for factory in self._factories]
        started: list[Channel] = []
        try:
            for channel in channels:
                await channel.start()
                started.append(channel)
            self._announce(http)
            await self.stopping.wait()
            ops.draining = True
            await self._drain(convs, metrics)
            _end_event_streams(web)
        finally:
            for channel in reversed(started):
                await channel.stop()

    def _web(self, convs: Conversations) -> Starlette | None:
        if not self.options.web:
            return None
        from cove.channels.web import create_app

        return create_app(self.settings, convs=convs)

    def _mcp(self, convs: Conversations) -> dict[str, Starlette]:
        if not self.options.mcp:
            return {}
        from cove.channels.mcp.http import PATH, mcp_app

        return {PATH: mcp_app(convs)}

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
    if processes <= 1:
        code: int = asyncio.run(Service(settings, options).run())
        return code
    settings = memory_shared(settings, processes)
    for name in options.channels:  # one not installed stops the service here, before a fork
        channel_factory(name)

    def run_child(sockets: ChildSockets) -> int:
        index = sockets.placement.index
        PROCESS.set(index)
        once = index == MCP_HOME  # the channels that must run once
        mine = replace(
            options,
            telegram=options.telegram and once,
            mcp=options.mcp and once,
            channels=options.channels if once else (),
        )
        child_code: int = asyncio.run(Service(settings, mine, child=sockets).run())
        return child_code

    supervisor = Supervisor(
        settings,
        options.host,
        options.port,
        processes,
        run_child,
        lambda port: announce(options, port),
        mcp=options.mcp,
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


def _end_event_streams(web: Starlette | None) -> None:
    """End the web channel's SSE streams now, instead of at the end of the server's wait for
    open connections (they would hold it for its whole timeout)."""
    state = getattr(web.state, "web", None) if web is not None else None
    if state is not None:
        state.closing.set()
