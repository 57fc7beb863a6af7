"""The bot's commands (registered with ``setMyCommands``)."""

from __future__ import annotations

import asyncio
import contextlib
import html
from collections.abc import Sequence
from dataclasses import dataclass

from cove.channels.export import to_markdown
from cove.channels.telegram.handlers import Command, Core
from cove.channels.telegram.outbox import ChatRef
from cove.errors import CoveError, NotFound
from cove.events import ReplayFinished, ReplayTurnChecked, TurnFinished


@dataclass(frozen=True)
class CommandHelp:
    """One command as the menu and ``/help`` describe it: ``/var NAME — every version …``."""

    name: str
    text: str
    argument: str = ""  # what follows the command, e.g. NAME

    @property
    def usage(self) -> str:
        """``/var NAME``."""
        return f"/{self.name} {self.argument}".rstrip()

    @property
    def menu(self) -> str:
        """The description Telegram's command menu shows beside ``/name``."""
        return f"{self.argument} — {self.text}" if self.argument else self.text


COMMANDS: tuple[CommandHelp, ...] = (
    CommandHelp("start", "what this bot does"),
    CommandHelp("help", "the commands"),
    CommandHelp("new", "start a fresh conversation (the old one stays)"),
    CommandHelp("cancel", "stop the running turn and drop queued messages"),
    CommandHelp("vars", "the variables of this conversation"),
    CommandHelp("var", "every version of one variable", "NAME"),
    CommandHelp("history", "the turns so far"),
    CommandHelp("fork", "continue from turn N in a new conversation", "N"),
    CommandHelp("title", "rename this conversation", "TEXT"),
    CommandHelp("instructions", "show or set its instructions (clear removes them)", "[TEXT]"),
    CommandHelp("model", "show the models, or use another one (default: the configured)", "[NAME]"),
    CommandHelp("export", "the whole conversation as a Markdown file"),
    CommandHelp("replay", "re-run the recorded turns and compare"),
    CommandHelp("status", "which conversation this chat talks to"),
)
LIST_CHARS = 3500
#: How long /cancel follows a turn another process runs until it reports its end.
STOP_WAIT_S = 60.0
HELP = (
    "I answer by writing and running Python in a sandbox that keeps its variables between "
    "messages. Send a question, a CSV or a photo.\n\n"
    + "\n".join(f"{command.usage} — {command.text}" for command in COMMANDS)
)


def _e(text: object) -> str:
    return html.escape(str(text), quote=False)


def _short(text: str, limit: int) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= limit else one_line[: limit - 1] + "…"


def _dropped(count: int) -> str:
    return f" Dropped {count} queued message{'s' if count > 1 else ''}." if count else ""


def _stopped(status: str) -> str:
    if status == "cancelled":
        return "⏹ Cancelled."
    return f"The turn ended ({status}) before it could be stopped."


def _bounded(lines: Sequence[str], what: str) -> str:
    """Join lines while they fit one message; say how many were left out."""
    kept: list[str] = []
    size = 0
    for line in lines:
        if size + len(line) > LIST_CHARS:
            kept.append(f"… and {len(lines) - len(kept)} more {what}")
            break
        kept.append(line)
        size += len(line) + 1
    return "\n".join(kept)


