"""What the bindings and the command palette do, as functions of the app.

Each one either finishes quickly or runs in a worker through ``app.guard``, so errors become
notifications.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from cove.channels.figures import export_folder, write_export
from cove.channels.tui.format import clean
from cove.channels.tui.host import AppHost
from cove.channels.tui.screens.dialogs import AskText, Confirm
from cove.channels.tui.screens.inspector import InspectorScreen
from cove.channels.tui.screens.text import TextScreen
from cove.channels.tui.screens.variable import VariableScreen
from cove.channels.tui.widgets.sidebar import entry_of
from cove.events import ReplayFinished, ReplayTurnChecked

if TYPE_CHECKING:
    from cove.channels.tui.widgets.iteration import IterationView

HELP = """\
# cove — terminal UI

| key | what it does |
|---|---|
| Enter | send the request |
| Shift+Enter, Ctrl+J | new line in the request |
| Up / Down (first / last line) | walk the history of requests |
| Esc | cancel the running turn (or withdraw a queued one) |
| Ctrl+N | new conversation |
| F2 (or r in the list) | rename the conversation |
| d / Delete (in the list) | delete the conversation (asks first) |
| F3 | show/hide the variables panel (Enter on a variable: versions and diff) |
| F4 | show/hide the conversation list (hidden by itself below 100 columns) |
| Tab / Shift+Tab | move between the list, iterations and the request |
| Enter (on an iteration) | expand or collapse it (or show folded iterations / earlier turns) |
| Up / Down, k / j (on an iteration) | move between its blocks, then on to the next iteration |
| i (on an iteration) | the inspector: prompt messages, raw reply, tokens, timing, cost |
| c / v (on an iteration) | copy the selected block's code / value (collapsed: all / last) |
| Ctrl+P | command palette: fork, replay, export, switch model, panels |
| F1 | this help |
| Ctrl+Q | quit |
"""


async def new_conversation(app: AppHost) -> None:
    """Create a conversation and show it."""
    # A model switched to before any conversation was shown is the new one's; otherwise a
    # new conversation starts with the configured model.
    chosen = app.model if app.current is None else app.convs.settings.model.name
    configured = app.convs.settings.model.name
    record = await app.convs.create(channel="tui", model=None if chosen == configured else chosen)
    app.sidebar.upsert(entry_of(record))
    await app.open_conversation(record.id)


def rename(app: AppHost) -> None:
    """Ask for a new title for the highlighted conversation."""
    cid = app.sidebar.highlighted_id()
    if cid is None:
        return
    entry = app.sidebar.entries.get(cid)

    async def done(title: str | None) -> None:
        if title:
            # watch_list reports the change to every list, this one included.
            await app.guard(lambda: app.convs.rename(cid, title))

    app.push_screen(AskText("New title:", entry.title or "" if entry else ""), done)


def delete(app: AppHost) -> None:
    """Delete the highlighted conversation after confirmation."""
    cid = app.sidebar.highlighted_id()
    if cid is None:
        return
    entry = app.sidebar.entries.get(cid)
    title = entry.name if entry else "(untitled)"

    async def done(yes: bool | None) -> None:
        if not yes:
            return

        async def run() -> None:
            await app.convs.delete(cid)
            app.sidebar.drop(cid)
            app.notify(f"deleted {title}")
            if app.current == cid:
                app.current = None
                await app.timeline.clear()
                rest = app.sidebar.shown_entries()
                if rest:
                    await app.open_conversation(rest[0].id)

        await app.guard(run)

    app.push_screen(Confirm(f"Delete “{title}” and all its history?"), done)


def show_help(app: AppHost) -> None:
    """The key bindings."""
    app.push_screen(TextScreen(HELP, "help"))


async def inspect(app: AppHost, view: IterationView) -> None:
    """Open the inspector on a stored iteration."""
    if app.current is None:
        return
    transcript = await app.convs.inspect(app.current, turn=view.turn_position)
    for turn in transcript.turns:
        for it in turn.iterations:
            if it.position + 1 == view.number:
                prompt = await app.convs.system_prompt(it.system_prompt_hash)
                app.push_screen(InspectorScreen(turn, it, prompt))
                return
    app.notify("this iteration is not recorded yet; inspect it when it is done")


async def show_variable(app: AppHost, name: str) -> None:
    """Open a variable's versions and diff."""
    if app.current is not None:
        versions = await app.convs.var_history(app.current, name)
        app.push_screen(VariableScreen(name, versions))


