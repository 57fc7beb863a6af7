"""``cove serve``: the chosen channels in one process and one event loop over one
``Conversations``, with health, metrics, structured logs and a graceful stop.

Stopping (SIGTERM or SIGINT):

1. new turns are refused (``Conversations.accepting``; the HTTP side answers 503 to changes and
   ``/readyz`` says ``stopping``), and turns still queued behind a running one are never started:
   their senders are told to send them again (a Telegram message, the web's refused notice);
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
import sys
from dataclasses import dataclass

from starlette.applications import Starlette

from cove.channels.serve.channel import Channel, telegram_channel
from cove.channels.serve.http import HttpServer, build_app
from cove.channels.serve.metrics import ServeMetrics
from cove.channels.serve.ops import OpsState
from cove.config import Settings
from cove.conversation import Conversations, LLMFactory
from cove.conversation.operations import Readiness

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
    host: str = "127.0.0.1"
    port: int = 8000
    grace_s: float = DEFAULT_GRACE_S
    token: str | None = None  # the web login token (None: loopback Host names only)


class Service:
    """One running service; ``run`` returns the exit status."""

    def __init__(
        self, settings: Settings, options: ServeOptions, llm_factory: LLMFactory | None = None
    ) -> None:
        self.settings = settings
        self.options = options
        self.llm_factory = llm_factory
        self.stopping = asyncio.Event()
        self._signals = 0

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
        """Serve until a stop signal, then stop gracefully; returns 0."""
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self._on_signal, signum)
        try:
            async with Conversations.open(self.settings, llm_factory=self.llm_factory) as convs:
                await self._serve(convs)
        finally:
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(signum)
        log.info("stopped")
        return 0

    async def _serve(self, convs: Conversations) -> None:
        metrics = ServeMetrics(convs)
        convs.watching.observe(metrics.observe)
        chosen = (("web", self.options.web), ("telegram", self.options.telegram))
        names = tuple(name for name, on in chosen if on)
        ops = OpsState(metrics=metrics, readiness=Readiness(self.settings), channels=names)
        web = self._web(convs)
        http = HttpServer(build_app(ops, web), self.options.host, self.options.port)
        channels: list[Channel] = [http]
        if self.options.telegram:
            channels.append(telegram_channel(convs, self.settings, metrics))
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

        return create_app(self.settings, convs=convs, token=self.options.token)

    def _announce(self, http: HttpServer) -> None:
        host = "localhost" if http.host in ("127.0.0.1", "::1") else http.host
        # The login token is a secret: it never goes to the logs (log in at /login?token=...).
        login = " (log in with COVE_WEB_TOKEN)" if self.options.token and self.options.web else ""
        print(f"cove serve: http://{host}:{http.port}/{login}", file=sys.stderr, flush=True)
        log.info("serving", extra={"fields": {"port": http.port, "grace_s": self.options.grace_s}})

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


def _end_event_streams(web: Starlette | None) -> None:
    """End the web channel's SSE streams now, instead of at the end of the server's wait for
    open connections (they would hold it for its whole timeout)."""
    state = getattr(web.state, "web", None) if web is not None else None
    if state is not None:
        state.closing.set()
