"""``Extension.observe``: an extension sees the events of its conversations' turns, in order,
without holding a turn up; a failing observer harms nothing; a conversation without the
extension is not observed. Real workers, a scripted model."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cove.conversation import Conversations, scripted_factory
from cove.environment.extensions.installed import Catalog, InstalledExtension, builtin_catalog
from cove.events import Event, ModelDelta, TurnFinished
from cove.plugins import Extension
from tests.scripted import reply, settings_for

pytestmark = pytest.mark.slow  # a sandbox worker


class Log:
    """An observer that waits at the gate before taking each event in."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.seen: list[Event] = []
        self.finished = asyncio.Event()

    async def observe(self, event: Event) -> None:
        await self.gate.wait()
        self.seen.append(event)
        if isinstance(event, TurnFinished):
            self.finished.set()


def broken(event: Event) -> None:
    raise RuntimeError("this observer always fails")


def catalog_with(*extensions: Extension) -> Catalog:
    added = tuple(InstalledExtension(e, "tests") for e in extensions)
    return Catalog(builtin_catalog().installed + added)


async def test_an_extension_observes_its_conversations_turns_in_order(tmp_path: Path) -> None:
    log = Log()
    watcher = Extension(name="audit", doc="Keeps a log of the turns.", observe=log.observe)
    failing = Extension(name="failing", doc="An observer that fails.", observe=broken)
    factory = scripted_factory(
        [reply(["x = 6 * 7"]), reply(answer="{{x}}"), reply(answer="unobserved")]
    )
    catalog = catalog_with(watcher, failing)
    async with await Conversations.open(
        settings_for(tmp_path), llm_factory=factory, catalog=catalog
    ) as convs:
        cid = (await convs.create()).id
        own = [e async for e in convs.send(cid, "six times seven")]
        # The turn finished while the observer was still held at its gate.
        assert isinstance(own[-1], TurnFinished) and own[-1].answer == "42"
        assert log.seen == []
        log.gate.set()
        await asyncio.wait_for(log.finished.wait(), 30)

        plain = (await convs.create(extensions=["core", "files", "llm"])).id
        [e async for e in convs.send(plain, "not watched")]
    published = [e for e in own if e.seq and not isinstance(e, ModelDelta)]
    assert [(e.type, e.seq) for e in log.seen] == [(e.type, e.seq) for e in published]
    assert {e.conversation_id for e in log.seen} == {cid}
    assert [e.type for e in log.seen][:2] == ["turn_started", "iteration_started"]
