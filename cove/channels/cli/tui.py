"""``cove tui [ID]``: the terminal UI, on a conversation or the most recent one.

Test-only switch: when ``COVE_TUI_SCRIPTED_REPLIES`` names a JSON file of scripted model replies
(the format ``scripted_factory`` reads), the app talks to that scripted model instead of an
endpoint. Only the terminal smoke test sets it; it is not a flag, so it cannot be reached by
accident from the command line.
"""

from __future__ import annotations

import asyncio
import os

import click

from cove.channels.cli.base import command, examples, load_settings
from cove.channels.cli.extras import require
from cove.config import Settings
from cove.conversation import Conversations, scripted_factory

SCRIPTED_ENV = "COVE_TUI_SCRIPTED_REPLIES"


@command(
    "tui",
    short_help="The terminal UI (conversations, iterations, variables).",
    epilog=examples("cove tui           on the most recent conversation", "cove tui 3f2a"),
)
@click.argument("conversation_id", metavar="[ID]", required=False)
def tui_command(conversation_id: str | None) -> int:
    """The terminal UI: conversations, live iterations and variables side by side."""
    require("tui", "cove tui")
    return asyncio.run(_tui(load_settings(), conversation_id))


async def _tui(settings: Settings, conversation_id: str | None) -> int:
    # Imported here: Textual takes a while to import and no other command needs it.
    from cove.channels.tui import CoveApp

    scripted = os.environ.get(SCRIPTED_ENV)
    factory = scripted_factory(scripted) if scripted else None
    async with Conversations.open(settings, llm_factory=factory) as convs:
        if conversation_id is not None:
            await convs.get(conversation_id)  # an unknown id fails here, before the screen opens
        await CoveApp(convs, conversation_id).run_async()
    return 0
