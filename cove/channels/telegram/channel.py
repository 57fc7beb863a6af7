"""``TelegramChannel``: the bot as a part another program starts and stops in its own loop.

It drives a ``Conversations`` it does not own (``cove serve`` runs it beside the web app; the
standalone ``cove telegram`` owns one). ``start`` returns once updates are being received, by
long polling or, with a webhook URL, by a small uvicorn server whose requests must carry the
secret token Telegram was given.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import secrets
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import uvicorn
from telegram import BotCommand, Update
from telegram.error import InvalidToken, TelegramError
from telegram.ext import (
    Application,
    ApplicationBuilder,
    CallbackQueryHandler,
    CommandHandler,
    MessageHandler,
    TypeHandler,
    filters,
)

from cove.channels.telegram.approvals import PREFIX
from cove.channels.telegram.commands import COMMANDS, Commands
from cove.channels.telegram.handlers import Core
from cove.channels.telegram.inbox import Inbox
from cove.channels.telegram.limiter import Limiter
from cove.channels.telegram.logs import Redaction, quiet_http_logs
from cove.channels.telegram.outbox import Outbox
from cove.channels.telegram.roster import allow_warnings
from cove.channels.telegram.secret import Secret, bot_token
from cove.config import TelegramSettings
from cove.conversation import Conversations
from cove.errors import ConfigError, CoveError

if TYPE_CHECKING:  # not imported: cove telegram runs without cove serve's libraries
    from cove.channels.serve.channel import ChannelCounts

log = logging.getLogger("cove.telegram")

#: The update kinds the bot asks Telegram for.
UPDATES = ["message", "callback_query"]


class TelegramChannel:
    """The Telegram bot over a ``Conversations``: ``await start()``, later ``await stop()``."""

    name = "telegram"

    def __init__(self, convs: Conversations, settings: TelegramSettings) -> None:
        """Build the bot (nothing connects before ``start``).

        Raises:
            ConfigError: No bot token is configured.
        """
        self.convs = convs
        self.settings = settings
        token = bot_token(settings)
        bot_id = token.reveal().partition(":")[0]  # public: the bot's user id
        limiter = Limiter(settings, bot_id, convs.take_send_slot)
        self.app: Application = _build(settings, token, limiter)  # type: ignore[type-arg]
        self.outbox = Outbox(self.app.bot, limiter)
        self.core = Core(convs, self.outbox, settings)
        self._webhook: asyncio.Task[None] | None = None
        self._webhook_server: uvicorn.Server | None = None
        self._sockets: list[socket.socket] = []
        self.webhook_port = 0  # the port the webhook listens on, once started
        self._started = False
        self._redaction = Redaction(token)
        self._bot_id = bot_id
        _register(self.app, self.core)

    async def start(self) -> None:
        """Connect (``getMe``), register the commands and begin receiving updates.

        Raises:
            telegram.error.TelegramError: The Bot API refused the token or is unreachable.
        """
        quiet_http_logs()
        self._redaction.install()
        for warning in allow_warnings(self.core.allow, self.core.allow_usernames):
            log.warning(warning)
        try:
            await self._initialize()
        except BaseException:
            with contextlib.suppress(Exception):  # undo what started; the first error counts
                if self._started:
                    await self.stop()
                else:
                    await self.app.shutdown()
            self._redaction.remove()
            raise

    async def _initialize(self) -> None:
        try:
            await self.app.initialize()
        except InvalidToken:
            raise ConfigError(
                "the Bot API refused the bot token (check TELEGRAM_BOT_TOKEN)"
            ) from None
        except TelegramError as exc:
            raise CoveError(
                f"cannot reach the Bot API at {self.settings.api_root}: {exc.message}"
            ) from None
        me = self.app.bot
        self.core.username = me.username or ""
        self.core.bot_id = me.id
        await self.outbox.call(
            lambda: me.set_my_commands([BotCommand(c.name, c.menu) for c in COMMANDS]),
            method="setMyCommands",
        )
        await self.app.start()
        self._started = True
        if self.settings.webhook_url:
            await self._start_webhook()
        else:
            assert self.app.updater is not None
            await self.app.updater.start_polling(
                timeout=dt.timedelta(seconds=self.settings.poll_timeout_s),
                allowed_updates=UPDATES,
            )
        log.info("Telegram bot @%s is running", self.core.username)

    async def stop(self) -> None:
        """Stop receiving, cancel the turns this bot runs, wait for its tasks; idempotent."""
        if not self._started:
            return
        self._started = False
        self.core.stopping.set()
        self.core.withdraw_waiting()
        if self._webhook is not None:
            await self._stop_webhook()
        elif self.app.updater is not None and self.app.updater.running:
            await self.app.updater.stop()
        inbox = self.core.inbox
        if inbox is not None:  # runs no more updates; those it has not run are given back
            await inbox.stop()
        for handles in list(self.core.roster.turns.values()):
            for handle in list(handles):
                await handle.cancel()
        if self.core.tasks:
            await asyncio.gather(*list(self.core.tasks), return_exceptions=True)
        if inbox is not None:
            await inbox.release()
        await self.app.stop()
        await self.app.shutdown()
        self._redaction.remove()

    async def _start_webhook(self) -> None:
        from cove.channels.telegram.webhook import webhook_app

        hook = self.settings.webhook_url
        assert hook is not None
        secret = self.settings.webhook_secret or secrets.token_urlsafe(32)
        path = urlsplit(hook).path or "/"
        host, port = self.settings.webhook_host, self.settings.webhook_port
        try:
            sock = socket.create_server((host, port))
        except OSError as exc:
            raise ConfigError(
                f"cannot listen for the webhook on {host}:{port}: {exc.strerror}"
            ) from exc
        inbox = self.core.inbox = Inbox(self.convs, self.app, self._bot_id)
        inbox.start()  # takes over what nodes that died or stopped left
        config = uvicorn.Config(
            webhook_app(self.app, path, secret, inbox.receive),
            log_level="warning",
            lifespan="off",
        )
        config.load()
        server = uvicorn.Server(config)
        # The server's own pieces, not ``serve``: that would take over the process's signals.
        server.lifespan = config.lifespan_class(config)
        await server.startup(sockets=[sock])
        self._webhook_server = server
        self._webhook = asyncio.create_task(server.main_loop())
        self._sockets = [sock]
        self.webhook_port = sock.getsockname()[1]
        bot = self.app.bot
        await self.outbox.call(
            lambda: bot.set_webhook(hook, secret_token=secret, allowed_updates=UPDATES),
            method="setWebhook",
        )

    async def _stop_webhook(self) -> None:
        # The webhook stays registered: other nodes behind the same URL go on receiving, and
        # Telegram keeps an update that finds no node for a later delivery. (Polling, when the
        # bot starts that way, deletes it first.)
        assert self._webhook is not None and self._webhook_server is not None
        self._webhook_server.should_exit = True
        with contextlib.suppress(Exception):
            await self._webhook
        await self._webhook_server.shutdown(sockets=self._sockets)
        self._webhook = None

    def count_with(self, counts: ChannelCounts) -> None:
        """Count every update received and every failed Bot API call (by its method) in
        ``cove serve``'s metrics (``serve.channel``); call before ``start``."""
        self.observe_updates(on_update=counts.received, on_api_error=counts.failed)

    def observe_updates(
        self,
        *,
        on_update: Callable[[], object] | None = None,
        on_api_error: Callable[[str], object] | None = None,
    ) -> None:
        """Be told of every update received and of every failed Bot API call (its method).

        Call before ``start``; for metrics.
        """
        if on_update is not None:
            counter = on_update

            async def count(update: object, context: object) -> None:
                counter()

            # A group of its own, ahead of the bot's: every group runs, so nothing is skipped.
            self.app.add_handler(TypeHandler(Update, count), group=-1)
        self.outbox.on_error = on_api_error

    @property
    def api_calls(self) -> int:
        """Bot API calls made so far, repeats included (for measurements)."""
        return self.outbox.limiter.calls


