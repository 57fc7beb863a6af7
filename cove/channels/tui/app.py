"""``CoveApp``: the composition root of the terminal UI.

It holds one ``Conversations`` and wires the widgets to it: the sidebar follows ``watch_list``,
the conversation pane follows ``watch`` of the conversation shown (so turns driven by another
process appear live too), and sends read their own ``TurnHandle`` only for the queued state and
errors. Every background task runs through ``guard`` so an error becomes a notification, never a
traceback that ends the app.

Events of the conversation shown are not drawn one by one: ``apply`` queues them and the app's
loop empties the queue in one pass when it next comes round (events that arrive together are
applied together); the changes only mark widgets, and Textual lays out and paints at most once
per frame, so however many events arrive between two frames the pane is drawn once for them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import ClassVar

from textual import events, on, work
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.widgets import Footer

from cove.channels.tui import actions
from cove.channels.tui.errors import advice, turn_failure
from cove.channels.tui.figures import open_figures
from cove.channels.tui.format import clean
from cove.channels.tui.host import AppHost
from cove.channels.tui.palette import system_commands
from cove.channels.tui.screens.dialogs import Approve
from cove.channels.tui.styles import CSS
from cove.channels.tui.widgets.iteration import IterationView
from cove.channels.tui.widgets.prompt import PromptArea
from cove.channels.tui.widgets.sidebar import Entry, Sidebar, entry_of
from cove.channels.tui.widgets.status import StatusBar
from cove.channels.tui.widgets.timeline import EarlierTurns, Timeline, cost_text
from cove.channels.tui.widgets.variables import VariablesPanel
from cove.conversation import (
    ApprovalAnswer,
    ApprovalRequest,
    ConversationRecord,
    Conversations,
    TurnHandle,
)
from cove.events import (
    Event,
    IterationStarted,
    Resync,
    TitleChanged,
    TurnFinished,
    TurnQueued,
    TurnStarted,
    VarsChanged,
)

#: Below this many columns the sidebar hides by itself (F4 still shows it) and the footer is
#: compact: the conversation and the keys need the room.
NARROW_COLUMNS = 100


def status_fields(events: Iterable[Event]) -> dict[str, str]:
    """The status bar fields ``events`` leave changed (a later event's value wins)."""
    fields: dict[str, str] = {}
    for event in events:
        if isinstance(event, TurnStarted):
            fields.update(iteration="", usage="running")
        elif isinstance(event, IterationStarted):
            fields["iteration"] = f"{event.iteration}/{event.budget}"
        elif isinstance(event, TurnFinished):
            tokens = event.usage.tokens_in + event.usage.tokens_out
            cost = cost_text(event.usage.cost_usd, event.cost_known)
            fields["usage"] = f"{event.status} · {tokens:,} tokens · {cost}"
    return fields


class CoveApp(AppHost):
    """The ``cove tui`` application."""

    TITLE = "cove"
    CSS = CSS
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+n", "new", "New"),
        Binding("escape", "cancel_turn", "Cancel turn"),
        Binding("f1", "help", "Help"),
        Binding("f2", "rename", "Rename"),
        Binding("f3", "toggle_variables", "Variables"),
        Binding("f4", "toggle_sidebar", "Sidebar"),
        Binding("ctrl+l", "focus_prompt", "Prompt", show=False),
    ]

    def __init__(
        self,
        convs: Conversations,
        conversation_id: str | None = None,
        *,
        export_dir: Path | None = None,
    ) -> None:
        super().__init__()
        self.convs = convs
        self.initial = conversation_id
        self.export_dir = export_dir or Path.cwd()
        self.model = convs.settings.model.name
        self.current: str | None = None
        self.sending: set[TurnHandle] = set()
        self.queued: set[TurnHandle] = set()
        self.notices: list[str] = []  # every notification shown, oldest first (tests read it)
        self.attachments: list[tuple[str, bytes]] = []  # files the next message takes along
        self._watching: tuple[str, asyncio.Event] | None = None
        self._narrow: bool | None = None  # whether the terminal was narrow at the last resize
        self.arrived: list[Event] = []  # events of the conversation shown, not drawn yet

    def compose(self) -> ComposeResult:
        with Horizontal(id="main"):
            yield Sidebar()
            with Vertical(id="center"):
                yield Timeline()
                yield PromptArea()
            panel = VariablesPanel()
            panel.add_class("hidden")
            yield panel
        yield StatusBar(self.model)
        yield Footer()

    # -- widgets ---------------------------------------------------------------------------

    @property
    def sidebar(self) -> Sidebar:
        return self.query_one(Sidebar)

    @property
    def timeline(self) -> Timeline:
        return self.query_one(Timeline)

    @property
    def status(self) -> StatusBar:
        return self.query_one(StatusBar)

    @property
    def variables(self) -> VariablesPanel:
        return self.query_one(VariablesPanel)

    # -- errors ----------------------------------------------------------------------------

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,  # messages quote errors and ids, never markup
    ) -> None:
        """Show a notification (and remember its text)."""
        message = clean(message)
        self.notices.append(message)
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    def report(self, exc: BaseException) -> None:
        """Show an error as a notification saying what to do."""
        text, severity = advice(exc)
        self.notify(text, severity=severity, timeout=10)

    async def guard(self, step: Callable[[], Awaitable[object]]) -> None:
        """Run ``step``; an exception becomes a notification (cancellation passes through)."""
        try:
            await step()
        except Exception as exc:
            self.report(exc)

    # -- start -----------------------------------------------------------------------------

    def on_resize(self, event: events.Resize) -> None:
        self.fit(event.size.width)

    def fit(self, columns: int) -> None:
        """Make room on a narrow terminal: the sidebar hides (F4 shows it again) and the footer
        is compact, without the palette hint (Ctrl+P still opens it; F1 lists it); a wide
        terminal gets them back. Only a change of width class acts, so the person's F4 stands
        until then."""
        narrow = columns < NARROW_COLUMNS
        if narrow == self._narrow:
            return
        self._narrow = narrow
        self.sidebar.set_class(narrow, "hidden")
        footer = self.query_one(Footer)
        footer.compact = narrow
        footer.show_command_palette = not narrow

    def on_mount(self) -> None:
        self.fit(self.size.width)
        try:
            self.convs.check_model(self.model)
            endpoint = "endpoint: configured"
        except Exception as exc:
            endpoint = "endpoint: none"
            self.report(exc)
        self.status.set(endpoint=endpoint)
        self.query_one(PromptArea).focus()
        self.follow_list()

    @work(group="list")
    async def follow_list(self) -> None:
        """Load the list, open the first conversation, then apply changes as they come."""

        async def run() -> None:
            async with self.convs.watch_list() as changes:
                records = await self.convs.list(limit=500)
                self.sidebar.set_entries([entry_of(r) for r in records])
                await self.guard(lambda: self.open_first(records))  # a bad id: keep listing
                async for change in changes:
                    if change.kind == "deleted":
                        self.sidebar.drop(change.conversation_id)
                    else:
                        self.sidebar.upsert(
                            Entry(
                                change.conversation_id,
                                change.title,
                                change.updated_at,
                                change.status,
                                change.label,
                            )
                        )

        await self.guard(run)

    async def open_first(self, records: list[ConversationRecord]) -> None:
        """Open the conversation asked for on the command line, else the most recent."""
        if self.initial is not None:
            await self.open_conversation((await self.convs.get(self.initial)).id)
        elif records:
            await self.open_conversation(records[0].id)

    # -- the conversation shown ------------------------------------------------------------

    async def open_conversation(self, conversation_id: str) -> None:
        """Show a conversation and follow it live."""
        self.current = conversation_id
        self.sidebar.select(conversation_id)
        self.status.set(conversation=conversation_id[:12], iteration="", usage="")
        await self.guard(lambda: actions.show_profile(self, conversation_id))
        replaced, self._watching = self._watching, (conversation_id, asyncio.Event())
        if replaced is not None:
            # Its follower is cancelled and will never set it: wake who waits, to look again.
            replaced[1].set()
        self.follow_conversation(conversation_id)

    async def attached(self, conversation_id: str) -> None:
        """Wait until the pane follows ``conversation_id`` (a send then shows from its start).

        The conversation may be opened again meanwhile (the list reports a new conversation and
        selects it): then the newest follower is the one to wait for.
        """
        while self._watching is not None and self._watching[0] == conversation_id:
            watching = self._watching
            await watching[1].wait()
            if self._watching is watching:
                return

    @work(group="watch", exclusive=True)
    async def follow_conversation(self, conversation_id: str) -> None:
        """Attach the watch first, then load the transcript: no gap, nothing twice."""

        async def run() -> None:
            async with self.convs.watch(conversation_id) as stream:
                transcript = await self.convs.inspect(conversation_id)
                self.arrived.clear()  # the previous conversation's: the transcript replaces them
                await self.timeline.load(transcript)
                await self.refresh_variables()
                if self._watching is not None and self._watching[0] == conversation_id:
                    self._watching[1].set()
                async for event in stream:
                    if isinstance(event, Resync):
                        self.follow_conversation(conversation_id)  # reload, then go on
                        return
                    self.apply(event)

        try:
            await self.guard(run)
        finally:  # a watch that failed must not leave a send waiting for it
            if self._watching is not None and self._watching[0] == conversation_id:
                self._watching[1].set()

    def apply(self, event: Event) -> None:
        """Take one event of the conversation shown; it is drawn with the others of its frame."""
        self.arrived.append(event)
        if len(self.arrived) == 1:
            self.call_later(self.show_arrived)

    def show_arrived(self) -> None:
        """Apply the queued events in one pass: the pane, then the status bar and the panels,
        each changed once however many events concern it (the frame paints them together)."""
        events, self.arrived = self.arrived, []
        if not events:
            return
        with self.batch_update():
            for event in events:
                self.timeline.apply(event)
            fields = status_fields(events)
            if fields:
                self.status.set(**fields)
            changes = [c for e in events if isinstance(e, VarsChanged) for c in e.changes]
            if changes:
                self.variables.update_rows(changes)
            for event in events:
                if isinstance(event, TitleChanged):
                    self.retitle(event.conversation_id, event.title)

    def retitle(self, conversation_id: str, title: str) -> None:
        """Show a conversation's new title in the sidebar."""
        entry = self.sidebar.entries.get(conversation_id)
        if entry is not None:
            entry.title = entry.label = title
            self.sidebar.upsert(entry)

    async def refresh_variables(self) -> None:
        """Reload the variables panel from the store (when it is shown)."""
        if self.current is None or self.variables.has_class("hidden"):
            return
        current = await self.convs.variables(self.current)
        self.variables.set_rows(
            {
                name: (v.version, v.type_name, v.preview)
                for name, v in current.items()
                if v.kind != "deleted"
            }
        )

    # -- sending and cancelling ------------------------------------------------------------

    async def ask_approval(self, request: ApprovalRequest) -> ApprovalAnswer:
        """Ask about an extension call in a modal (the turn waits; past its approval timeout
        the modal goes and the call is denied)."""
        answered: asyncio.Future[ApprovalAnswer] = asyncio.get_running_loop().create_future()

        def answer(given: ApprovalAnswer | None) -> None:
            if not answered.done():
                answered.set_result(given or ApprovalAnswer(False))

        screen = Approve(request)
        self.push_screen(screen, answer)
        try:
            return await answered
        finally:
            if not answered.done() and screen.is_active:
                screen.dismiss(ApprovalAnswer(False))

    @on(PromptArea.Submitted)
    def submitted(self, message: PromptArea.Submitted) -> None:
        self.send_turn(message.text)

    @work(group="send")
    async def send_turn(self, text: str) -> None:
        """Send a turn; the pane shows it through the watch, this reads only its own state."""

        async def run() -> None:
            if self.current is None:
                await actions.new_conversation(self)
            assert self.current is not None
            await self.attached(self.current)
            files, self.attachments = self.attachments, []
            try:
                handle = self.convs.send(self.current, text, files, approver=self.ask_approval)
            except BaseException:
                self.attachments = files + self.attachments  # nothing sent: kept for the next
                raise
            self.sending.add(handle)
            try:
                async for event in handle:
                    if isinstance(event, TurnQueued):
                        self.queued.add(handle)
                    else:
                        self.queued.discard(handle)
                    self.status.set(queued=bool(self.queued))
                    if isinstance(event, TurnFinished):
                        failure = turn_failure(event.status, event.error)
                        if failure is not None:
                            self.notify(failure[0], severity=failure[1], timeout=10)
                            if event.status == "failed":
                                self.status.set(endpoint="endpoint: failing")
                        elif event.status == "done":
                            self.status.set(endpoint="endpoint: ok")
            finally:
                self.sending.discard(handle)
                self.queued.discard(handle)
                self.status.set(queued=bool(self.queued))

        await self.guard(run)

    async def action_cancel_turn(self) -> None:
        """Esc: cancel the running turn of the conversation shown (or withdraw a queued one)."""
        if self.current is None:
            return
        cid = self.current
        try:
            if await self.convs.cancel(cid):
                self.notify("cancelling the running turn")
                return
        except Exception as exc:
            self.report(exc)
            return
        waiting = [h for h in self.queued if h.conversation_id == cid]
        for handle in waiting:
            await handle.cancel()
        if waiting:
            self.notify("withdrew the queued turn")
        elif self.sidebar.entries.get(cid, Entry(cid, None, 0)).running:
            self.notify("that turn runs in another process; cancel it there", severity="warning")

    # -- actions (the palette and bindings) ------------------------------------------------

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield from system_commands(self)

    @on(Sidebar.Chosen)
    async def chosen(self, message: Sidebar.Chosen) -> None:
        await self.open_conversation(message.conversation_id)

    @on(EarlierTurns.Wanted)
    def earlier_wanted(self, message: EarlierTurns.Wanted) -> None:
        positions = message.positions

        async def run() -> None:
            cid = self.current
            if cid is None:
                return
            parts = [await self.convs.inspect(cid, turn=p) for p in positions]
            if cid == self.current:
                turns = [t for part in parts for t in part.turns]
                versions = [v for part in parts for v in part.var_versions]
                await self.timeline.show_earlier(turns, versions)

        self.run_worker(self.guard(run), group="earlier")

    @on(IterationView.InspectRequested)
    def inspect_requested(self, message: IterationView.InspectRequested) -> None:
        self.run_worker(self.guard(lambda: actions.inspect(self, message.view)), group="inspect")

    @on(IterationView.FiguresRequested)
    def figures_requested(self, message: IterationView.FiguresRequested) -> None:
        view, found = message.view, message.found
        self.run_worker(self.guard(lambda: open_figures(self, view, found)), group="figures")

    @on(VariablesPanel.Chosen)
    def variable_chosen(self, message: VariablesPanel.Chosen) -> None:
        name = message.name
        self.run_worker(self.guard(lambda: actions.show_variable(self, name)), group="vars")

    def action_focus_prompt(self) -> None:
        self.query_one(PromptArea).focus()

    async def action_new(self) -> None:
        await self.guard(lambda: actions.new_conversation(self))
        self.query_one(PromptArea).focus()

    def action_rename(self) -> None:
        actions.rename(self)

    def action_delete(self) -> None:
        actions.delete(self)

    def action_help(self) -> None:
        actions.show_help(self)

    async def action_toggle_variables(self) -> None:
        self.variables.toggle_class("hidden")
        await self.guard(self.refresh_variables)

    def action_toggle_sidebar(self) -> None:
        self.sidebar.toggle_class("hidden")
