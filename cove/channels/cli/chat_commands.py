"""The slash commands of ``cove chat``: one function per command, looked up in a table."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console

from cove.channels.cli.options import ModelOptions
from cove.channels.cli.render import cut, line, print_table
from cove.channels.cli.transcript_view import show_transcript
from cove.conversation import Conversations, checked_instructions
from cove.errors import CoveError
from cove.events import TurnFinished

Sync = Callable[[Coroutine[Any, Any, Any]], Any]
#: How long /cancel follows a turn another process runs until it reports its end.
STOP_WAIT_S = 60.0

HELP = """Chat commands:
  /help            this list
  /exit, /quit     leave (also exit or quit alone, Ctrl-D, or Ctrl-C twice)
  /vars            the conversation's variables
  /var NAME        every version of one variable
  /show            the whole conversation: iterations, code, results
  /fork N          continue in a new branch from turn N (0: before turn 1, none of its turns)
  /model           the model and the models the endpoint offers
  /model NAME      use another model for the next turns (/model default: the configured one)
  /instructions    the conversation's instructions (a persona, house rules, a task)
  /instructions TEXT   replace them for the next turns (/instructions clear removes them)
  /cancel          stop a turn another cove process runs here (or drop a !multi message)
  !multi ... !end  a multi-line message: the lines between !multi and !end"""


class Leave(Exception):
    """The person asked to leave the chat."""


@dataclass
class ChatState:
    """What a chat is on: the conversation (None until the first turn) and what it is created
    with (its model and instructions are then the conversation's own)."""

    convs: Conversations
    console: Console
    max_iterations: int | None
    options: ModelOptions = field(default_factory=dict)  # -o: sent with every turn
    conversation_id: str | None = None
    model: str | None = None  # -m or /model before the first turn: the new conversation's
    instructions: str | None = None  # /instructions before the first turn

    async def current_model(self) -> str:
        """The model the next turn runs with."""
        if self.conversation_id is not None:
            chosen = (await self.convs.profile(self.conversation_id)).model
        else:
            chosen = self.model
        return chosen or self.convs.settings.model.name

    async def current_instructions(self) -> str | None:
        """The instructions the next turn runs with."""
        if self.conversation_id is None:
            return self.instructions
        return (await self.convs.profile(self.conversation_id)).instructions


def run_chat_command(state: ChatState, text: str, sync: Sync) -> bool:
    """Run ``text`` if it is a chat command; False when it is a request for the model.

    Raises:
        Leave: The command was /exit, /quit, exit or quit.
    """
    if text in ("exit", "quit"):
        raise Leave
    if not text.startswith("/"):
        return False
    name, _, arg = text.partition(" ")
    handler = COMMANDS.get(name)
    if handler is None:
        state.console.print(line((f"unknown command {name}; /help lists them", "yellow")))
        return True
    try:
        handler(state, arg.strip(), sync)
    except CoveError as exc:
        state.console.print(line((f"{exc}", "red")))
    return True


def _help(state: ChatState, arg: str, sync: Sync) -> None:
    state.console.print(HELP, markup=False, highlight=False)


def _leave(state: ChatState, arg: str, sync: Sync) -> None:
    raise Leave


def _no_conversation(state: ChatState) -> bool:
    if state.conversation_id is None:
        state.console.print(
            line(("nothing yet: the conversation starts with your first request", "dim"))
        )
        return True
    return False


def _vars(state: ChatState, arg: str, sync: Sync) -> None:
    if _no_conversation(state):
        return
    rows = sorted(
        sync(state.convs.variables(state.conversation_id or "")).values(), key=lambda v: v.name
    )
    if not rows:
        state.console.print("no variables yet")
        return
    print_table(
        state.console,
        ("name", "version", "type", "turn", "preview"),
        [
            (v.name, str(v.version), v.type_name, str(v.turn_position), cut(v.preview, 80))
            for v in rows
        ],
    )


def _var(state: ChatState, arg: str, sync: Sync) -> None:
    if not arg:
        state.console.print(line(("usage: /var NAME", "yellow")))
        return
    if _no_conversation(state):
        return
    rows = sync(state.convs.var_history(state.conversation_id or "", arg))
    if not rows:
        state.console.print(line((f"no variable {arg}", "yellow")))
        return
    print_table(
        state.console,
        ("version", "kind", "type", "turn", "preview"),
        [
            (str(v.version), v.kind, v.type_name, str(v.turn_position), cut(v.preview, 200))
            for v in rows
        ],
    )


def _show(state: ChatState, arg: str, sync: Sync) -> None:
    if _no_conversation(state):
        return
    transcript = sync(state.convs.inspect(state.conversation_id or ""))
    show_transcript(state.console, transcript)


def _fork(state: ChatState, arg: str, sync: Sync) -> None:
    if not arg.isdigit():
        state.console.print(line(("usage: /fork N (a turn number; 0: before turn 1)", "yellow")))
        return
    if _no_conversation(state):
        return
    record = sync(state.convs.fork(state.conversation_id or "", at_turn=int(arg)))
    state.conversation_id = record.id
    state.console.print(line((f"now in fork {record.id} (from turn {arg})", "cyan")))


def _model(state: ChatState, arg: str, sync: Sync) -> None:
    if not arg:
        current = sync(state.current_model())
        state.console.print(line((f"model {current}; /model NAME changes it", "dim")))
        offered = sync(state.convs.models())  # a listing that fails is reported as an error
        state.console.print(line(("the endpoint offers: ", "dim"), ", ".join(offered) or "none"))
        return
    model = None if arg == "default" else arg
    if state.conversation_id is None:
        state.model = None if model is None else sync(state.convs.checked_model(model))
    else:
        state.convs.check_model(model or state.convs.settings.model.name)
        sync(state.convs.set_profile(state.conversation_id, model=model))
    state.console.print(line((f"model {sync(state.current_model())} for the next turns", "cyan")))


def _instructions(state: ChatState, arg: str, sync: Sync) -> None:
    if not arg:
        current = sync(state.current_instructions())
        if current is None:
            state.console.print(line(("no instructions; /instructions TEXT sets them", "dim")))
        else:
            state.console.print(line(("instructions: ", "dim"), current))
        return
    text = None if arg == "clear" else arg
    if state.conversation_id is None:
        state.instructions = checked_instructions(text)
    else:
        sync(state.convs.set_profile(state.conversation_id, instructions=text))
    done = "instructions cleared" if text is None else "instructions set for the next turns"
    state.console.print(line((done, "cyan")))


def _cancel(state: ChatState, arg: str, sync: Sync) -> None:
    """Stop the turn another process runs in this conversation (a turn of this chat stops with
    Ctrl-C); waits for its end, which that process records."""
    if state.conversation_id is None or not sync(_stop_elsewhere(state, state.conversation_id)):
        state.console.print(
            line(
                (
                    "nothing to cancel: Ctrl-C cancels a running turn; "
                    "/cancel drops a !multi message",
                    "dim",
                )
            )
        )


async def _stop_elsewhere(state: ChatState, conversation_id: str) -> bool:
    """Ask the process running the conversation's turn to stop it and report its end; False
    when no turn runs."""
    async with state.convs.watch(conversation_id) as stream:  # first: its end cannot be missed
        if not await state.convs.cancel(conversation_id):
            return False
        state.console.print(line(("stopping the turn another cove process runs…", "yellow")))
        try:
            async with asyncio.timeout(STOP_WAIT_S):
                async for event in stream:
                    if isinstance(event, TurnFinished):
                        state.console.print(line((_stopped(event.status), "cyan")))
                        return True
        except TimeoutError:
            state.console.print(line(("the other process has not stopped the turn yet", "red")))
    return True


def _stopped(status: str) -> str:
    if status == "cancelled":
        return "stopped: the running turn was cancelled"
    return f"the running turn ended ({status}) before it could be stopped"


COMMANDS: dict[str, Callable[[ChatState, str, Sync], None]] = {
    "/help": _help,
    "/exit": _leave,
    "/quit": _leave,
    "/vars": _vars,
    "/var": _var,
    "/show": _show,
    "/fork": _fork,
    "/model": _model,
    "/instructions": _instructions,
    "/cancel": _cancel,
}
