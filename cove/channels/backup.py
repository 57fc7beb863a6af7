"""``cove backup PATH``: a consistent copy of the live database, checked before it is kept."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from cove.config import Settings
from cove.conversation.service.operations import backup_database


async def run_backup(settings: Settings, target: str, out: TextIO = sys.stdout) -> int:
    """Copy the database to ``target`` (refused if it exists) and say what the copy holds.

    Raises:
        CoveError: The target exists or is the database; StoreError: no usable database.
    """
    report = await backup_database(settings, Path(target))
    print(
        f"backed up {settings.store.database} to {report.target}: {report.bytes / 1e6:.1f} MB in "
        f"{report.seconds:.2f} s; integrity {report.integrity}; {report.conversations} "
        f"conversations, {report.turns} turns, {report.iterations} iterations, "
        f"{report.blocks} blocks",
        file=out,
    )
    return 0
