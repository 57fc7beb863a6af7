"""A conversation's model and a turn's model, what the endpoint offers, and the fallback list:
the real ``openai`` client against fake endpoints that fail the first model."""

from __future__ import annotations

from pathlib import Path

import pytest

from cove.config import Endpoint, Price, Settings
from cove.conversation import Conversations, timeline
from cove.errors import CoveError, ModelError
from cove.events import Event, ModelReply, ModelRetry, TurnFinished
from tests.conftest import FAKE_API_KEY
from tests.fakes.openai_server import FakeOpenAI, Fault
from tests.scripted import reply

pytestmark = pytest.mark.slow  # sandbox workers started per test


async def sent(convs: Conversations, conversation_id: str, text: str, **kw: object) -> list[Event]:
    events = [e async for e in convs.send(conversation_id, text, **kw)]  # type: ignore[arg-type]
    assert isinstance(events[-1], TurnFinished), events
    return events


async def test_the_conversation_remembers_its_model_and_a_turn_may_name_another(
    fake_openai: FakeOpenAI, openai_settings: Settings
) -> None:
    fake_openai.listed = ["fake-model", "big-model", "small-model"]
    fake_openai.respond_with(reply([], "ok"))
    async with Conversations.open(openai_settings) as convs:
        assert await convs.models() == ["big-model", "fake-model", "small-model"]
        conv = await convs.create(model="big-model")
        await sent(convs, conv.id, "one")
        await sent(convs, conv.id, "two", model="small-model")  # this turn only
        await sent(convs, conv.id, "three")
        await convs.set_profile(conv.id, model=None)  # back to the configured model
        await sent(convs, conv.id, "four")
        turns = (await convs.inspect(conv.id)).turns
    asked = [r["model"] for r in fake_openai.requests]
    assert asked == ["big-model", "small-model", "big-model", "fake-model"]
    assert [t.model for t in turns] == asked
    assert [it.model for t in turns for it in t.iterations] == asked


async def test_an_unknown_model_or_a_failed_listing_is_refused_and_nothing_changes(
    fake_openai: FakeOpenAI, openai_settings: Settings
) -> None:
    fake_openai.listed = ["fake-model", "big-model"]
    async with Conversations.open(openai_settings) as convs:
        conv = await convs.create(model="big-model")
        with pytest.raises(CoveError, match=r"does not offer the model 'nope'.*big-model"):
            await convs.set_profile(conv.id, model="nope")
        with pytest.raises(CoveError, match="does not offer"):
            await convs.create(model="nope")
        fake_openai.models_status = 404
        with pytest.raises(ModelError, match=r"cannot check the model 'other'.*nothing was"):
            await convs.set_profile(conv.id, model="other")
        with pytest.raises(ModelError, match="404"):
            await convs.models()
        # The configured model needs no listing.
        assert (await convs.set_profile(conv.id, model="fake-model")).model == "fake-model"
        await convs.set_profile(conv.id, model="fake-model", instructions="kept")
        with pytest.raises(ModelError):
            await convs.set_profile(conv.id, model="other", instructions="lost?")
        profile = await convs.profile(conv.id)
        assert await convs.list() and len(await convs.list()) == 1
    assert (profile.model, profile.instructions) == ("fake-model", "kept")


def replies_models(replies: list[ModelReply]) -> list[str | None]:
    return [r.model for r in replies]


@pytest.fixture
def backup_endpoint() -> FakeOpenAI:
    with FakeOpenAI(model="backup-model") as server:
        yield server  # type: ignore[misc]