def _build(settings: TelegramSettings, token: Secret, limiter: Limiter) -> Application:  # type: ignore[type-arg]
    _prefer_timedeltas()
    root = settings.api_root
    return (
        ApplicationBuilder()
        .token(token.reveal())
        .base_url(f"{root}/bot")  # python-telegram-bot appends the token to both
        .base_file_url(f"{root}/file/bot")
        .rate_limiter(limiter)
        .connection_pool_size(128)
        .pool_timeout(30.0)
        .get_updates_read_timeout(settings.poll_timeout_s + 10)
        .job_queue(None)
        .build()
    )


def _prefer_timedeltas() -> None:
    """Take python-telegram-bot's opt-in to time periods as ``timedelta`` (its coming default).

    The library reads it from the process environment whenever it builds a ``RetryAfter``;
    without it, every flood-control answer also raises a deprecation warning. A value the user
    set is kept.
    """
    os.environ.setdefault("PTB_TIMEDELTA", "true")


def _register(app: Application, core: Core) -> None:  # type: ignore[type-arg]
    commands = Commands(core)
    for name, run in commands.table().items():
        # /cancel acts at once: a message waiting for another node's turn holds the chat's order.
        app.add_handler(CommandHandler(name, core.command(run, ordered=name != "cancel")))
    content = (filters.TEXT & ~filters.COMMAND) | filters.Document.ALL | filters.PHOTO
    app.add_handler(MessageHandler(content, core.on_message))
    app.add_handler(MessageHandler(filters.COMMAND, core.unknown(commands.unknown)))
    app.add_handler(CallbackQueryHandler(core.approvals.on_press, pattern=f"^{PREFIX}"))

    async def on_error(update: object, context: object) -> None:
        error = getattr(context, "error", None)
        log.error("update failed: %s: %s", type(error).__name__, error)

    app.add_error_handler(on_error)
