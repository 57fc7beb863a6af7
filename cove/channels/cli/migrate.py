"""``cove migrate --to PATH|URL``: every conversation, with its history, into another database.

The logic lives in ``cove.conversation.service.operations.move_database``; this module parses
the argument and says what was moved.
"""

from __future__ import annotations

import asyncio
import sys

import click

from cove.channels.cli.base import command, examples, load_settings
from cove.conversation.service.operations import move_database


@command(
    "migrate",
    short_help="Copy every conversation to another database (SQLite or PostgreSQL).",
    epilog=examples(
        "cove migrate --to postgresql://cove@db.example/cove",
        "cove --db postgresql://cove@db.example/cove migrate --to ~/cove.db",
    ),
)
@click.option(
    "--to",
    "target",
    required=True,
    metavar="PATH|URL",
    help="The database to copy into: a SQLite file or a postgresql:// URL (empty or new).",
)
def migrate_command(target: str) -> int:
    """Copy every conversation of the database (--db / COVE_DB) with its whole history, and
    its workspace files, into another database; the source stays as it is.

    Stop the cove processes using the database first. Then point COVE_DB (or --db) at the
    new database.
    """
    report = asyncio.run(move_database(load_settings(), target))
    rows = report.rows
    print(
        f"moved {report.conversations} conversations ({rows.get('turn', 0)} turns, "
        f"{rows.get('iteration', 0)} iterations, {rows.get('block', 0)} blocks, "
        f"{rows.get('var_version', 0)} variable versions) from {report.source} to "
        f"{report.target}; point COVE_DB or --db at it to use it",
        file=sys.stdout,
    )
    return 0
