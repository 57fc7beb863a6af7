"""Commands that change or check a conversation: ``fork``, ``delete``, ``replay``."""

from __future__ import annotations

import asyncio
import sys

import click
from rich.text import Text

from cove.channels.cli.base import command, examples, load_settings, program
from cove.channels.cli.exits import EXIT_DIVERGED, EXIT_OK, EXIT_USAGE
from cove.channels.cli.render import console_for, print_json, print_json_line
from cove.config import Settings
from cove.conversation import Conversations
from cove.events import ReplayFinished, ReplayTurnChecked


@command(
    "fork",
    short_help="Branch a conversation from one of its turns.",
    epilog=examples(
        "cove fork 3f2a --at 2     a new conversation with the variables of turn 2",
        "cove fork 3f2a --at 0     a branch before turn 1: another first turn",
    ),
)
@click.argument("conversation_id", metavar="ID")
@click.option(
    "--at",
    type=click.IntRange(min=0),
    required=True,
    metavar="N",
    help="The turn whose variables the fork starts from (0: none of its turns).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def fork_command(conversation_id: str, at: int, as_json: bool) -> int:
    """Branch a conversation: a new one whose sandbox starts from turn N's variables."""
    return asyncio.run(_fork(load_settings(), conversation_id, at, as_json))


@command(
    "delete",
    short_help="Delete a conversation and its history.",
    epilog=examples("cove delete 3f2a", "cove delete 3f2a --yes    without asking"),
)
@click.argument("conversation_id", metavar="ID")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
def delete_command(conversation_id: str, yes: bool) -> int:
    """Delete a conversation, its history and its workspace files."""
    return asyncio.run(_delete(load_settings(), conversation_id, yes))


@command(
    "replay",
    short_help="Re-run the recorded replies and compare every block.",
    epilog=examples("cove replay 3f2a", "cove replay 3f2a --json"),
)
@click.argument("conversation_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON lines.")
def replay_command(conversation_id: str, as_json: bool) -> int:
    """Re-run a conversation's recorded model replies in a fresh sandbox and compare every
    block and variable with the record (exit 8 when they diverge)."""
    return asyncio.run(_replay(load_settings(), conversation_id, as_json))


async def _fork(settings: Settings, conversation_id: str, at: int, as_json: bool) -> int:
    async with await Conversations.open(settings) as convs:
        record = await convs.fork(conversation_id, at_turn=at)
    if as_json:
        print_json({"id": record.id, "parent_id": record.parent_id, "fork_turn": record.fork_turn})
    else:
        print(f"forked {record.parent_id} at turn {record.fork_turn} → {record.id}")
        print(f"continue it with: {program()} chat {record.id[:12]}")
    return EXIT_OK


async def _delete(settings: Settings, conversation_id: str, yes: bool) -> int:
    async with await Conversations.open(settings) as convs:
        record = await convs.get(conversation_id)
        if not yes:
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


async def _replay(settings: Settings, conversation_id: str, as_json: bool) -> int:
    console = console_for(sys.stdout)
    ok = False
    async with await Conversations.open(settings) as convs:
        async for event in convs.replay(conversation_id):
            if as_json:
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
                if not as_json:
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
