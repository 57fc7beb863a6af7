"""``cove doctor``: check configuration, database, sandbox and model endpoint, each OK or a fix."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from cove.channels.cli.app import EXIT_FAILED, EXIT_OK, run_async
from cove.channels.cli.common import add_common
from cove.channels.cli.render import console_for, line
from cove.config import Settings, unknown_env_vars
from cove.conversation.health import Check, run_checks


def register(sub: Any) -> None:
    """Add ``doctor``."""
    p = sub.add_parser("doctor", help="check configuration, database, sandbox and model endpoint")
    add_common(p)
    p.set_defaults(handler=lambda a, s: run_async(_doctor(a, s)))


async def _doctor(args: argparse.Namespace, settings: Settings) -> int:
    console = console_for(sys.stdout)
    checks: list[Check] = await run_checks(settings)
    unknown = ", ".join(unknown_env_vars(os.environ))
    checks.append(
        Check(
            "environment",
            not unknown,
            f"unknown: {unknown}" if unknown else "no unknown COVE_* variables",
            "fix or remove the names above",
        )
    )
    for check in checks:
        mark = ("OK  ", "green") if check.ok else ("FAIL", "red")
        console.print(line(mark, f" {check.name}: {check.detail}"))
        for item in check.items:
            console.print(f"       {item}", markup=False, highlight=False)
        if not check.ok and check.fix:
            console.print(line(("     fix: ", "yellow"), check.fix))
    return EXIT_OK if all(c.ok for c in checks) else EXIT_FAILED
