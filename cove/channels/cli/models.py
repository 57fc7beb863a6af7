"""``cove models``: the models the configured endpoint lists."""

from __future__ import annotations

import asyncio
import sys

import click

from cove.channels.cli.base import command, examples, load_settings
from cove.channels.cli.render import console_for, line, print_json
from cove.config import Settings
from cove.conversation.service.health import endpoint_models
from cove.errors import CoveError


@command(
    "models",
    short_help="List the models the endpoint offers.",
    epilog=examples(
        "cove models", "cove models --json", "OPENAI_BASE_URL=http://localhost:11434/v1 cove models"
    ),
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of names.")
def models_command(as_json: bool) -> int:
    """List the models the configured endpoint offers; * marks the configured one."""
    settings = load_settings()
    names = asyncio.run(endpoint_models(settings))
    if as_json:
        print_json(names)
        return 0
    console = console_for(sys.stdout)
    for name in names:
        mark = "*" if name == settings.model.name else " "
        console.print(line(f"{mark} ", (name, "bold" if mark == "*" else "")))
    if settings.model.name not in names:
        print(
            f"cove: the configured model {settings.model.name} is not among them", file=sys.stderr
        )
    return 0


async def listed_models(settings: Settings) -> list[str] | None:
    """The endpoint's models, or None when they cannot be listed (the doctor reports why)."""
    try:
        return await endpoint_models(settings)
    except CoveError:
        return None
