"""``cove run``: one request, the answer on stdout, everything else on stderr."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import click

from cove.channels.cli.approvals import first, run_approver
from cove.channels.cli.base import chosen_model, command, conversation_settings, examples, program
from cove.channels.cli.exits import EXIT_CANCELLED, EXIT_FAILED, STATUS_EXIT
from cove.channels.cli.json_out import EventNumbering
from cove.channels.cli.options import ModelOptions, model_options
from cove.channels.cli.render import (
    RunProgress,
    console_for,
    print_json,
    print_json_line,
    write_text,
)
from cove.channels.cli.signals import routed_signals
from cove.channels.figures import SavedFigure, save_figures
from cove.config import Settings
from cove.conversation import Approver, Conversations
from cove.errors import ConfigError
from cove.events import BlockFinished, Event, TurnFinished, TurnStarted
from cove.results import BlockFigure

LATEST = ""  # ``-c`` given without an id: the most recent conversation
STDIN_ATTACHMENT = "stdin.txt"


@dataclass
class Request:
    """What ``cove run`` was asked: the text, files, and where to send it."""

    text: str
    attachments: list[tuple[str, bytes]]
    conversation: str | None  # an id or prefix, LATEST, or None for a new conversation
    options: ModelOptions
    approver: Approver | None = None  # answers approval requests (None: they are denied)
    system: str | None = None  # the conversation's instructions from this turn on ("" clears)
    model: str | None = None  # the conversation's model from this turn on


@command(
    "run",
    short_help="Ask one question; print the answer.",
    epilog=examples(
        'cove run "What is the 20th Fibonacci number?"',
        'cove run -c "and the 30th?"             continue the most recent conversation',
        'cove run -c 3f2a "plot it"              continue conversation 3f2a…',
        'cat notes.txt | cove run "summarise this"  stdin becomes an attached file',
        "cove run - < request.txt                the whole request from stdin",
        'cove run -o temperature=0 "…"           a model option, recorded with the turn',
        'cove run --system "Answer in French." "…"  instructions for the conversation',
        'cove run -c -m gpt-4.1 "…"               the conversation goes on with another model',
        'cove run --json "…" | jq .answer',
    ),
)
@click.argument("question", required=False)
@click.option(
    "-c",
    "--continue",
    "continue_",
    is_flag=False,
    flag_value=LATEST,
    default=None,
    metavar="[ID]",
    help="Continue the most recent conversation, or the one with this id (or prefix).",
)
@click.option("--cid", metavar="ID", help="Continue the conversation with this id (or prefix).")
@click.option(
    "--attach",
    multiple=True,
    metavar="FILE",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Copy a file into the conversation's workspace (repeatable).",
)
@model_options
@click.option(
    "--system",
    metavar="TEXT",
    help="The conversation's instructions (a persona, house rules, a task), kept with it from "
    'this turn on; with -c they replace the current ones ("" clears them).',
)
@click.option("--max-iterations", type=click.IntRange(min=1), metavar="N")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
@click.option("--events", is_flag=True, help="Stream the turn's events as JSON lines.")
@click.option("-q", "--quiet", is_flag=True, help="Nothing on stderr but errors.")
@click.option(
    "--approve-all",
    is_flag=True,
    help="Approve every extension call the policy asks about (recorded as such).",
)
@click.option(
    "--reject-all",
    is_flag=True,
    help="Deny every extension call the policy asks about (the model is told why).",
)
def run_command(
    question: str | None,
    continue_: str | None,
    cid: str | None,
    attach: tuple[Path, ...],
    options: ModelOptions,
    system: str | None,
    max_iterations: int | None,
    as_json: bool,
    events: bool,
    quiet: bool,
    approve_all: bool,
    reject_all: bool,
) -> int:
    """Ask one question; print the answer on stdout.

    The conversation id and how to continue go to stderr, so a pipe gets only the answer,
    byte for byte as the model gave it (values filled in); on a terminal, control characters
    in it (escape sequences) are shown as symbols such as ␛ instead of acted on.
    Text piped on stdin is attached to the request as the file stdin.txt; with QUESTION
    "-" stdin is the request itself. While the turn runs, a progress line shows on stderr
    when stderr is a terminal. Ctrl-C cancels the turn (exit 5); Ctrl-C again quits at once.
    An extension call the approval policy asks about is asked on the terminal; off a
    terminal, without --approve-all, it is denied.
    --system and -m/--model are remembered with the conversation: its later turns run with
    them.
    """
    if approve_all and reject_all:
        raise click.UsageError("--approve-all and --reject-all exclude each other")
    request = _request(question, continue_, cid, attach, options, sys.stdin.buffer)
    request.system, request.model = system, chosen_model()
    request.approver = run_approver(approve_all, reject_all, console_for(sys.stderr))
    settings = conversation_settings(max_iterations=max_iterations)
    return asyncio.run(_run(settings, request, as_json=as_json, events=events, quiet=quiet))


def _request(
    question: str | None,
    continue_: str | None,
    cid: str | None,
    attach: tuple[Path, ...],
    options: ModelOptions,
    stdin: BinaryIO,
) -> Request:
    if question is None and continue_ not in (None, LATEST):
        question, continue_ = continue_, LATEST  # ``-c "text"``: the text is the question
    if question is None:
        raise click.UsageError("a QUESTION is needed (or - to read the request from stdin)")
    attachments = [_read_attachment(path) for path in attach]
    if question == "-":
        question = stdin.read().decode("utf-8", errors="replace")
    elif not stdin.isatty():
        piped = stdin.read()
        if piped:
            attachments.append((STDIN_ATTACHMENT, piped))
    if not question.strip():
        raise ConfigError("the request is empty")  # before a database or conversation is made
    return Request(question, attachments, cid or continue_, options)


def _read_attachment(path: Path) -> tuple[str, bytes]:
    try:
        return path.name, path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read attachment {path}: {exc.strerror}") from exc


class _Interrupts:
    """Ctrl-C and SIGTERM during a run: the first cancels the turn, a second Ctrl-C quits."""

    def __init__(self, convs: Conversations) -> None:
        self.convs = convs
        self.conversation_id: str | None = None  # set once the turn has started
        self.terminated = False
        self.presses = 0

    def on_sigint(self) -> None:
        self.presses += 1
        if self.presses > 1:
            raise KeyboardInterrupt
        print("cancelling the turn… (Ctrl-C again to quit at once)", file=sys.stderr)
        self._cancel()

    def on_sigterm(self) -> None:
        self.terminated = True
        self._cancel()

    def _cancel(self) -> None:
        if self.conversation_id is not None:
            asyncio.get_running_loop().create_task(self.convs.cancel(self.conversation_id))


async def _conversation(convs: Conversations, request: Request) -> str:
    """The conversation the request goes to, with its instructions and model as asked."""
    wanted = request.conversation
    if wanted is None:
        created = await convs.create(
            channel="cli", instructions=request.system, model=request.model
        )
        return created.id
    if wanted == LATEST:
        latest = await convs.list(limit=1)
        if not latest:
            raise ConfigError("there is no conversation to continue yet: run without -c")
        conversation_id = latest[0].id
    else:
        conversation_id = (await convs.get(wanted)).id
    if request.system is not None:
        await convs.set_profile(conversation_id, instructions=request.system)
    if request.model is not None:
        await convs.set_profile(conversation_id, model=request.model)
    return conversation_id


async def _run(
    settings: Settings, request: Request, *, as_json: bool, events: bool, quiet: bool
) -> int:
    async with await Conversations.open(settings) as convs:
        if convs.database_created and not quiet:
            print(f"cove: created a new database at {convs.database_path}", file=sys.stderr)
        convs.check_model()
        interrupts = _Interrupts(convs)
        with routed_signals(interrupts.on_sigint, interrupts.on_sigterm):
            conversation_id = await _conversation(convs, request)
            if interrupts.terminated:
                return EXIT_CANCELLED
            interrupts.conversation_id = conversation_id
            show = None if events or quiet else _progress()
            seen = await _stream(convs, conversation_id, request, show, events)
            seen.saved = await save_figures(convs, conversation_id, seen.figures)
    return _report(conversation_id, seen, interrupts.terminated, as_json, events, quiet)


def _progress() -> RunProgress | None:
    stderr = console_for(sys.stderr)
    return RunProgress(stderr) if stderr.is_terminal else None


@dataclass
class _Seen:
    position: int | None = None
    finished: TurnFinished | None = None
    figures: list[tuple[tuple[int, int, int], BlockFigure]] = field(default_factory=list)
    saved: list[SavedFigure] = field(default_factory=list)


async def _stream(
    convs: Conversations,
    conversation_id: str,
    request: Request,
    progress: RunProgress | None,
    events: bool,
) -> _Seen:
    seen = _Seen()
    numbering = EventNumbering()
    approver = request.approver
    if approver is not None and progress is not None:
        approver = first(progress.close, approver)
    handle = convs.send(
        conversation_id,
        request.text,
        request.attachments,
        model_options=request.options,
        approver=approver,
    )
    try:
        async for event in handle:
            _note(seen, event)
            if events:
                print_json_line(numbering.shape(event))
            elif progress is not None:
                progress.handle(event)
    finally:
        if progress is not None:
            progress.close()
    return seen


def _note(seen: _Seen, event: Event) -> None:
    if isinstance(event, TurnStarted):
        seen.position = event.position
    elif isinstance(event, TurnFinished):
        seen.finished = event
    elif isinstance(event, BlockFinished):
        ref = (seen.position or 0, event.iteration, event.index)
        seen.figures += [(ref, figure) for figure in event.block.figures]


def _report(
    conversation_id: str, seen: _Seen, terminated: bool, as_json: bool, events: bool, quiet: bool
) -> int:
    finished = seen.finished
    if finished is None:
        return EXIT_CANCELLED if terminated else EXIT_FAILED
    figures = [saved.to_json() for saved in seen.saved]
    if as_json:
        data = {k: v for k, v in finished.to_json().items() if k != "turn_id"}
        print_json(
            {**data, "conversation_id": conversation_id, "turn": seen.position, "figures": figures}
        )
    elif events:
        for figure in figures:
            print_json_line({"type": "figure_saved", "conversation_id": conversation_id, **figure})
    elif finished.answer:
        write_text(finished.answer + "\n")
    if not quiet and not as_json and not events:
        for saved in seen.saved:
            print(saved.line(), file=sys.stderr)
    if finished.status != "done":
        error = f": {finished.error}" if finished.error else ""
        print(f"cove: turn ended {finished.status}{error}", file=sys.stderr)
    if not quiet:
        print(
            f"conversation {conversation_id} · continue with: "
            f'{program()} run -c {conversation_id[:12]} "…"',
            file=sys.stderr,
        )
    if terminated:
        return EXIT_CANCELLED
    return STATUS_EXIT.get(finished.status, EXIT_FAILED)
