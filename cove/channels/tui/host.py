"""``AppHost``: what the bindings' actions, the command palette and figures use of the app.

``CoveApp`` extends it. ``actions``, ``palette`` and ``figures`` take an ``AppHost``, so none
imports the app that imports them: the TUI's modules import one another without a cycle.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from textual.app import App

from cove.channels.tui.widgets.sidebar import Sidebar
from cove.channels.tui.widgets.status import StatusBar
from cove.channels.tui.widgets.timeline import Timeline
from cove.conversation import Conversations


class AppHost(App[None]):
    """The app as its actions see it; ``CoveApp`` implements every method here."""

    convs: Conversations
    current: str | None  # the conversation shown
    export_dir: Path
    model: str  # the model the shown conversation's next turns use
    attachments: list[tuple[str, bytes]]  # files that go with the next message

    @property
    def sidebar(self) -> Sidebar:
        """The conversation list."""
        raise NotImplementedError

    @property
    def timeline(self) -> Timeline:
        """The shown conversation's turns."""
        raise NotImplementedError

    @property
    def status(self) -> StatusBar:
        """The status line."""
        raise NotImplementedError

    def report(self, exc: BaseException) -> None:
        """Show an error as a notification saying what to do."""
        raise NotImplementedError

    async def guard(self, step: Callable[[], Awaitable[object]]) -> None:
        """Run ``step``; an exception becomes a notification."""
        raise NotImplementedError

    async def open_conversation(self, conversation_id: str) -> None:
        """Show a conversation and follow it live."""
        raise NotImplementedError

    async def action_new(self) -> None:
        """Create a conversation and show it."""
        raise NotImplementedError

    def action_rename(self) -> None:
        """Ask for a new title of the shown conversation."""
        raise NotImplementedError

    def action_delete(self) -> None:
        """Delete the shown conversation, after asking."""
        raise NotImplementedError

    def action_help(self) -> None:
        """Show the key bindings."""
        raise NotImplementedError

    async def action_toggle_variables(self) -> None:
        """Show or hide the variables panel."""
        raise NotImplementedError

    def action_toggle_sidebar(self) -> None:
        """Show or hide the conversation list."""
        raise NotImplementedError
