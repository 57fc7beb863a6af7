"""``cove tui [ID]``: the terminal UI, on a conversation or the most recent one.

Test-only switch: when ``COVE_TUI_SCRIPTED_REPLIES`` names a JSON file of scripted model replies
(the format ``scripted_factory`` reads), the app talks to that scripted model instead of an
endpoint. Only the terminal smoke test sets it; it is not a flag, so it cannot be reached by
accident from the command line.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from cove.channels.cli.app import run_async
from cove.channels.cli.common import add_common
from cove.config import Settings
from cove.conversation import Conversations, scripted_factory

SCRIPTED_ENV = "COVE_TUI_SCRIPTED_REPLIES"


def register(sub: Any) -> None:
    """Add ``tui``."""
    tui = sub.add_parser("tui", help="the terminal UI (conversations, iterations, variables)")
    add_common(tui)
    tui.add_argument("id", nargs="?", help="conversation id or prefix (default: the most recent)")
    tui.set_defaults(handler=lambda a, s: run_async(_tui(a, s)))


async def _tui(args: argparse.Namespace, settings: Settings) -> int:
    # Imported here: Textual takes a while to import and no other command needs it.
    from cove.channels.tui import CoveApp

    scripted = os.environ.get(SCRIPTED_ENV)
    factory = scripted_factory(scripted) if scripted else None
    async with Conversations.open(settings, llm_factory=factory) as convs:
        if args.id is not None:
            await convs.get(args.id)  # an unknown id fails here, before the screen opens
        await CoveApp(convs, args.id).run_async()
    return 0
