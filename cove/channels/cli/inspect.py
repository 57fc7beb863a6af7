"""Inspection commands: ``list``, ``show``, ``vars``, ``search``, ``export``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rich.console import Console
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from cove.channels.cli.app import run_async
from cove.channels.cli.common import add_common, positive_int, program, when
from cove.channels.cli.export import to_markdown
from cove.channels.cli.render import console_for, cut, line, print_json
from cove.config import Settings
from cove.conversation import Conversations
from cove.events import jsonable


def register(sub: Any) -> None:
    """Add the inspection commands."""
    p = sub.add_parser("list", help="list conversations, newest first")
    add_common(p)
    p.add_argument("--channel", help="only this channel (cli, web, tui, telegram)")
    p.add_argument("--limit", type=positive_int, default=50)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=lambda a, s: run_async(_list(a, s)))

    p = sub.add_parser("show", help="show a conversation: turns, iterations, code, results")
    add_common(p)
    p.add_argument("id", help="conversation id or unique prefix")
    p.add_argument("--turn", type=positive_int, metavar="N", help="only turn N")
    p.add_argument("--json", action="store_true")
    p.add_argument("--prompts", action="store_true", help="also print each exact prompt")
    p.set_defaults(handler=lambda a, s: run_async(_show(a, s)))

    p = sub.add_parser("vars", help="current variables, or every version of one variable")
    add_common(p)
    p.add_argument("id")
    p.add_argument("name", nargs="?")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=lambda a, s: run_async(_vars(a, s)))

    p = sub.add_parser("search", help="full-text search over requests, answers and code")
    add_common(p)
    p.add_argument("text")
    p.add_argument("-c", "--conversation", metavar="ID")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=lambda a, s: run_async(_search(a, s)))

    p = sub.add_parser("export", help="export a conversation as markdown or JSON")
    add_common(p)
    p.add_argument("id")
    p.add_argument("--format", choices=("md", "json"), default="md")
    p.set_defaults(handler=lambda a, s: run_async(_export(a, s)))


async def _list(args: argparse.Namespace, settings: Settings) -> int:
    async with await Conversations.open(settings, read_only=True) as convs:
        records = await convs.list(channel=args.channel, limit=args.limit)
    if args.json:
        print_json(jsonable(records))
        return 0
    console = console_for(sys.stdout)
    if not records:
        console.print(
            Text(f'no conversations yet — try `{program()} run "…"` or `{program()} demo`')
        )
        return 0
    table = Table("id", "title", "channel", "turns", "updated", "forked from")
    for r in records:
        fork = f"{r.parent_id[:12]} @ turn {r.fork_turn}" if r.parent_id else ""
        table.add_row(
            r.id[:12],
            Text(r.title or "(untitled)"),
            r.channel,
            str(r.turn_count),
            when(r.updated_at),
            fork,
        )
    console.print(table)
    return 0


async def _show(args: argparse.Namespace, settings: Settings) -> int:
    async with await Conversations.open(settings, read_only=True) as convs:
        transcript = await convs.inspect(args.id, turn=args.turn)
        digests = {it.system_prompt_hash for t in transcript.turns for it in t.iterations}
        prompts = {d: await convs.system_prompt(d) for d in digests} if args.prompts else {}
    if args.json:
        print_json(jsonable(transcript))
        return 0
    console = console_for(sys.stdout)
    conv = transcript.conversation
    console.print(
        line(
            (conv.title or "(untitled)", "bold"),
            f"  {conv.id}  ",
            (f"{conv.channel}, created {when(conv.created_at)}", "dim"),
        )
    )
    if conv.parent_id:
        console.print(line((f"forked from {conv.parent_id} at turn {conv.fork_turn}", "dim")))
    for digest, text in prompts.items():
        console.rule(f"system prompt {digest[:12]}")
        console.print(text, markup=False)
    for turn in transcript.turns:
        versions = [v for v in transcript.var_versions if v.turn_position == turn.position]
        priced = turn.model is not None and settings.model.price_of(turn.model) is not None
        _show_turn(console, turn, versions, args.prompts, priced)
    if not transcript.turns:
        console.print("[dim]no turns yet[/dim]")
    return 0


def _show_turn(
    console: Console, turn: Any, versions: list[Any], prompts: bool, priced: bool
) -> None:
    console.rule(f"turn {turn.position} · {turn.status}")
    console.print(line(("request: ", "bold"), cut(turn.request, 2000)))
    for it in turn.iterations:
        console.print(
            f"[cyan]iteration {it.position + 1}[/cyan] [dim]{it.status} · "
            f"{it.tokens_in}+{it.tokens_out} tokens · model {it.llm_ms:.0f} ms · "
            f"seed {it.seed}[/dim]"
        )
        for note in it.steering:
            console.print(line(("you, while it ran: ", "yellow"), cut(note, 2000)))
        if prompts:
            console.print(
                line((f"system prompt {it.system_prompt_hash[:12]}; request message:", "dim"))
            )
            console.print(it.request_message, markup=False)
            console.print(line(("context message:", "dim")))
            console.print(it.context_message, markup=False)
        if it.parse_error:
            console.print(line(("reply problem: ", "red"), cut(it.parse_error)))
        if it.thinking:
            console.print(line((cut(it.thinking, 1000), "dim italic")))
        for block in it.blocks:
            console.print(Syntax(block.code, "python", theme="ansi_dark"))
            if block.stdout:
                console.print(cut(block.stdout.rstrip()), markup=False)
            if block.ok:
                if block.result_preview is not None:
                    console.print(f"→ {cut(block.result_preview)}", markup=False)
            else:
                console.print(line(("✗ " + cut(block.error or "failed"), "red")))
        if it.running_block is not None:
            console.print(
                line(
                    (
                        f"block {it.running_block + 1} of {len(it.planned_blocks)} was running "
                        "when the turn stopped:",
                        "yellow",
                    )
                )
            )
            console.print(Syntax(it.planned_blocks[it.running_block], "python", theme="ansi_dark"))
        for sq in it.subqueries:
            answer = cut(sq.reply or sq.error or "", 200)
            console.print(line((f"llm_query: {cut(sq.prompt, 200)} → {answer}", "dim")))
    if versions:
        written = ", ".join(
            f"{v.name} v{v.version} ({v.kind if v.kind != 'value' else v.type_name})"
            for v in versions
        )
        console.print(line(("variables written: ", "magenta"), written))
    if turn.answer:
        console.print(line(("answer: ", "bold green"), turn.answer))
    if turn.error:
        console.print(line((f"error: {turn.error}", "red")))
    cost = f"${turn.cost_usd:.4f}" if priced else "cost unknown (model not in the price table)"
    console.print(
        line(
            (
                f"{turn.tokens_in:,} in + {turn.tokens_out:,} out tokens · {cost} · "
                f"model {turn.model}",
                "dim",
            )
        )
    )


async def _vars(args: argparse.Namespace, settings: Settings) -> int:
    async with await Conversations.open(settings, read_only=True) as convs:
        if args.name:
            rows = await convs.var_history(args.id, args.name)
        else:
            rows = sorted((await convs.variables(args.id)).values(), key=lambda v: v.name)
    if args.json:
        print_json(jsonable(rows))
        return 0
    console = console_for(sys.stdout)
    table = Table("name", "version", "kind", "type", "size", "turn", "preview")
    for v in rows:
        table.add_row(
            v.name,
            str(v.version),
            v.kind,
            v.type_name,
            "" if v.size is None else str(v.size),
            str(v.turn_position),
            Text(cut(v.preview, 80)),
        )
    console.print(table if rows else "no variables")
    return 0


async def _search(args: argparse.Namespace, settings: Settings) -> int:
    async with await Conversations.open(settings, read_only=True) as convs:
        hits = await convs.search(args.text, conversation_id=args.conversation)
    if args.json:
        print_json(jsonable(hits))
        return 0
    console = console_for(sys.stdout)
    table = Table("conversation", "turn", "kind", "match")
    for h in hits:
        table.add_row(h.conversation_id[:12], str(h.turn_position or ""), h.kind, Text(h.snippet))
    console.print(table if hits else Text(f"nothing matches {args.text!r}"))
    return 0


async def _export(args: argparse.Namespace, settings: Settings) -> int:
    async with await Conversations.open(settings, read_only=True) as convs:
        transcript = await convs.inspect(args.id)
    if args.format == "json":
        print_json(jsonable(transcript))
    else:
        sys.stdout.write(to_markdown(transcript))
    return 0
