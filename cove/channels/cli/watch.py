"""``cove watch ID``: follow a conversation live, whichever process runs its turns.

Each figure a block makes is written where ``cove run`` writes it and named by its path (in
``--events`` as a ``figure_saved`` line after its block's event).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from typing import Any

import click

from cove.channels.cli.base import command, examples, load_settings
from cove.channels.cli.json_out import EventNumbering
from cove.channels.cli.render import ProgressView, console_for, line, print_json_line
from cove.channels.figures import save_figures
from cove.config import Settings
from cove.conversation import Conversations
from cove.events import (
    BlockFinished,
    Event,
    ModelDelta,
    Resync,
    SteerReceived,
    TurnFinished,
    TurnStarted,
)


@command(
    "watch",
    short_help="Follow a conversation live (from another terminal or process).",
    epilog=examples(
        "cove watch 3f2a                 follow its next turns",
        "cove watch 3f2a --after 0       first replay the whole conversation",
        "cove watch 3f2a --events --once  JSON lines until the next turn finishes",
    ),
)
@click.argument("conversation_id", metavar="ID")
@click.option("--events", is_flag=True, help="Print events as JSON lines.")
@click.option(
    "--after",
    type=click.IntRange(min=0),
    metavar="N",
    help="First replay the events after sequence number N (0: the whole conversation).",
)
@click.option("--once", is_flag=True, help="Stop when the next turn finishes.")
def watch_command(conversation_id: str, events: bool, after: int | None, once: bool) -> int:
    """Follow a conversation live, whichever process runs its turns. Ctrl-C stops."""
    return asyncio.run(_watch(load_settings(), conversation_id, events, after, once))


async def _watch(
    settings: Settings, conversation_id: str, events: bool, after: int | None, once: bool
) -> int:
    async with Conversations.open(settings) as convs:
        conv = await convs.get(conversation_id)
        stderr = console_for(sys.stderr)
        view = None if events else ProgressView(console_for(sys.stdout))
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGINT, stop.set)
        stream = convs.watch(conv.id, after=after)
        try:
            async with stream:
                stderr.print(line((f"watching {conv.id} · Ctrl-C to stop", "dim")))
                # After attaching: every turn that started before is in the record by now.
                turns = (await convs.inspect(conv.id)).turns if view is None else ()
                numbering = EventNumbering({t.id: t.position for t in turns})
                saver = _FigureSaver(convs, conv.id, view, {t.id: t.position for t in turns})
                reading = asyncio.ensure_future(_show(stream, view, numbering, once, saver))
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


async def _show(
    stream: Any,
    view: ProgressView | None,
    numbering: EventNumbering,
    once: bool,
    saver: _FigureSaver,
) -> None:
    async for event in stream:
        _print(event, view, numbering)
        await saver.note(event)
        if once and isinstance(event, TurnFinished):
            return


class _FigureSaver:
    """Writes the figures of each finished block and names them."""

    def __init__(
        self,
        convs: Conversations,
        conversation_id: str,
        view: ProgressView | None,
        positions: dict[int, int],
    ) -> None:
        self.convs = convs
        self.conversation_id = conversation_id
        self.view = view
        self.positions = positions  # turn row id → position

    async def note(self, event: Event) -> None:
        """Remember turn positions; write a finished block's figures."""
        if isinstance(event, TurnStarted):
            self.positions[event.turn_id] = event.position
        if not isinstance(event, BlockFinished) or not event.block.figures:
            return
        if event.turn_id not in self.positions:  # it started before we attached
            turns = (await self.convs.inspect(self.conversation_id)).turns
            self.positions.update({t.id: t.position for t in turns})
        ref = (self.positions.get(event.turn_id, 0), event.iteration, event.index)
        found = [(ref, figure) for figure in event.block.figures]
        try:
            saved = await save_figures(self.convs, self.conversation_id, found)
        except OSError as exc:
            print(f"cove: figures not written to files ({exc})", file=sys.stderr)
            return
        for figure in saved:
            if self.view is None:
                shown = {"type": "figure_saved", "conversation_id": self.conversation_id}
                print_json_line({**shown, **figure.to_json()})
            else:
                self.view.console.print(line((figure.line(), "magenta")))


def _print(event: Event, view: ProgressView | None, numbering: EventNumbering) -> None:
    if view is None:
        print_json_line(numbering.shape(event))
        return
    if isinstance(event, ModelDelta):
        return  # the human view shows whole replies
    if isinstance(event, Resync):
        view.console.print(line(("(fell behind: some events were skipped)", "yellow")))
    elif isinstance(event, SteerReceived):
        view.console.print(line(("you (steering): ", "yellow"), event.text))
    else:
        view.handle(event)