class Commands:
    """One method per command; each takes the chat and the command's arguments."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self.convs = core.convs
        self.out = core.outbox

    def table(self) -> dict[str, Command]:
        """Command name -> implementation."""
        return {
            "start": self.help,
            "help": self.help,
            "new": self.new,
            "cancel": self.cancel,
            "vars": self.vars,
            "var": self.var,
            "history": self.history,
            "fork": self.fork,
            "title": self.title,
            "instructions": self.instructions,
            "model": self.model,
            "export": self.export,
            "replay": self.replay,
            "status": self.status,
        }

    async def _current(self, chat: ChatRef) -> str:
        return await self.core.roster.current(chat)

    async def help(self, chat: ChatRef, args: list[str]) -> None:
        await self.out.plain(chat, HELP)

    async def new(self, chat: ChatRef, args: list[str]) -> None:
        old = await self._current(chat)
        record = await self.core.roster.start_new(chat)
        await self.out.say(
            chat,
            f"🆕 New conversation <code>{_e(record.id)}</code>. The previous one "
            f"(<code>{_e(old)}</code>) is kept: <code>cove show {_e(old[:12])}</code>.",
        )

    async def cancel(self, chat: ChatRef, args: list[str]) -> None:
        handles = list(self.core.roster.turns.get(chat.key, ()))
        withdrawn = self.core.withdraw_waiting(chat)  # waiting for another node's turn
        for handle in handles:
            if not handle.started and await handle.cancel():
                withdrawn += 1
        cid = await self._current(chat)
        if not any(handle.running for handle in handles):
            # No turn of this bot runs here: another cove process may run one (`cove run -c`).
            self.core.spawn(self._stop_elsewhere(chat, cid, withdrawn))
            return
        stopped = await self.convs.cancel(cid)  # this bot's turn view shows "⏹ Cancelled"
        said = "⏹ Cancelling the running turn." if stopped else "Nothing is running."
        await self.out.plain(chat, said + _dropped(withdrawn))

    async def _stop_elsewhere(self, chat: ChatRef, cid: str, withdrawn: int) -> None:
        """Ask the process running the conversation's turn to stop it; tell how it ended."""
        async with self.convs.watch(cid) as stream:  # attached first: its end cannot be missed
            if not await self.convs.cancel(cid):
                await self.out.plain(chat, "Nothing is running." + _dropped(withdrawn))
                return
            await self.out.plain(
                chat, "⏹ Stopping the turn another cove process runs…" + _dropped(withdrawn)
            )
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(STOP_WAIT_S):
                    async for event in stream:
                        if isinstance(event, TurnFinished):
                            await self.out.plain(chat, _stopped(event.status))
                            return
            await self.out.plain(chat, "The other process has not stopped the turn yet.")

    async def vars(self, chat: ChatRef, args: list[str]) -> None:
        current = await self.convs.variables(await self._current(chat))
        shown = [v for _, v in sorted(current.items()) if v.kind != "deleted"]
        if not shown:
            await self.out.plain(chat, "No variables yet.")
            return
        lines = [
            f"<code>{_e(v.name)}</code> · {_e(v.type_name)} · v{v.version}\n"
            f"  {_e(_short(v.preview, 200))}"
            for v in shown
        ]
        await self.out.say(chat, "<b>Variables</b>\n" + _bounded(lines, "variables"))

    async def var(self, chat: ChatRef, args: list[str]) -> None:
        if len(args) != 1:
            raise CoveError("usage: /var NAME")
        history = await self.convs.var_history(await self._current(chat), args[0])
        if not history:
            raise NotFound("variable", args[0], f"there is no variable {args[0]!r}")
        lines = [
            f"v{v.version} · turn {v.turn_position} · {_e(v.kind)} {_e(v.type_name)}\n"
            f"  {_e(_short(v.preview, 200))}"
            for v in history
        ]
        await self.out.say(
            chat, f"<b>{_e(args[0])}</b> versions\n" + _bounded(lines[::-1], "versions")
        )

    async def history(self, chat: ChatRef, args: list[str]) -> None:
        transcript = await self.convs.inspect(await self._current(chat))
        if not transcript.turns:
            await self.out.plain(chat, "No turns yet.")
            return
        lines = [
            f"<b>{t.position}</b> [{_e(t.status)}] {_e(_short(t.request, 80))}"
            + (f"\n  → {_e(_short(t.answer, 160))}" if t.answer else "")
            for t in transcript.turns
        ]
        await self.out.say(chat, _bounded(lines[::-1], "turns"))

    async def fork(self, chat: ChatRef, args: list[str]) -> None:
        if len(args) != 1 or not args[0].isdigit():
            raise CoveError("usage: /fork N  (N: a turn number from /history)")
        record = await self.convs.fork(await self._current(chat), int(args[0]))
        self.core.roster.switch(chat, record.id)
        await self.out.say(
            chat,
            f"🍴 Forked at turn {int(args[0])}: this chat now talks to "
            f"<code>{_e(record.id)}</code>.",
        )

    async def title(self, chat: ChatRef, args: list[str]) -> None:
        record = await self.convs.rename(await self._current(chat), " ".join(args))
        await self.out.plain(chat, f"Renamed: {record.title}")

    async def instructions(self, chat: ChatRef, args: list[str]) -> None:
        cid = await self._current(chat)
        if not args:
            current = (await self.convs.profile(cid)).instructions
            if current is None:
                await self.out.plain(chat, "No instructions. /instructions TEXT sets them.")
            else:
                await self.out.say(chat, f"<b>Instructions</b>\n{_e(current)}")
            return
        text = None if args == ["clear"] else " ".join(args)
        await self.convs.set_profile(cid, instructions=text)
        await self.out.plain(
            chat,
            "Instructions cleared." if text is None else "Instructions set for the next turns.",
        )

    async def model(self, chat: ChatRef, args: list[str]) -> None:
        cid = await self._current(chat)
        if not args:
            current = (await self.convs.profile(cid)).model or self.convs.settings.model.name
            offered = await self.convs.models()
            listed = _bounded([f"<code>{_e(name)}</code>" for name in offered], "models")
            await self.out.say(
                chat, f"Model: <code>{_e(current)}</code>\nThe endpoint offers:\n{listed}"
            )
            return
        if len(args) != 1:
            raise CoveError("usage: /model NAME  (/model alone lists them; /model default)")
        chosen = None if args[0] == "default" else args[0]
        profile = await self.convs.set_profile(cid, model=chosen)
        model = profile.model or self.convs.settings.model.name
        await self.out.say(chat, f"Model <code>{_e(model)}</code> for the next turns.")

    async def export(self, chat: ChatRef, args: list[str]) -> None:
        cid = await self._current(chat)
        document = to_markdown(await self.convs.inspect(cid)).encode()
        await self.out.document(chat, f"cove-{cid[:12]}.md", document)

    async def replay(self, chat: ChatRef, args: list[str]) -> None:
        cid = await self._current(chat)
        await self.out.plain(chat, "🔁 Replaying the recorded turns…")
        self.core.spawn(self._replay(chat, cid))

    async def _replay(self, chat: ChatRef, cid: str) -> None:
        problems: list[str] = []
        ok = False
        summary = "nothing to replay"
        try:
            async for event in self.convs.replay(cid):
                if isinstance(event, ReplayTurnChecked):
                    problems += [f"turn {event.position}: {m}" for m in event.mismatches]
                if isinstance(event, ReplayFinished):
                    ok = event.ok
                    summary = f"{event.turns} turns, {event.blocks} blocks"
        except CoveError as exc:
            await self.out.plain(chat, f"⚠️ {exc}")
            return
        if ok:
            await self.out.plain(chat, f"✅ Replay matched the record ({summary}).")
            return
        shown = "\n".join(_short(p, 200) for p in problems[:10])
        await self.out.plain(chat, f"❌ Replay diverged from the record.\n{shown}")

    async def status(self, chat: ChatRef, args: list[str]) -> None:
        record = await self.convs.get(await self._current(chat))
        running = chat.key in self.core.roster.turns
        last = f" · last turn: {_e(record.last_status)}" if record.last_status else ""
        model = (await self.convs.profile(record.id)).model or self.convs.settings.model.name
        await self.out.say(
            chat,
            f"Conversation <code>{_e(record.id)}</code>\n"
            f"title: {_e(record.label)}\n"
            f"turns: {record.turn_count} · {'running' if running else 'idle'}{last}\n"
            f"model: {_e(model)}",
        )

    async def unknown(self, chat: ChatRef, name: str) -> None:
        """A command this bot does not have."""
        await self.out.plain(chat, f"Unknown command /{name}, see /help.")
