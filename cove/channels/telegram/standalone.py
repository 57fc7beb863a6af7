"""``cove telegram`` on its own: it owns its ``Conversations`` and runs until a signal."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys

from cove.channels.telegram.channel import TelegramChannel
from cove.channels.telegram.logs import Redact
from cove.channels.telegram.secret import Secret
from cove.config import Settings
from cove.conversation import Conversations, LLMFactory


def configure_logging(token: Secret, level: int = logging.INFO) -> logging.Handler:
    """Log lines to stderr, with the token redacted from every one of them."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(Redact(token))  # from the first line on, before the channel starts
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level)
    return handler


async def run_bot(
    settings: Settings,
    *,
    llm_factory: LLMFactory | None = None,
    stop: asyncio.Event | None = None,
) -> int:
    """Run the bot until SIGINT/SIGTERM (or ``stop`` is set); returns the exit code.

    Raises:
        CoveError: No model endpoint, no bot token, an unusable database, or the Bot API
            refused to start.
    """
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    installed = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signum, stop.set)
            installed.append(signum)
    try:
        async with await Conversations.open(settings, llm_factory=llm_factory) as convs:
            convs.check_model()
            channel = TelegramChannel(convs, settings.telegram)
            await channel.start()
            mode = "webhook" if settings.telegram.webhook_url else "long polling"
            print(
                f"cove telegram: @{channel.core.username} is running ({mode}); Ctrl-C stops it",
                file=sys.stderr,
                flush=True,
            )
            try:
                await stop.wait()
            finally:
                await channel.stop()
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
    return 0
