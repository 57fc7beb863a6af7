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

from cove.channels.cli.app import EXIT_FAILED, STATUS_EXIT, run_async
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
def _sigint(handler: Callable[[], None]) -> Any:
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGINT, handler)
    except (NotImplementedError, RuntimeError):  # not the main thread
        yield
        return
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGINT)


async def _run(args: argparse.Namespace, settings: Settings) -> int:
    attachments = _read_attachments(args.attach)
    async with await Conversations.open(settings) as convs:
        convs.check_model()
        if args.conversation:
            conv = await convs.get(args.conversation)
        else:
            conv = await convs.create(channel="cli")
        stderr = console_for(sys.stderr)
        view = ProgressView(stderr, show_answer=False) if stderr.is_terminal else None
        finished: TurnFinished | None = None
        presses = 0

        def on_sigint() -> None:
            nonlocal presses
            presses += 1
            if presses > 1:
                raise KeyboardInterrupt
            print("cancelling the turn… (Ctrl-C again to quit at once)", file=sys.stderr)
            asyncio.get_running_loop().create_task(convs.cancel(conv.id))

        with _sigint(on_sigint):
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
            return EXIT_FAILED
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
        return STATUS_EXIT.get(finished.status, EXIT_FAILED)


def _chat(args: argparse.Namespace, settings: Settings) -> int:
    with contextlib.suppress(ImportError):
        import readline  # noqa: F401  (line editing and history for input())
    console = console_for(sys.stdout)
    with asyncio.Runner() as runner:
        convs = runner.run(Conversations.open(settings))
        try:
            convs.check_model()
            if args.id:
                conv = runner.run(convs.get(args.id))
            else:
                conv = runner.run(convs.create(channel="cli"))
            console.print(
                f"[bold]cove[/bold] conversation {conv.id} · model {escape(settings.model)}"
            )
            console.print(
                "[dim]Ctrl-C cancels a running turn; Ctrl-C twice or Ctrl-D leaves.[/dim]"
            )
            armed = False
            while True:
                try:
                    line = input("you › ")
                except EOFError:
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
                if runner.run(_chat_turn(convs, conv.id, line, args, console)):
                    break
        finally:
            runner.run(convs.aclose())
    console.print(f"[dim]conversation {conv.id} saved[/dim]")
    return 0


async def _chat_turn(
    convs: Conversations, conversation_id: str, text: str, args: argparse.Namespace, console: Any
) -> bool:
    """Run one chat turn; returns True when the person asked to leave (second Ctrl-C)."""
    view = ProgressView(console)
    presses = 0

    def on_sigint() -> None:
        nonlocal presses
        presses += 1
        if presses == 1:
            console.print("[yellow]cancelling… (Ctrl-C again to leave)[/yellow]")
        asyncio.get_running_loop().create_task(convs.cancel(conversation_id))

    with _sigint(on_sigint):
        try:
            async for event in convs.send(
                conversation_id, text, max_iterations=args.max_iterations
            ):
                view.handle(event)
        finally:
            view.close()
    return presses > 1
