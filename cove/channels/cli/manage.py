"""Commands that change or check a conversation: ``fork``, ``delete``, ``replay``."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from rich.text import Text

from cove.channels.cli.app import EXIT_DIVERGED, EXIT_OK, EXIT_USAGE, run_async
from cove.channels.cli.common import add_common, positive_int, program
from cove.channels.cli.render import console_for, print_json, print_json_line
from cove.config import Settings
from cove.conversation import Conversations
from cove.events import ReplayFinished, ReplayTurnChecked


def register(sub: Any) -> None:
    """Add ``fork``, ``delete`` and ``replay``."""
    p = sub.add_parser("fork", help="branch a conversation from one of its turns")
    add_common(p)
    p.add_argument("id")
    p.add_argument(
        "--at",
        type=positive_int,
        required=True,
        metavar="N",
        help="the turn whose variables the fork starts from",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=lambda a, s: run_async(_fork(a, s)))

    p = sub.add_parser("delete", help="delete a conversation and its history")
    add_common(p)
    p.add_argument("id")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    p.set_defaults(handler=lambda a, s: run_async(_delete(a, s)))

    p = sub.add_parser("replay", help="re-run the recorded replies and compare every block")
    add_common(p)
    p.add_argument("id")
    p.add_argument("--json", action="store_true", help="print the report as JSON lines")
    p.set_defaults(handler=lambda a, s: run_async(_replay(a, s)))


async def _fork(args: argparse.Namespace, settings: Settings) -> int:
    async with await Conversations.open(settings) as convs:
        record = await convs.fork(args.id, at_turn=args.at)
    if args.json:
        print_json({"id": record.id, "parent_id": record.parent_id, "fork_turn": record.fork_turn})
    else:
        print(f"forked {record.parent_id} at turn {record.fork_turn} → {record.id}")
        print(f"continue it with: {program()} chat {record.id[:12]}")
    return EXIT_OK


async def _delete(args: argparse.Namespace, settings: Settings) -> int:
    async with await Conversations.open(settings) as convs:
        record = await convs.get(args.id)
        if not args.yes:
            if not sys.stdin.isatty():
                print("cove: refusing to delete without confirmation; pass --yes", file=sys.stderr)
                return EXIT_USAGE
            question = f"delete {record.id} ({record.title or 'untitled'})? [y/N] "
            answer = await asyncio.to_thread(input, question)
            if answer.strip().lower() not in ("y", "yes"):
                print("kept")
                return EXIT_OK
        await convs.delete(record.id)
    print(f"deleted {record.id}")
    return EXIT_OK


async def _replay(args: argparse.Namespace, settings: Settings) -> int:
    console = console_for(sys.stdout)
    ok = False
    async with await Conversations.open(settings) as convs:
        async for event in convs.replay(args.id):
            if args.json:
                print_json_line(event.to_json())
            elif isinstance(event, ReplayTurnChecked):
                mark = "[green]match[/green]" if not event.mismatches else "[red]DIVERGED[/red]"
                console.print(
                    f"turn {event.position}: {mark} — {event.matched}/{event.blocks} "
                    f"blocks ({event.recorded_status} → {event.replayed_status})"
                )
                for item in event.mismatches:
                    console.print(Text.assemble(("  • ", "red"), item))
            if isinstance(event, ReplayFinished):
                ok = event.ok
                if not args.json:
                    verdict = (
                        "every block and variable matched"
                        if ok
                        else (f"{event.mismatches} divergence(s)")
                    )
                    console.print(
                        f"replay of {event.conversation_id[:12]}: {event.turns} turns, "
                        f"{event.blocks} blocks — {verdict}"
                    )
    return EXIT_OK if ok else EXIT_DIVERGED
