"""Reading commands: ``list``, ``show``, ``vars``, ``search``, ``export``.

Human output draws tables and colour only on a terminal; piped, tables are tab-separated lines
(header first). ``--json`` is the format for scripts (see ``json_out`` for its numbering).
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from pathlib import Path

import click
from rich.text import Text

from cove.channels.cli.base import command, examples, load_settings, program
from cove.channels.cli.json_out import search_json, transcript_json, versions_json
from cove.channels.cli.render import console_for, cut, line, print_json, print_table, write_text
from cove.channels.cli.render import markdown as as_markdown
from cove.channels.cli.transcript_view import FigureFiles, show_transcript
from cove.channels.export import FigureLinks, approvals_json, to_markdown, when
from cove.channels.figures import export_folder, figures_in, save_figures, write_export
from cove.config import Settings
from cove.conversation import HistoryFigures, Reading, SearchHit, Transcript, open_reading
from cove.events import jsonable, outcome

MATCH_OPEN, MATCH_CLOSE = "«", "»"  # match markers when piped: brackets are common in code


@command(
    "list",
    short_help="List conversations, newest first.",
    epilog=examples(
        "cove list", "cove list --channel web --limit 10", "cove list --json | jq '.[0].id'"
    ),
)
@click.option("--channel", help="Only this channel (cli, web, tui, telegram, demo).")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_command(channel: str | None, limit: int, as_json: bool) -> int:
    """List conversations, newest first."""
    return asyncio.run(_list(load_settings(), channel, limit, as_json))


async def _list(settings: Settings, channel: str | None, limit: int, as_json: bool) -> int:
    async with open_reading(settings) as convs:
        records = await convs.list(channel=channel, limit=limit)
    if as_json:
        print_json([{**jsonable(r), "label": r.label} for r in records])
        return 0
    console = console_for(sys.stdout)
    if not records:
        console.print(
            Text(f'no conversations yet — try `{program()} run "…"` or `{program()} demo`')
        )
        return 0
    rows = [
        (
            r.id[:12],
            cut(r.label),
            status_cell(r.last_status, console.is_terminal),
            r.channel,
            str(r.turn_count),
            when(r.updated_at),
            f"{r.parent_id[:12]} @ turn {r.fork_turn}" if r.parent_id else "",
        )
        for r in records
    ]
    headers = ("id", "title", "status", "channel", "turns", "updated", "forked from")
    print_table(console, headers, rows)
    return 0


#: How each kind of ending is coloured on a terminal.
_OUTCOME_STYLES = {
    "running": "green",
    "done": "",
    "failed": "red",
    "cancelled": "yellow",
    "interrupted": "red",
}


def status_cell(status: str | None, terminal: bool) -> str | Text:
    """How the last turn ended (its status as recorded), coloured by kind on a terminal."""
    if status is None:
        return "-"
    kind = outcome(status)
    return Text(status, style=_OUTCOME_STYLES.get(kind or "", "")) if terminal else status


@command(
    "show",
    short_help="Show a conversation: turns, iterations, code, results.",
    epilog=examples(
        "cove show 3f2a                every turn, iteration, block and result",
        "cove show 3f2a --turn 2       only turn 2",
        "cove show 3f2a --prompts      also the exact prompts sent to the model",
        "cove show 3f2a --format md    the Markdown of `cove export`",
        "cove show 3f2a --json | jq '.turns[0].iterations[0].blocks[0].code'",
    ),
)
@click.argument("conversation_id", metavar="ID")
@click.option("--turn", type=click.IntRange(min=1), metavar="N", help="Only turn N.")
@click.option("--prompts", is_flag=True, help="Also print each exact prompt.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "md"]),
    default="text",
    show_default=True,
    help="text: for reading; md: the Markdown of `cove export`.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print JSON (turns, iterations, blocks from 1)."
)
def show_command(
    conversation_id: str, turn: int | None, prompts: bool, fmt: str, as_json: bool
) -> int:
    """Show a conversation: turns, iterations, code, results, variables written.

    ID is a conversation id or a unique prefix of one.
    """
    return asyncio.run(_show(load_settings(), conversation_id, turn, prompts, fmt, as_json))


async def _show(
    settings: Settings,
    conversation_id: str,
    turn: int | None,
    prompts: bool,
    fmt: str,
    as_json: bool,
) -> int:
    async with open_reading(settings) as convs:
        transcript = await convs.inspect(conversation_id, turn=turn)
        digests = {it.system_prompt_hash for t in transcript.turns for it in t.iterations}
        texts = {d: await convs.system_prompt(d) for d in digests} if prompts else None
        files = {} if as_json else await _figure_files(convs, transcript)
        figures = await convs.history(transcript.conversation.id)
        approvals = await convs.approvals(transcript.conversation.id, turn)
    console = console_for(sys.stdout)
    if as_json:
        print_json(
            {
                **transcript_json(transcript),
                "values": dataclasses.asdict(figures),
                "approvals": approvals_json(approvals),
            }
        )
    elif fmt == "md":
        links = FigureLinks(lambda ref, f: str(files[ref, f.position])) if files else None
        markdown = to_markdown(transcript, links)
        if console.is_terminal:
            console.print(as_markdown(markdown))
        else:
            write_text(markdown)
    else:
        show_transcript(console, transcript, texts, files, approvals)
        console.print(history_line(figures), markup=False, highlight=False)
    return 0


async def _figure_files(convs: Reading, transcript: Transcript) -> FigureFiles:
    """Write the transcript's figures where ``cove run`` does; their paths (none when the
    folder cannot be written: the text then names each figure by its digest)."""
    found = figures_in(transcript)
    try:
        saved = await save_figures(convs, transcript.conversation.id, found)
    except OSError as exc:
        print(f"cove: figures not written to files ({exc})", file=sys.stderr)
        return {}
    return {((s.turn, s.iteration, s.block), s.figure.position): s.path for s in saved}


def history_line(figures: HistoryFigures) -> str:
    """``values: live 1.2 MB, history 3.4 MB of a 1,024.0 MB budget (57 versions, 3 thinned)``."""
    return (
        f"values: live {_megabytes(figures.live_bytes)}, history "
        f"{_megabytes(figures.history_bytes)} of a {_megabytes(figures.budget_bytes)} budget "
        f"({figures.versions:,} versions, {figures.thinned:,} thinned)"
    )


def _megabytes(size: int) -> str:
    """MB as the settings count them (``history_budget_mb``: 1 MB = 1,048,576 bytes)."""
    return f"{size / MB:,.1f} MB" if size >= MB // 10 else f"{size / 1024:,.1f} kB"


MB = 1024 * 1024


@command(
    "vars",
    short_help="Current variables, or every version of one variable.",
    epilog=examples("cove vars 3f2a", "cove vars 3f2a primes     every version of primes"),
)
@click.argument("conversation_id", metavar="ID")
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def vars_command(conversation_id: str, name: str | None, as_json: bool) -> int:
    """The current variables of a conversation, or every version of the variable NAME."""
    return asyncio.run(_vars(load_settings(), conversation_id, name, as_json))


async def _vars(settings: Settings, conversation_id: str, name: str | None, as_json: bool) -> int:
    async with open_reading(settings) as convs:
        if name:
            rows = await convs.var_history(conversation_id, name)
        else:
            rows = sorted((await convs.variables(conversation_id)).values(), key=lambda v: v.name)
    if as_json:
        print_json(versions_json(rows))
        return 0
    console = console_for(sys.stdout)
    if not rows:
        console.print("no variables")
        return 0
    table = [
        (
            v.name,
            str(v.version),
            v.kind,
            v.type_name,
            "" if v.size is None else str(v.size),
            str(v.turn_position),
            cut(v.preview, 80),
        )
        for v in rows
    ]
    print_table(console, ("name", "version", "kind", "type", "size", "turn", "preview"), table)
    return 0


@command(
    "search",
    short_help="Full-text search over requests, answers and code.",
    epilog=examples(
        "cove search fibonacci",
        'cove search "import pandas" -c 3f2a',
        "cove search primes --json | jq '.[] | .matches'",
    ),
)
@click.argument("text")
@click.option("-c", "--conversation", metavar="ID", help="Only in this conversation.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: plain text with match offsets.")
def search_command(text: str, conversation: str | None, as_json: bool) -> int:
    """Full-text search over requests, answers and code.

    Matches are highlighted in colour on a terminal and between « and » when piped.
    """
    return asyncio.run(_search(load_settings(), text, conversation, as_json))


async def _search(settings: Settings, text: str, conversation: str | None, as_json: bool) -> int:
    async with open_reading(settings) as convs:
        hits = await convs.search(text, conversation_id=conversation)
    if as_json:
        print_json(search_json(hits))
        return 0
    console = console_for(sys.stdout)
    if not hits:
        console.print(Text(f"nothing matches {text!r}"))
        return 0
    rows = [
        (
            h.conversation_id[:12],
            cut(h.label),
            str(h.turn_position or ""),
            h.kind,
            _highlighted(h, console.is_terminal),
        )
        for h in hits
    ]
    print_table(console, ("conversation", "title", "turn", "kind", "match"), rows)
    return 0


def _highlighted(hit: SearchHit, terminal: bool) -> str | Text:
    if terminal:  # the pieces cleaned one by one: the match offsets are into the raw text
        pieces: list[str | tuple[str, str]] = []
        last = 0
        for start, end in hit.matches:
            pieces += [hit.text[last:start], (hit.text[start:end], "bold yellow reverse")]
            last = end
        return line(*pieces, hit.text[last:])
    out, last = [], 0
    for start, end in hit.matches:
        out += [hit.text[last:start], MATCH_OPEN, hit.text[start:end], MATCH_CLOSE]
        last = end
    out.append(hit.text[last:])
    return "".join(out)


@command(
    "export",
    short_help="Export a conversation as Markdown or JSON.",
    epilog=examples(
        "cove export 3f2a > notes.md",
        "cove export 3f2a --format json > 3f2a.json",
        "cove export 3f2a -o notes.md   also the figures, in notes.figures/",
    ),
)
@click.argument("conversation_id", metavar="ID")
@click.option("--format", "fmt", type=click.Choice(["md", "json"]), default="md", show_default=True)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the document to this file and the figures into a folder beside it "
    "(notes.md: notes.figures/), shown in the Markdown as images.",
)
def export_command(conversation_id: str, fmt: str, output: Path | None) -> int:
    """Export a conversation as Markdown or JSON (the JSON of `cove show --json`).

    Control characters in the conversation (escape sequences from the model or the sandbox)
    are written visibly in the Markdown (␛ for ESC, \\x9b for a C1 control) and escaped in
    the JSON, so neither acts on a terminal that shows it. Printed, the document describes each
    figure with its digest; with --output the figures are files beside it.
    """
    return asyncio.run(_export(load_settings(), conversation_id, fmt, output))


async def _export(settings: Settings, conversation_id: str, fmt: str, output: Path | None) -> int:
    async with open_reading(settings) as convs:
        transcript = await convs.inspect(conversation_id)
        if output is not None:
            saved = await write_export(convs, transcript, output, fmt)
            folder = f" and {len(saved)} figures in {export_folder(output)}" if saved else ""
            print(f"cove: wrote {output}{folder}", file=sys.stderr)
            return 0
        figures = await convs.history(transcript.conversation.id)
        approvals = await convs.approvals(transcript.conversation.id)
    if fmt == "json":
        values = dataclasses.asdict(figures)
        print_json(
            {
                **transcript_json(transcript),
                "values": values,
                "approvals": approvals_json(approvals),
            }
        )
    else:
        write_text(to_markdown(transcript))
    return 0
