"""The app's entries in the command palette (Ctrl+P)."""

from __future__ import annotations

from collections.abc import Iterator

from textual.app import SystemCommand

from cove.channels.tui import actions, attach
from cove.channels.tui.host import AppHost


def system_commands(app: AppHost) -> Iterator[SystemCommand]:
    """Fork, replay, export, attach a file, switch model, instructions, toggle panels, manage
    conversations."""

    def background(name: str, step: actions.Step) -> None:
        app.run_worker(app.guard(lambda: step(app)), group=name)

    yield SystemCommand(
        "Fork at turn…", "a new conversation from a turn", lambda: actions.fork(app)
    )
    yield SystemCommand(
        "Replay conversation",
        "re-run it in a scratch sandbox; show the report",
        lambda: background("replay", actions.replay),
    )
    yield SystemCommand(
        "Export Markdown", "write cove-ID.md", lambda: background("export", actions.export_md)
    )
    yield SystemCommand(
        "Export JSON", "write cove-ID.json", lambda: background("export", actions.export_json)
    )
    yield SystemCommand("Attach a file…", "it goes with your next message", lambda: attach.ask(app))
    yield SystemCommand(
        "Switch model…", "the model next turns use", lambda: actions.switch_model(app)
    )
    yield SystemCommand(
        "Instructions…",
        "a persona, house rules, a task: the conversation's next turns follow them",
        lambda: actions.edit_instructions(app),
    )
    yield SystemCommand("Toggle variables panel", "F3", app.action_toggle_variables)
    yield SystemCommand("Toggle conversation list", "F4", app.action_toggle_sidebar)
    yield SystemCommand("New conversation", "Ctrl+N", app.action_new)
    yield SystemCommand("Rename conversation", "F2", app.action_rename)
    yield SystemCommand("Delete conversation", "asks first", app.action_delete)
    yield SystemCommand("Key bindings", "F1", app.action_help)
