"""``cove demo``: an offline conversation through the full stack, driven by a scripted model.

Real sandbox workers and the real database; only the model is scripted. It shows variables
persisting and versioning across turns, an error the model recovers from, a sub-query, a fork
from an earlier turn and a replay that matches the record.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rich.console import Console
from rich.markup import escape

from cove.channels.cli.app import EXIT_DIVERGED, EXIT_FAILED, EXIT_OK, run_async
from cove.channels.cli.common import add_common, program
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


def register(sub: Any) -> None:
    """Add ``demo``."""
    p = sub.add_parser("demo", help="an offline tour with a scripted model (no API key needed)")
    add_common(p)
    p.set_defaults(handler=lambda a, s: run_async(_demo(a, s)))


async def _demo(args: argparse.Namespace, settings: Settings) -> int:
    console = console_for(sys.stdout)
    replies = [r for _, rs in TURNS for r in rs] + FORK_REPLIES
    factory = scripted_factory(replies, subquery_replies=SUBQUERY_REPLIES)
    settings = settings.replace(model="scripted-demo")
    async with await Conversations.open(settings, llm_factory=factory) as convs:
        conv = await convs.create(channel="demo")
        console.print(
            f"[bold]cove demo[/bold] — conversation {conv.id}\n"
            f"[dim]database: {escape(settings.store.database)}[/dim]\n"
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
    cove = escape(program())
    console.print(
        "\n[bold]Explore it:[/bold]\n"
        f"  {cove} show {conv.id[:12]}          every iteration, block and result\n"
        f"  {cove} vars {conv.id[:12]} primes   every version of a variable\n"
        f"  {cove} show {fork.id[:12]}          the forked branch\n"
        f"  {cove} replay {conv.id[:12]}        re-execute and compare\n"
        f"  {cove} chat                       talk to your own model (set OPENAI_API_KEY)\n"
    )
    return EXIT_OK if ok else EXIT_DIVERGED


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
