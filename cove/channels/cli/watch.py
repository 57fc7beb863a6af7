"""``cove watch ID``: follow a conversation live, whichever process runs its turns."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from typing import Any

from cove.channels.cli.app import run_async
from cove.channels.cli.common import add_common
from cove.channels.cli.render import ProgressView, console_for, line, print_json_line
from cove.config import Settings
from cove.conversation import Conversations
from cove.events import Event, ModelDelta, Resync, SteerReceived, TurnFinished


def register(sub: Any) -> None:
    """Add ``watch``."""
    watch = sub.add_parser(
        "watch", help="follow a conversation live (from another terminal or process)"
    )
    add_common(watch)
    watch.add_argument("id", help="conversation id or prefix")
    watch.add_argument("--events", action="store_true", help="print events as JSON lines")
    watch.add_argument(
        "--after",
        type=_seq,
        metavar="N",
        help="first replay the events after sequence number N (0: the whole conversation)",
    )
    watch.add_argument("--once", action="store_true", help="stop when the next turn finishes")
    watch.set_defaults(handler=lambda a, s: run_async(_watch(a, s)))


def _seq(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a sequence number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a sequence number ≥ 0, got {text}")
    return value


async def _watch(args: argparse.Namespace, settings: Settings) -> int:
    async with Conversations.open(settings) as convs:
        conv = await convs.get(args.id)
        stderr = console_for(sys.stderr)
        view = None if args.events else ProgressView(console_for(sys.stdout))
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGINT, stop.set)
        stream = convs.watch(conv.id, after=args.after)
        try:
            async with stream:
                stderr.print(line((f"watching {conv.id} · Ctrl-C to stop", "dim")))
                reading = asyncio.ensure_future(_show(stream, view, args))
                stopping = asyncio.ensure_future(stop.wait())
                await asyncio.wait({reading, stopping}, return_when=asyncio.FIRST_COMPLETED)
                for task in (reading, stopping):
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
        finally:
            if view is not None:
                view.close()
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signal.SIGINT)
    return 0


async def _show(stream: Any, view: ProgressView | None, args: argparse.Namespace) -> None:
    async for event in stream:
        _print(event, view)
        if args.once and isinstance(event, TurnFinished):
            return


def _print(event: Event, view: ProgressView | None) -> None:
    if view is None:
        print_json_line(event.to_json())
        return
    if isinstance(event, ModelDelta):
        return  # the human view shows whole replies
    if isinstance(event, Resync):
        view.console.print(line(("(fell behind: some events were skipped)", "yellow")))
    elif isinstance(event, SteerReceived):
        view.console.print(line(("you (steering): ", "yellow"), event.text))
    else:
        view.handle(event)
