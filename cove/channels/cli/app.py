"""The ``cove`` command: argument parsing, settings, and the one place errors become exit codes.

Exit codes:

====  =====================================================================
0     the turn is done / the command succeeded / a replay matched
1     the turn failed (model endpoint, infrastructure) or an unexpected error
2     bad usage (unknown command, bad flag, bad configuration)
3     the turn ran out of iterations (``max_iterations``)
4     the turn hit its consecutive-error budget (``error_budget``)
5     the turn was cancelled
6     the conversation is busy (another process is running a turn in it)
7     not found (unknown or ambiguous conversation id, turn or variable)
8     a replay diverged from the record
9     the database cannot be used (not a cove database, newer schema, …)
====  =====================================================================
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence

from cove.config import Settings, unknown_env_vars
from cove.errors import Busy, ConfigError, CoveError, NotFound, StoreError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_MAX_ITERATIONS, EXIT_ERROR_BUDGET, EXIT_CANCELLED = 3, 4, 5
EXIT_BUSY, EXIT_NOT_FOUND, EXIT_DIVERGED, EXIT_STORE = 6, 7, 8, 9

STATUS_EXIT = {
    "done": EXIT_OK,
    "failed": EXIT_FAILED,
    "interrupted": EXIT_FAILED,
    "max_iterations": EXIT_MAX_ITERATIONS,
    "error_budget": EXIT_ERROR_BUDGET,
    "cancelled": EXIT_CANCELLED,
}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every ``cove`` command."""
    from cove.channels.cli import commands

    parser = argparse.ArgumentParser(
        prog="cove",
        description="A conversational Python sandbox: the model answers by writing code, and "
        "every step is versioned in one SQLite database.",
        epilog="Exit codes: 0 done, 1 failed, 2 bad usage, 3 max iterations, 4 error budget, "
        "5 cancelled, 6 busy, 7 not found, 8 replay diverged, 9 database unusable.",
    )
    parser.add_argument("--db", help="database path (default: $COVE_DB or the user data dir)")
    parser.add_argument("--model", help="model name (default: $COVE_MODEL)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    commands.register(sub)
    return parser


def settings_from(args: argparse.Namespace) -> Settings:
    """Settings from the environment and the global flags."""
    return Settings.load(
        db_path=getattr(args, "db", None),
        model=getattr(args, "model", None),
        max_iterations=getattr(args, "max_iterations", None),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``cove`` command line; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = settings_from(args)
        for name in unknown_env_vars(os.environ):
            print(f"cove: warning: {name} matches no setting (ignored)", file=sys.stderr)
        code: int = args.handler(args, settings)
        return code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_CANCELLED
    except CoveError as exc:
        print(f"cove: {exc}", file=sys.stderr)
        return exit_code_for(exc)


def exit_code_for(exc: CoveError) -> int:
    """The exit code for an error (the one mapping of ``CoveError`` to this surface)."""
    if isinstance(exc, ConfigError):
        return EXIT_USAGE
    if isinstance(exc, Busy):
        return EXIT_BUSY
    if isinstance(exc, NotFound):
        return EXIT_NOT_FOUND
    if isinstance(exc, StoreError):
        return EXIT_STORE
    return EXIT_FAILED


def run_async(coro: object) -> int:
    """Run a command coroutine to completion."""
    result: int = asyncio.run(coro)  # type: ignore[arg-type]
    return result
