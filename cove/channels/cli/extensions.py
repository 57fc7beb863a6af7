"""``cove extensions``: what sandbox code can call, where it comes from, what it may do."""

from __future__ import annotations

import sys

import click

from cove.channels.cli.base import command, examples, load_settings
from cove.channels.cli.exits import EXIT_FAILED, EXIT_OK
from cove.channels.cli.render import console_for, line, print_json
from cove.conversation import Catalog, FunctionRule, installed


@command(
    "extensions",
    short_help="List the installed extensions, their source and effects.",
    epilog=examples(
        "cove extensions",
        "cove extensions --json | jq '.extensions[].name'",
        "COVE_EXTENSION_POLICY=write=deny cove extensions   how a policy treats each call",
    ),
)
@click.option("--json", "as_json", is_flag=True, help="Print the list as one JSON object.")
def extensions_command(as_json: bool) -> int:
    """List the extensions new conversations can use: cove's own and those installed packages
    add (entry-point group cove.extensions), where each comes from, what each function does
    (its effect) and what the approval policy does with its calls (allow, ask or deny).
    Plugins that could not be loaded are listed with the reason (exit 1)."""
    settings = load_settings()
    catalog, rules = installed(settings)
    if as_json:
        print_json(_as_json(catalog, rules))
    else:
        _print(catalog, rules)
    return EXIT_FAILED if catalog.problems else EXIT_OK


def _as_json(catalog: Catalog, rules: list[FunctionRule]) -> dict[str, object]:
    return {
        "extensions": [
            {
                "name": item.name,
                "source": item.source,
                "builtin": item.builtin,
                "effects": list(item.effects),
                "functions": [
                    {"name": r.function, "effect": r.effect, "policy": r.rule}
                    for r in rules
                    if r.extension == item.name
                ],
            }
            for item in catalog.installed
        ],
        "problems": [
            {"name": p.name, "source": p.source, "error": p.message} for p in catalog.problems
        ],
    }


def _print(catalog: Catalog, rules: list[FunctionRule]) -> None:
    console = console_for(sys.stdout)
    for item in catalog.installed:
        console.print(line((item.name, "bold"), f"  {item.source}"))
        for rule in (r for r in rules if r.extension == item.name):
            console.print(f"    {rule.function}  effect {rule.effect} · {rule.rule}", markup=False)
    for problem in catalog.problems:
        console.print(line(("FAILED ", "red"), f"{problem.name}  {problem.source}"))
        console.print(f"    {problem.message}", markup=False, highlight=False)
