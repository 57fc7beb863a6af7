"""Fork titles: a retry, an edit and a branch of the same turn read differently in a list."""

from __future__ import annotations

from pathlib import Path

from cove.conversation import Conversations, scripted_factory
from cove.conversation.fork_titles import TITLE_CHARS, fork_title
from tests.scripted import reply, settings_for


def test_what_a_fork_does_comes_first() -> None:
    def title(at: int, asked: str | None, request: str | None) -> str:
        return fork_title("Trip plan", at, asked=asked, request=request)

    assert title(1, "where to?", "where to?") == "Retry of turn 2 · Trip plan"
    assert title(1, "where to?", "  where to?\n") == "Retry of turn 2 · Trip plan"
    assert title(1, "where to?", "and by train?") == "Edit of turn 2: “and by train?” · Trip plan"
    assert title(0, "where to?", "where to?") == "Retry of turn 1 · Trip plan"
    assert title(2, "where to?", None) == "Branch from turn 2 · Trip plan"
    assert title(0, "where to?", None) == "Branch before turn 1 · Trip plan"
    assert title(3, None, "what next?") == "Branch from turn 3 · Trip plan"  # nothing to redo
    long = title(1, "q", "a request far longer than what fits in a name\nover lines")
    assert long == "Edit of turn 2: “a request far longer than what…” · Trip plan"


def test_a_title_a_sibling_has_gets_a_number_and_stays_bounded() -> None:
    taken = ["Retry of turn 2 · Trip plan", "Retry of turn 2 · Trip plan (2)"]
    assert (
        fork_title("Trip plan", 1, asked="q", request="q", taken=taken)
        == "Retry of turn 2 · Trip plan (3)"
    )
    parent = "x" * 300
    first = fork_title(parent, 1, asked="q", request="q")
    second = fork_title(parent, 1, asked="q", request="q", taken=[first])
    assert len(first) == len(second) == TITLE_CHARS
    assert first.startswith("Retry of turn 2 · xxx") and second.endswith("xx (2)")


async def test_forks_are_titled_by_what_they_do(tmp_path: Path) -> None:
    factory = scripted_factory([reply([], "ok") for _ in range(3)])
    async with await Conversations.open(settings_for(tmp_path), llm_factory=factory) as convs:
        conv = await convs.create(title="Trip plan")
        for text in ("where to?", "how long?"):
            async for _ in convs.send(conv.id, text):
                pass
        made = [
            await convs.fork(conv.id, 1, request="how long?"),
            await convs.fork(conv.id, 1, request="how long by train?"),
            await convs.fork(conv.id, 1),
            await convs.fork(conv.id, 1, request="how long?"),
            await convs.fork(conv.id, 0, request="where to?"),
            await convs.fork(conv.id, 2, request="and the cost?"),
        ]
        titles = [fork.title for fork in made]
        assert titles == [
            "Retry of turn 2 · Trip plan",
            "Edit of turn 2: “how long by train?” · Trip plan",
            "Branch from turn 1 · Trip plan",
            "Retry of turn 2 · Trip plan (2)",
            "Retry of turn 1 · Trip plan",
            "Branch from turn 2 · Trip plan",  # no turn 3 to ask again
        ]
        nested = await convs.fork(made[0].id, 1)  # a branch of the retry
        assert nested.title == "Branch from turn 1 · Retry of turn 2 · Trip plan"
        assert [f.label for f in await convs.forks(conv.id)] == [
            "Retry of turn 1 · Trip plan",
            *titles[:4],
            titles[5],
        ]