def fork(app: AppHost) -> None:
    """Ask for a turn number, fork there and show the fork."""
    cid = app.current
    if cid is None:
        app.notify("open a conversation first", severity="warning")
        return
    last = max((t.position for t in app.timeline.turns.values()), default=1)

    async def done(answer: str | None) -> None:
        if answer is None:
            return
        if not answer.isdigit():
            app.notify(f"a turn number, please (1–{last})", severity="warning")
            return

        async def run() -> None:
            record = await app.convs.fork(cid, int(answer))
            app.notify(f"forked at turn {answer}: {record.title}")
            await app.open_conversation(record.id)

        await app.guard(run)

    app.push_screen(AskText(f"Fork at turn (1–{last}):", str(last)), done)


async def replay(app: AppHost) -> None:
    """Replay the conversation in a scratch sandbox and show the report."""
    if app.current is None:
        return
    app.notify("replaying…")
    lines = ["# Replay report", ""]
    async for event in app.convs.replay(app.current):
        if isinstance(event, ReplayTurnChecked):
            state = "matches" if not event.mismatches else "DIFFERS"
            lines.append(
                f"- turn {event.position}: {event.matched}/{event.blocks} blocks match, "
                f"{state} (recorded {event.recorded_status}, replayed {event.replayed_status})"
            )
            lines += [f"  - {clean(m)}" for m in event.mismatches]
        elif isinstance(event, ReplayFinished):
            verdict = "the replay matches the record" if event.ok else "the replay diverged"
            lines += [
                "",
                f"**{verdict}**: {event.turns} turn(s), {event.blocks} block(s), "
                f"{event.mismatches} mismatch(es).",
            ]
    app.push_screen(TextScreen("\n".join(lines), "replay-report"))


async def export(app: AppHost, kind: str) -> None:
    """Write the conversation as Markdown or JSON into the export directory, its figures into
    a folder beside it (``cove export -o`` writes the same)."""
    if app.current is None:
        return
    transcript = await app.convs.inspect(app.current)
    path = app.export_dir / f"cove-{app.current[:12]}.{kind}"
    saved = await write_export(app.convs, transcript, path, kind)
    figures = f" (its figures in {export_folder(path)})" if saved else ""
    app.notify(f"exported to {path}{figures}")


def switch_model(app: AppHost) -> None:
    """Ask for the model the shown conversation's next turns use (remembered with it;
    ``default``: the configured model)."""

    async def done(name: str | None) -> None:
        if name is not None:
            await app.guard(lambda: use_model(app, None if name == "default" else name))

    question = "Model for the next turns (default: the configured one):"
    app.push_screen(AskText(question, app.model), done)


async def use_model(app: AppHost, name: str | None) -> None:
    """Make ``name`` the shown conversation's model (for a conversation still to be created,
    the one it is created with).

    Raises:
        CoveError: The endpoint does not offer it. ModelError: It could not be checked.
    """
    configured = app.convs.settings.model.name
    app.convs.check_model(name or configured)
    if app.current is not None:
        profile = await app.convs.set_profile(app.current, model=name)
        chosen = profile.model or configured
    else:
        chosen = await app.convs.checked_model(name) if name else configured
    app.model = chosen
    app.status.set(model=chosen)
    app.notify(f"next turns use {chosen}")


def edit_instructions(app: AppHost) -> None:
    """Ask for the shown conversation's instructions (``clear`` removes them)."""

    async def ask() -> None:
        if app.current is None:
            await new_conversation(app)
        assert app.current is not None
        current = (await app.convs.profile(app.current)).instructions or ""

        async def done(text: str | None) -> None:
            if text is not None:
                await app.guard(lambda: set_instructions(app, None if text == "clear" else text))

        question = "Instructions for the next turns (clear removes them):"
        app.push_screen(AskText(question, current), done)

    app.run_worker(app.guard(ask), group="instructions")


async def set_instructions(app: AppHost, text: str | None) -> None:
    """Set the shown conversation's instructions from its next turn on.

    Raises:
        CoveError: They are over the limit (nothing changes).
    """
    assert app.current is not None
    profile = await app.convs.set_profile(app.current, instructions=text)
    app.notify("instructions cleared" if profile.instructions is None else "instructions set")


async def show_profile(app: AppHost, conversation_id: str) -> None:
    """Show the model of the conversation ``conversation_id`` in the status line."""
    profile = await app.convs.profile(conversation_id)
    app.model = profile.model or app.convs.settings.model.name
    app.status.set(model=app.model)


Step = Callable[[AppHost], Awaitable[None]]


async def export_md(app: AppHost) -> None:
    """Export as Markdown."""
    await export(app, "md")


async def export_json(app: AppHost) -> None:
    """Export as JSON."""
    await export(app, "json")