async def test_when_the_first_model_is_exhausted_the_turn_goes_on_with_the_next_on_its_endpoint(
    fake_openai: FakeOpenAI, backup_endpoint: FakeOpenAI, openai_settings: Settings, tmp_path: Path
) -> None:
    prices = {"fake-model": Price(1.0, 1.0), "backup-model": Price(100.0, 200.0)}
    settings = openai_settings.replace(
        models=("fake-model", "backup-model"),
        endpoints={"backup-model": Endpoint(backup_endpoint.base_url, "sk-backup")},
        prices=prices,
        max_retries=1,
    )
    # The first model: 503 twice (one try and one retry), so its retries are exhausted.
    fake_openai.add_faults(Fault.server_error(503), Fault.server_error(503))
    backup_endpoint.add_replies(reply(["x = 41 + 1"]), reply([], "x is {{x}}"))
    async with Conversations.open(settings) as convs:
        assert await convs.models() == ["backup-model", "fake-model"]
        conv = await convs.create()
        events = await sent(convs, conv.id, "go")
        transcript = await convs.inspect(conv.id)
        turn = transcript.turns[0]
        rebuilt = timeline(transcript)  # what another process's watcher is shown
    first, second = turn.iterations
    # The second call goes straight to the backup: the first model is cooling down.
    assert (first.model, second.model) == ("backup-model", "backup-model")
    assert len(fake_openai.requests) == 2  # the two failed tries, nothing after
    assert turn.model == "fake-model"  # the model the turn asked for
    replies = [e for e in events if isinstance(e, ModelReply)]
    assert [r.model for r in replies] == ["backup-model", "backup-model"]
    assert [r.model for r in rebuilt if isinstance(r, ModelReply)] == replies_models(replies)
    fell_back = [e for e in events if isinstance(e, ModelRetry) and "trying" in e.reason]
    assert len(fell_back) == 1 and "fake-model is unavailable" in fell_back[0].reason
    assert "backup-model" in fell_back[0].reason
    # The backup endpoint got its own key; the cost follows the model that answered.
    assert backup_endpoint.headers[0]["authorization"] == "Bearer sk-backup"
    assert FAKE_API_KEY not in str(backup_endpoint.headers)
    for iteration in (first, second):
        assert iteration.usage.cost_usd == pytest.approx(
            (iteration.usage.tokens_in * 100.0 + iteration.usage.tokens_out * 200.0) / 1e6
        )
    finished = events[-1]
    assert isinstance(finished, TurnFinished) and finished.answer == "x is 42"
    assert finished.cost_known and turn.cost_known
    assert turn.usage.cost_usd == pytest.approx(first.usage.cost_usd + second.usage.cost_usd)


async def test_a_turn_answered_by_an_unpriced_fallback_model_has_an_unknown_cost(
    fake_openai: FakeOpenAI, backup_endpoint: FakeOpenAI, openai_settings: Settings
) -> None:
    settings = openai_settings.replace(
        models=("fake-model", "backup-model"),
        endpoints={"backup-model": Endpoint(backup_endpoint.base_url, "sk-backup")},
        prices={"fake-model": Price(1.0, 1.0)},  # the backup has no price
        max_retries=0,
    )
    fake_openai.add_faults(Fault.server_error(503))
    backup_endpoint.add_replies(reply([], "from the backup"))
    async with Conversations.open(settings) as convs:
        conv = await convs.create()
        events = await sent(convs, conv.id, "go")
        (turn,) = (await convs.inspect(conv.id)).turns
    finished = events[-1]
    assert isinstance(finished, TurnFinished) and finished.answer == "from the backup"
    assert not finished.cost_known and not turn.cost_known  # not "$0.0000"


async def test_a_failure_another_model_would_not_cure_is_not_sent_to_the_next(
    fake_openai: FakeOpenAI, backup_endpoint: FakeOpenAI, openai_settings: Settings
) -> None:
    settings = openai_settings.replace(
        models=("fake-model", "backup-model"),
        endpoints={"backup-model": Endpoint(backup_endpoint.base_url, "sk-backup")},
        max_retries=0,
    )
    fake_openai.add_faults(Fault.error(401, "bad key"))
    async with Conversations.open(settings) as convs:
        conv = await convs.create()
        events = await sent(convs, conv.id, "go")
    finished = events[-1]
    assert isinstance(finished, TurnFinished) and finished.status != "done"
    assert backup_endpoint.requests == []
