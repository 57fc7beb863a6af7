"""``cove run`` (one question, scriptable) and ``cove chat`` (an interactive conversation)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.markup import escape

from cove.channels.cli.app import EXIT_CANCELLED, EXIT_FAILED, STATUS_EXIT, run_async
from cove.channels.cli.common import add_common, positive_int, program
from cove.channels.cli.render import (
    ProgressView,
    console_for,
    line,
    print_json,
    print_json_line,
)
from cove.config import Settings
from cove.conversation import Conversations
from cove.errors import ConfigError
from cove.events import TurnFinished


class Terminated(Exception):
    """SIGTERM arrived while ``cove chat`` waited for input: leave as after a cancelled turn."""


def register(sub: Any) -> None:
    """Add ``run`` and ``chat``."""
    run = sub.add_parser("run", help="ask one question; print the answer")
    add_common(run)
    run.add_argument("question", help="the request for the model")
    run.add_argument("-c", "--conversation", metavar="ID", help="continue this conversation")
    run.add_argument("--json", action="store_true", help="print the result as a JSON object")
    run.add_argument("--events", action="store_true", help="stream events as JSON lines")
    run.add_argument("--max-iterations", type=positive_int, metavar="N")
    run.add_argument(
        "--attach",
        action="append",
        default=[],
        metavar="FILE",
        help="copy a file into the conversation's workspace (repeatable)",
    )
    run.set_defaults(handler=lambda a, s: run_async(_run(a, s)))

    chat = sub.add_parser("chat", help="talk to the model interactively")
    add_common(chat)
    chat.add_argument("id", nargs="?", help="conversation to continue (id or prefix)")
    chat.add_argument("--max-iterations", type=positive_int, metavar="N")
    chat.set_defaults(handler=_chat)


def _read_attachments(paths: list[str]) -> list[tuple[str, bytes]]:
    files = []
    for name in paths:
        path = Path(name)
        try:
            files.append((path.name, path.read_bytes()))
        except OSError as exc:
            raise ConfigError(f"cannot read attachment {name}: {exc.strerror}") from exc
    return files


@contextlib.contextmanager
def _signals(on_sigint: Callable[[], None], on_sigterm: Callable[[], None]) -> Any:
    """Route SIGINT and SIGTERM to the event loop for the body.

    SIGTERM (a service manager, ``kill``, a closed terminal's shell) is treated like a first
    Ctrl-C: the running turn is cancelled and recorded, workers stop, the database closes.
    """
    loop = asyncio.get_running_loop()
    installed = []
    try:
        for signum, handler in ((signal.SIGINT, on_sigint), (signal.SIGTERM, on_sigterm)):
            loop.add_signal_handler(signum, handler)
            installed.append(signum)
    except (NotImplementedError, RuntimeError):  # not the main thread
        pass
    try:
        yield
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)


def _check_request(text: str) -> None:
    """Refuse an empty request before anything (a database, a conversation) is created."""
    if not text.strip():
        raise ConfigError("the request is empty")


def _say_created(convs: Conversations) -> None:
    if convs.store.created:
        print(f"cove: created a new database at {convs.store.path}", file=sys.stderr)


async def _run(args: argparse.Namespace, settings: Settings) -> int:
    _check_request(args.question)
    attachments = _read_attachments(args.attach)
    terminated = False
    turn_of: list[str] = []  # the conversation once the turn has started

    def on_sigterm() -> None:
        nonlocal terminated
        terminated = True
        if turn_of:
            asyncio.get_running_loop().create_task(convs.cancel(turn_of[0]))

    presses = 0

    def on_sigint() -> None:
        nonlocal presses
        presses += 1
        if presses > 1:
            raise KeyboardInterrupt
        print("cancelling the turn… (Ctrl-C again to quit at once)", file=sys.stderr)
        if turn_of:
            asyncio.get_running_loop().create_task(convs.cancel(turn_of[0]))

    with _signals(on_sigint, on_sigterm):
        async with await Conversations.open(settings) as convs:
            _say_created(convs)
            convs.check_model()
            if args.conversation:
                conv = await convs.get(args.conversation)
            else:
                conv = await convs.create(channel="cli")
            if terminated:
                return EXIT_CANCELLED
            stderr = console_for(sys.stderr)
            view = ProgressView(stderr, show_answer=False) if stderr.is_terminal else None
            finished: TurnFinished | None = None
            turn_of.append(conv.id)
            try:
                async for event in convs.send(
                    conv.id, args.question, attachments, max_iterations=args.max_iterations
                ):
                    if args.events:
                        print_json_line(event.to_json())
                    elif view is not None:
                        view.handle(event)
                    if isinstance(event, TurnFinished):
                        finished = event
            finally:
                if view is not None:
                    view.close()
    if finished is None:
        return EXIT_CANCELLED if terminated else EXIT_FAILED
    if args.json:
        print_json({**finished.to_json(), "conversation_id": conv.id})
    elif not args.events:
        if finished.answer:
            print(finished.answer)
        if finished.status != "done":
            print(
                f"cove: turn ended {finished.status}"
                + (f": {finished.error}" if finished.error else ""),
                file=sys.stderr,
            )
        if stderr.is_terminal:
            stderr.print(line((f'continue with: {program()} run -c {conv.id[:12]} "…"', "dim")))
    if terminated:
        return EXIT_CANCELLED
    return STATUS_EXIT.get(finished.status, EXIT_FAILED)


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated


def _chat(args: argparse.Namespace, settings: Settings) -> int:
    with contextlib.suppress(ImportError):
        import readline  # noqa: F401  (line editing and history for input())
    console = console_for(sys.stdout)
    conv_id: str | None = None
    terminated = False
    # SIGTERM while waiting for input leaves like Ctrl-D (a turn's own handler covers turns).
    signal.signal(signal.SIGTERM, _raise_terminated)
    with asyncio.Runner() as runner:
        try:
            convs = runner.run(Conversations.open(settings))
        except Terminated:
            return EXIT_CANCELLED
        try:
            _say_created(convs)
            convs.check_model()
            if args.id:
                conv_id = runner.run(convs.get(args.id)).id
            console.print(
                "[bold]cove[/bold] "
                + (f"conversation {conv_id}" if conv_id else "new conversation")
                + f" · model {escape(settings.model.name)}"
            )
            console.print(
                "[dim]Ctrl-C cancels a running turn; Ctrl-C twice or Ctrl-D leaves.[/dim]"
            )
            armed = False
            while True:
                try:
                    signal.signal(signal.SIGTERM, _raise_terminated)
                    line = input("you › ")
                except EOFError:
                    break
                except Terminated:
                    terminated = True
                    break
                except KeyboardInterrupt:
                    if armed:
                        break
                    armed = True
                    console.print("\n[dim](Ctrl-C again or Ctrl-D to leave)[/dim]")
                    continue
                armed = False
                if not line.strip():
                    continue
                if line.strip() in ("/quit", "/exit"):
                    break
                if conv_id is None:
                    # Created with its first turn, so leaving at once leaves nothing behind.
                    conv_id = runner.run(convs.create(channel="cli")).id
                    console.print(f"[dim]conversation {conv_id}[/dim]")
                outcome = runner.run(_chat_turn(convs, conv_id, line, args, console))
                if outcome == "terminated":
                    terminated = True
                    break
                if outcome == "leave":
                    break
        except Terminated:
            terminated = True
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the clean-up below must finish
            runner.run(convs.aclose())
    if conv_id is not None:
        console.print(f"[dim]conversation {conv_id} saved[/dim]")
    return EXIT_CANCELLED if terminated else 0


async def _chat_turn(
    convs: Conversations, conversation_id: str, text: str, args: argparse.Namespace, console: Any
) -> str:
    """Run one chat turn; returns "leave" after a second Ctrl-C, "terminated" after SIGTERM."""
    view = ProgressView(console)
    presses = 0
    terminated = False

    def on_sigint() -> None:
        nonlocal presses
        presses += 1
        if presses == 1:
            console.print("[yellow]cancelling… (Ctrl-C again to leave)[/yellow]")
        asyncio.get_running_loop().create_task(convs.cancel(conversation_id))

    def on_sigterm() -> None:
        nonlocal terminated
        terminated = True
        asyncio.get_running_loop().create_task(convs.cancel(conversation_id))

    with _signals(on_sigint, on_sigterm):
        try:
            async for event in convs.send(
                conversation_id, text, max_iterations=args.max_iterations
            ):
                view.handle(event)
        finally:
            view.close()
    if terminated:
        return "terminated"
    return "leave" if presses > 1 else "go on"
