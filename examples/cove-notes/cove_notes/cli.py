"""``cove notes``: the notebook from the command line (a ``cove.commands`` entry point)."""

from __future__ import annotations

import click

from cove_notes import notes_search


@click.command(help="List the notes in the notebook (those containing TEXT when given).")
@click.argument("text", required=False, default="")
def notes(text: str) -> int:
    """Print the matching notes, one a line; exit 1 when there is none."""
    found = notes_search(text)
    for note in found:
        click.echo(note)
    return 0 if found else 1
