"""``cove policy``: a conversation's approval policy, shown or changed."""

from __future__ import annotations

import asyncio
import sys

import click

from cove.channels.cli.base import command, examples, load_settings
from cove.channels.cli.exits import EXIT_OK
from cove.channels.cli.render import console_for, line, print_json
from cove.conversation import ConversationPolicy, Conversations

#: Where a function's rule comes from, as ``cove policy`` says it.
_FROM = {"own": "this conversation", "settings": "the settings", "default": "the default"}


@command(
    "policy",
    short_help="Show or change a conversation's approval policy.",
    epilog=examples(
        "cove policy 3f2a                    what each function's calls get, and why",
        "cove policy 3f2a notes_add allow    run notes_add without asking, from the next turn",
        "cove policy 3f2a write deny         refuse every call that writes",
        "cove policy 3f2a --json",
    ),
)
@click.argument("conversation_id", metavar="ID")
@click.argument("key", required=False, metavar="[NAME")
@click.argument(
    "rule", required=False, type=click.Choice(["allow", "ask", "deny"]), metavar="allow|ask|deny]"
)
@click.option("--json", "as_json", is_flag=True, help="Print the policy as one JSON object.")
def policy_command(conversation_id: str, key: str | None, rule: str | None, as_json: bool) -> int:
    """Show what a conversation's approval policy does with each function its sandbox can
    call (allow, ask or deny, and which entry says so), or set one of its own entries: NAME is
    a function, an extension or an effect (write, network, spend, …). The conversation's own
    entries win over the settings' ([extensions] policy); a turn running now keeps the rule it
    started with."""
    if key is not None and rule is None:
        raise click.UsageError("give the rule too: cove policy ID NAME allow|ask|deny")
    return asyncio.run(_policy(conversation_id, key, rule, as_json))


async def _policy(conversation_id: str, key: str | None, rule: str | None, as_json: bool) -> int:
    async with await Conversations.open(load_settings()) as convs:
        record = await convs.get(conversation_id)
        if key is not None and rule is not None:
            policy = await convs.set_policy(record.id, key, rule)
        else:
            policy = await convs.policy(record.id)
    if as_json:
        print_json(_as_json(record.id, policy))
    else:
        _print(record.id, policy, changed=key)
    return EXIT_OK


def _source(policy: ConversationPolicy, entry: str) -> str:
    if entry == "default":
        return "default"
    return "own" if entry in policy.own else "settings"


def _as_json(conversation_id: str, policy: ConversationPolicy) -> dict[str, object]:
    return {
        "conversation_id": conversation_id,
        "own": dict(policy.own),
        "settings": dict(policy.settings),
        "functions": [
            {
                "name": r.function,
                "extension": r.extension,
                "effect": r.effect,
                "policy": r.rule,
                "entry": r.entry,
                "from": _source(policy, r.entry),
            }
            for r in policy.rules
        ],
    }


def _print(conversation_id: str, policy: ConversationPolicy, *, changed: str | None) -> None:
    console = console_for(sys.stdout)
    if changed is not None:
        console.print(line(("set ", "green"), f"{changed} = {policy.own[changed]}"), markup=False)
    console.print(line(("conversation ", "bold"), conversation_id))
    own = ", ".join(f"{k}={v}" for k, v in sorted(policy.own.items())) or "none"
    settings = ", ".join(f"{k}={v}" for k, v in sorted(policy.settings.items())) or "none"
    console.print(f"  its own entries: {own}", markup=False, highlight=False)
    console.print(f"  the settings' entries: {settings}", markup=False, highlight=False)
    for r in policy.rules:
        why = _FROM[_source(policy, r.entry)]
        said = why if r.entry == "default" else f"{why} ({r.entry})"
        console.print(
            f"    {r.function}  [{r.extension}: {r.effect}] {r.rule} · by {said}",
            markup=False,
            highlight=False,
        )
