"""``cove demo``: an offline conversation through the full stack, driven by a scripted model.

Real sandbox workers and the real database; only the model is scripted. It shows variables
persisting and versioning across turns, an error the model recovers from, a sub-query, a fork
from an earlier turn and a replay that matches the record.
"""

from __future__ import annotations

import asyncio
import shlex
import sys
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from cove.channels.cli.base import command, examples, load_settings, program
from cove.channels.cli.exits import EXIT_DIVERGED, EXIT_FAILED, EXIT_OK
from cove.channels.cli.render import ProgressView, console_for
from cove.config import Settings
from cove.conversation import Conversations, scripted_factory
from cove.events import ReplayFinished, ReplayTurnChecked, TurnFinished

IS_PRIME = (
    "def is_prime(n):\n"
    "    if n < 2:\n"
    "        return False\n"
    "    return all(n % d for d in range(2, int(n ** 0.5) + 1))"
)
GROW = (
    "n = primes[-1] + 1\n"
    "while len(primes) < 15:\n"
    "    if is_prime(n):\n"
    "        primes.append(n)\n"
    "    n += 1\n"
    "total = sum(primes)\n"
    "total"
)
ROLL = (
    "import random\n"
    "rolls = [random.randint(1, 6) for _ in range(5)]\n"
    'description = llm_query("Describe this dice roll in a few words: " + str(rolls))\n'
    "rolls"
)

TURNS: list[tuple[str, list[dict[str, Any]]]] = [
    (
        "What are the first ten prime numbers, and what is their sum?",
        [
            {
                "thinking": "Write a primality test, keep the primes and their sum in variables.",
                "title": "Primes and dice",
                "code": [
                    IS_PRIME,
                    "primes = [n for n in range(2, 30) if is_prime(n)][:10]\n"
                    "total = sum(primes)\ntotal",
                ],
                "answer": "The first ten primes are {{primes}}; their sum is {{total}}.",
                "confidence": "high",
            }
        ],
    ),
    (
        "Extend the list to fifteen primes.",
        [
            {
                "thinking": "primes and is_prime survive from the last turn: extend in place.",
                "code": [GROW],
            },
            {
                "thinking": "The journal shows the new total; check the length before answering.",
                "code": ["len(primes)"],
                "answer": "Now there are fifteen: {{primes}}, summing to {{total}}.",
                "confidence": "high",
            },
        ],
    ),
    (
        "Roll five dice, sort them, and describe the roll.",
        [
            {
                "thinking": "Roll with the seeded random; ask a sub-query for a description.",
                "code": [ROLL, "rolls.sort(reverse=True)\nbest = rolls[5]"],
            },
            {
                "thinking": "Index 5 is out of range for five dice; the best die is rolls[0].",
                "code": ["best = rolls[0]\nbest"],
                "answer": "You rolled {{rolls}} (best {{best}}). {{description}}",
                "confidence": "medium",
            },
        ],
    ),
]
FORK_REQUEST = "Instead, square each of the primes."
FORK_REPLIES: list[dict[str, Any]] = [
    {
        "thinking": "This branch starts from turn 1, so primes holds ten numbers.",
        "code": ["squares = [p * p for p in primes]\nsquares"],
        "answer": "Squared: {{squares}}.",
        "confidence": "high",
    }
]
SUBQUERY_REPLIES = ["A mixed roll with one standout die."]


DEMO_DB = "demo.db"  # in the data directory, next to (never inside) the real history


@command(
    "demo",
    short_help="An offline tour with a scripted model (no API key needed).",
    epilog=examples(
        "cove demo                  into its own database, demo.db in the data directory",
        "cove demo --db /tmp/d.db   into another database file",
    ),
)
def demo_command() -> int:
    """An offline tour of cove with a scripted model: variables that persist and get versions,
    an error the model recovers from, a sub-query, a fork and a replay.

    It writes into its own database file (demo.db in the data directory), not your history,
    unless --db names another one.
    """
    settings = load_settings()
    if click.get_current_context().meta.get("cove.db") is None:
        settings = settings.replace(db_path=str(settings.store.data_dir / DEMO_DB))
    return asyncio.run(_demo(settings))


async def _demo(settings: Settings) -> int:
    console = console_for(sys.stdout)
    replies = [r for _, rs in TURNS for r in rs] + FORK_REPLIES
    factory = scripted_factory(replies, subquery_replies=SUBQUERY_REPLIES)
    settings = settings.replace(model="scripted-demo")
    async with await Conversations.open(settings, llm_factory=factory) as convs:
        conv = await convs.create(channel="demo")
        console.print(
            f"[bold]cove demo[/bold] — conversation {conv.id}\n"
            f"[dim]database: {escape(convs.database_path)}[/dim]\n"
        )
        for request, _ in TURNS:
            if not await _turn(console, convs, conv.id, request):
                return EXIT_FAILED
        console.rule("the variable primes has versions")
        for v in await convs.var_history(conv.id, "primes"):
            console.print(
                f"primes v{v.version} (turn {v.turn_position}): {v.preview}", markup=False
            )
        console.rule("fork from turn 1")
        fork = await convs.fork(conv.id, at_turn=1)
        console.print(f"fork {fork.id} starts with the variables as of turn 1")
        if not await _turn(console, convs, fork.id, FORK_REQUEST):
            return EXIT_FAILED
        console.rule("replay the original conversation")
        ok = False
        async for event in convs.replay(conv.id):
            if isinstance(event, ReplayTurnChecked):
                verdict = "match" if not event.mismatches else f"{len(event.mismatches)} diverged"
                console.print(
                    f"turn {event.position}: {event.matched}/{event.blocks} blocks "
                    f"re-executed — {verdict}"
                )
            elif isinstance(event, ReplayFinished):
                ok = event.ok
    cove = escape(program()) + escape(_db_flag(convs.database_path))
    console.print(
        "\n[bold]Explore it:[/bold]\n"
        f"  {cove} show {conv.id[:12]}          every iteration, block and result\n"
        f"  {cove} vars {conv.id[:12]} primes   every version of a variable\n"
        f"  {cove} show {fork.id[:12]}          the forked branch\n"
        f"  {cove} replay {conv.id[:12]}        re-execute and compare\n"
        f"  {escape(program())} chat    talk to your own model (set OPENAI_API_KEY)\n"
    )
    return EXIT_OK if ok else EXIT_DIVERGED


def _db_flag(database: str) -> str:
    """``--db`` and the database as a shell reads it (a URL's password shown as ``***``)."""
    return f" --db {shlex.quote(database)}"


async def _turn(console: Console, convs: Conversations, conversation_id: str, text: str) -> bool:
    console.rule(f"you: {text}")
    view = ProgressView(console)
    status = "failed"
    async for event in convs.send(conversation_id, text):
        view.handle(event)
        if isinstance(event, TurnFinished):
            status = event.status
    view.close()
    return status == "done"
