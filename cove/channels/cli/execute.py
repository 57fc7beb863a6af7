"""``cove exec``: run code in a conversation's sandbox, with no model, as a turn of its own.

For scripts and debugging: the block's output on stdout (its value after it, as a Python
prompt shows it), its error output and error on stderr, the exit status from how it ended.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field
from typing import Any, TextIO

import click

from cove.channels.cli.base import command, examples, load_settings, program
from cove.channels.cli.exits import EXIT_CANCELLED, EXIT_FAILED, EXIT_OK, STATUS_EXIT
from cove.channels.cli.render import print_json, write_text
from cove.channels.cli.signals import routed_signals
from cove.channels.figures import SavedFigure, save_figures
from cove.config import Settings
from cove.conversation import Conversations, TurnHandle
from cove.errors import ConfigError
from cove.events import BlockFinished, TurnFinished, TurnStarted, VarsChanged
from cove.results import BlockResult, VarVersion

STDIN = "-"


@dataclass
class _Ran:
    """What the turn gave."""

    conversation_id: str
    position: int | None = None
    block: BlockResult | None = None
    changes: list[VarVersion] = field(default_factory=list)
    finished: TurnFinished | None = None
    saved: list[SavedFigure] = field(default_factory=list)


@command(
    "exec",
    short_help="Run code in a conversation's sandbox, with no model.",
    epilog=examples(
        "cove exec 'x = 6 * 7'                   a new conversation; its id goes to stderr",
        "cove exec 3f2a 'print(x + 1)'           in conversation 3f2a…",
        "cove exec 3f2a - < analysis.py          the code from stdin",
        "cove exec 3f2a 'rows[:3]' --json",
    ),
)
@click.argument("args", nargs=-1, metavar="[ID] CODE")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="Stop the block after this long (clamped to the sandbox's bounds).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
@click.option("-q", "--quiet", is_flag=True, help="Nothing on stderr but the block's and errors.")
def exec_command(args: tuple[str, ...], timeout: float | None, as_json: bool, quiet: bool) -> int:
    """Run CODE in the sandbox of conversation ID (a new one without ID), with no model.

    The block runs as a turn of the conversation (recorded, watchable, forkable and
    replayable like any other); its variables stay for the next turn. CODE "-" (or no
    CODE with stdin piped) reads the code from stdin. The block's output goes to stdout,
    then the value of its last expression; its error output and its error to stderr. Exit
    status 0 when it ran, 1 when it failed, 5 when it was cancelled (Ctrl-C).
    """
    conversation, code = _arguments(args, sys.stdin)
    settings = load_settings()
    return asyncio.run(_exec(settings, conversation, code, timeout, as_json, quiet))


def _arguments(args: tuple[str, ...], stdin: TextIO) -> tuple[str | None, str]:
    """(conversation, code) from ``[ID] CODE``; CODE ``-`` or missing reads stdin."""
    if len(args) > 2:
        raise click.UsageError("at most two arguments: [ID] CODE")
    conversation = args[0] if len(args) == 2 else None
    code = args[-1] if args else STDIN
    if code == STDIN:
        if stdin.isatty():
            raise click.UsageError("CODE is needed (or - with the code on stdin)")
        code = stdin.read()
    if not code.strip():
        raise ConfigError("the code is empty")  # before a database or conversation is made
    return conversation, code


async def _exec(
    settings: Settings,
    conversation: str | None,
    code: str,
    timeout_s: float | None,
    as_json: bool,
    quiet: bool,
) -> int:
    async with Conversations.open(settings) as convs:
        if convs.database_created and not quiet:
            print(f"cove: created a new database at {convs.database_path}", file=sys.stderr)
        if conversation is None:
            cid = (await convs.create(channel="cli")).id
        else:
            cid = (await convs.get(conversation)).id
        handle = convs.execute(cid, code, timeout_s=timeout_s)
        stop = _Stop(handle)
        with routed_signals(stop.now, stop.now):
            ran = await _follow(handle, cid)
        if ran.block is not None and ran.position is not None:
            ref = (ran.position, 1, 1)
            ran.saved = await save_figures(convs, cid, [(ref, f) for f in ran.block.figures])
    return _report(ran, stop.asked, as_json, quiet)


class _Stop:
    """Ctrl-C or SIGTERM: cancel the turn (its block is killed); it ends ``cancelled``."""

    def __init__(self, handle: TurnHandle) -> None:
        self.handle = handle
        self.asked = False

    def now(self) -> None:
        if not self.asked:
            self.asked = True
            asyncio.get_running_loop().create_task(self.handle.cancel())


async def _follow(handle: TurnHandle, cid: str) -> _Ran:
    ran = _Ran(cid)
    async for event in handle:
        if isinstance(event, TurnStarted):
            ran.position = event.position
        elif isinstance(event, BlockFinished):
            ran.block = event.block
        elif isinstance(event, VarsChanged):
            ran.changes.extend(event.changes)
        elif isinstance(event, TurnFinished):
            ran.finished = event
    return ran


def _report(ran: _Ran, stopped: bool, as_json: bool, quiet: bool) -> int:
    end = ran.finished
    if end is None:
        return EXIT_CANCELLED if stopped else EXIT_FAILED
    block = ran.block
    if as_json:
        print_json(_json(ran, end, block))
    elif block is not None:
        write_text(block.stdout)
        if block.result_preview is not None and block.ok:
            write_text(block.result_preview + "\n")
        if block.stderr:
            write_text(block.stderr, sys.stderr)
    if not as_json and end.status != "done":
        print(f"cove: {end.status}: {end.error or 'the block did not run'}", file=sys.stderr)
    if not quiet:
        for saved in ran.saved:
            print(saved.line(), file=sys.stderr)
        cid = ran.conversation_id
        print(
            f"conversation {cid} turn {ran.position} · continue with: "
            f"{program()} exec {cid[:12]} '…'",
            file=sys.stderr,
        )
    return EXIT_OK if end.status == "done" else STATUS_EXIT.get(end.status, EXIT_FAILED)


def _json(ran: _Ran, end: TurnFinished, block: BlockResult | None) -> dict[str, Any]:
    latest = {v.name: v for v in ran.changes}
    return {
        "conversation_id": ran.conversation_id,
        "turn": ran.position,
        "status": end.status,
        "ok": end.status == "done",
        "stdout": block.stdout if block else "",
        "stderr": block.stderr if block else "",
        "value": block.result_preview if block and block.ok else None,
        "error": end.error,
        "variables": [
            {"name": v.name, "version": v.version, "type": v.type_name, "preview": v.preview}
            for v in latest.values()
        ],
        "figures": [saved.to_json() for saved in ran.saved],
    }
