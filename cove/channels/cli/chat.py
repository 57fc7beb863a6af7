"""``cove chat``: an interactive conversation, with slash commands between turns."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Coroutine, Iterator
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from cove.channels.cli.approvals import first, terminal_approver
from cove.channels.cli.base import chosen_model, command, conversation_settings, examples
from cove.channels.cli.chat_commands import HELP, ChatState, Leave, run_chat_command
from cove.channels.cli.exits import EXIT_CANCELLED, EXIT_OK
from cove.channels.cli.options import ModelOptions, model_options
from cove.channels.cli.render import ProgressView, console_for, cut, line
from cove.channels.cli.signals import routed_signals
from cove.conversation import Conversations
from cove.conversation.service.health import model_not_offered
from cove.errors import Busy

MULTI_START, MULTI_END = "!multi", "!end"
RECAP_TURNS = 3


class Terminated(Exception):
    """SIGTERM arrived while ``cove chat`` waited for input: leave as after a cancelled turn."""


@command(
    "chat",
    short_help="Talk to the model interactively.",
    epilog=examples(
        "cove chat              a new conversation",
        "cove chat 3f2a         continue conversation 3f2a… (shows a recap of its last turns)",
        "cove chat -m gpt-4.1   a new conversation with this model (remembered with it)",
    )
    + "\n\n\b\n"
    + HELP,
)
@click.argument("conversation_id", metavar="[ID]", required=False)
@click.option("--max-iterations", type=click.IntRange(min=1), metavar="N")
@model_options
def chat_command(
    conversation_id: str | None, max_iterations: int | None, options: ModelOptions
) -> int:
    """Talk to the model interactively; type /help for the chat commands.

    Ctrl-C cancels a running turn; Ctrl-C twice, Ctrl-D or /exit leaves.
    """
    with contextlib.suppress(ImportError):
        import readline  # noqa: F401  (line editing and history for input())
    settings = conversation_settings(max_iterations=max_iterations)
    console = console_for(sys.stdout)
    with _sigterm_raises(), asyncio.Runner() as runner:
        try:
            convs = runner.run(Conversations.open(settings))
        except Terminated:
            return EXIT_CANCELLED
        state = ChatState(convs, console, max_iterations, options, model=chosen_model())
        try:
            terminated = _session(runner, state, conversation_id)
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the clean-up below must finish
            runner.run(convs.aclose())
    if state.conversation_id is not None:
        console.print(f"[dim]conversation {state.conversation_id} saved[/dim]")
    return EXIT_CANCELLED if terminated else EXIT_OK


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """SIGTERM while waiting for input leaves like Ctrl-D; a turn's own handler covers turns."""
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _session(runner: asyncio.Runner, state: ChatState, conversation_id: str | None) -> bool:
    """The chat loop; True when it ended on SIGTERM."""
    sync = _Sync(runner)
    try:
        if conversation_id is not None:
            state.conversation_id = runner.run(state.convs.get(conversation_id)).id
            if state.model is not None:  # -m: the conversation goes on with this model
                runner.run(state.convs.set_profile(state.conversation_id, model=state.model))
        model = runner.run(state.current_model())
        state.convs.check_model(model)
        # Before the first prompt: a model the endpoint does not offer would fail the first turn.
        missing = runner.run(model_not_offered(state.convs.settings, model))
        if missing is not None:
            raise missing
        _banner(state, model)
        if state.conversation_id is not None:
            runner.run(_recap(state))
        while True:
            text = _read_request(state.console)
            is_request = text.strip() and not run_chat_command(state, text.strip(), sync)
            if is_request and runner.run(_turn(state, text)):
                return True
    except Leave:
        return False
    except Terminated:
        return True


class _Sync:
    """Runs a chat command's coroutine on the chat's event loop."""

    def __init__(self, runner: asyncio.Runner) -> None:
        self.runner = runner

    def __call__(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return self.runner.run(coro)


def _banner(state: ChatState, model: str) -> None:
    which = f"conversation {state.conversation_id}" if state.conversation_id else "new conversation"
    state.console.print(f"[bold]cove[/bold] {which} · model {escape(model)}")
    state.console.print(
        "[dim]/help lists the commands. Ctrl-C cancels a running turn; "
        "Ctrl-C twice, Ctrl-D or /exit leaves.[/dim]"
    )


async def _recap(state: ChatState) -> None:
    assert state.conversation_id is not None
    transcript = await state.convs.inspect(state.conversation_id)
    turns = transcript.turns[-RECAP_TURNS:]
    if not turns:
        return
    earlier = len(transcript.turns) - len(turns)
    state.console.print(
        line(
            (
                f"the last {len(turns)} turn(s)"
                + (f" of {len(transcript.turns)}" if earlier else ""),
                "dim",
            )
        )
    )
    for turn in turns:
        state.console.print(line((f"turn {turn.position} · you: ", "bold"), cut(turn.request, 300)))
        reply = turn.answer or turn.error or turn.status
        state.console.print(line(("  cove: ", "green"), cut(reply, 300)))


def _read_request(console: Console) -> str:
    """One request: a line, or the lines between ``!multi`` and ``!end``."""
    text = _read_line(console, "you › ")
    if text.strip() != MULTI_START:
        return text
    console.print(
        f"[dim]multi-line message: end it with a line {MULTI_END} (/cancel drops it)[/dim]"
    )
    lines: list[str] = []
    while True:
        more = _read_line(console, "… ")
        if more.strip() == MULTI_END:
            return "\n".join(lines)
        if more.strip() == "/cancel":
            console.print("[dim]dropped[/dim]")
            return ""
        lines.append(more)


def _read_line(console: Console, prompt: str) -> str:
    armed = False  # a first Ctrl-C at the prompt arms the second one to leave
    while True:
        try:
            return input(prompt)
        except EOFError:
            raise Leave from None
        except KeyboardInterrupt:
            if armed:
                raise Leave from None
            armed = True
            console.print("\n[dim](Ctrl-C again or Ctrl-D to leave)[/dim]")


async def _turn(state: ChatState, text: str) -> bool:
    """Run one turn; True after SIGTERM. A second Ctrl-C during the turn leaves the chat."""
    if state.conversation_id is None:
        # Created with its first turn, so leaving at once leaves nothing behind.
        created = await state.convs.create(
            channel="cli", model=state.model, instructions=state.instructions
        )
        state.conversation_id = created.id
        state.console.print(f"[dim]conversation {state.conversation_id}[/dim]")
    conversation_id = state.conversation_id
    view = ProgressView(state.console)
    presses, terminated = 0, False

    def cancel() -> None:
        asyncio.get_running_loop().create_task(state.convs.cancel(conversation_id))

    def on_sigint() -> None:
        nonlocal presses
        presses += 1
        if presses == 1:
            state.console.print("[yellow]cancelling… (Ctrl-C again to leave)[/yellow]")
        cancel()

    def on_sigterm() -> None:
        nonlocal terminated
        terminated = True
        cancel()

    with routed_signals(on_sigint, on_sigterm):
        try:
            async for event in state.convs.send(
                conversation_id,
                text,
                max_iterations=state.max_iterations,
                model_options=state.options,
                approver=first(view.close, terminal_approver(state.console))
                if sys.stdin.isatty()
                else None,
            ):
                view.handle(event)
        except Busy as exc:  # another process runs a turn here: the chat stays
            state.console.print(line((f"not sent: {exc}; /cancel stops it", "yellow")))
        finally:
            view.close()
    if presses > 1 and not terminated:
        raise Leave
    return terminated
