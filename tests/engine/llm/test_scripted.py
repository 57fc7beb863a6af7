"""ScriptedClient and RecordedClient: offline clients with the same interface as the real one."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from cove.engine.llm import Completion, LLMClient
from cove.engine.llm.scripted import RecordedClient, ScriptedClient
from cove.errors import ConfigError, ModelError
from cove.results import Usage

MESSAGES = [{"role": "system", "content": "s" * 40}, {"role": "user", "content": "hi"}]


class Deltas:
    def __init__(self) -> None:
        self.chunks: list[str] = []

    async def __call__(self, text: str) -> None:
        self.chunks.append(text)


def test_both_satisfy_the_client_interface() -> None:
    clients: list[LLMClient] = [ScriptedClient([]), RecordedClient([], [])]
    assert [c.model for c in clients] == ["scripted", "recorded"]


# -- ScriptedClient ------------------------------------------------------------------------------


async def test_replies_play_in_order_with_dicts_encoded_and_streamed() -> None:
    llm = ScriptedClient(["first reply text", {"answer": "second"}])
    deltas = Deltas()
    first = await llm.complete(MESSAGES, on_delta=deltas)
    assert first.text == "first reply text"
    assert len(deltas.chunks) > 1 and "".join(deltas.chunks) == first.text
    second = await llm.complete(MESSAGES)
    assert json.loads(second.text) == {"answer": "second"}
    assert llm.remaining == 0


async def test_usage_is_estimated_from_characters() -> None:
    completion = await ScriptedClient(["x" * 9]).complete(MESSAGES)
    assert completion == Completion(
        text="x" * 9,
        usage=Usage(11, 3),  # 42 characters of prompt
        model="scripted",
        duration_ms=completion.duration_ms,
        estimated=True,
    )


async def test_callable_replies_see_the_messages() -> None:
    def echo(messages: Sequence[Mapping[str, str]]) -> Mapping[str, str]:
        return {"answer": messages[-1]["content"].upper()}

    llm = ScriptedClient([echo])
    assert json.loads((await llm.complete(MESSAGES)).text) == {"answer": "HI"}


async def test_calls_are_recorded_with_kind_and_reasoning() -> None:
    llm = ScriptedClient(["a"], subquery_replies=["b"])
    await llm.complete(MESSAGES, reasoning="deep")
    await llm.complete([{"role": "user", "content": "q"}], kind="subquery")
    assert [(kind, reasoning) for kind, reasoning, _ in llm.calls] == [
        ("iteration", "deep"),
        ("subquery", "balanced"),
    ]
    assert llm.calls[0][2] == MESSAGES


async def test_subqueries_use_their_own_queue_or_callable() -> None:
    llm = ScriptedClient(["it"], subquery_replies=lambda messages: f"re: {messages[0]['content']}")
    assert (await llm.complete([{"role": "user", "content": "q1"}], kind="subquery")).text == (
        "re: q1"
    )
    assert (await llm.complete(MESSAGES)).text == "it"


async def test_running_out_raises_a_clear_model_error() -> None:
    llm = ScriptedClient(["only"], subquery_replies=[])
    await llm.complete(MESSAGES)
    with pytest.raises(ModelError, match="ran out of replies: all 1 iteration replies"):
        await llm.complete(MESSAGES)
    with pytest.raises(ModelError, match="ran out of sub-query replies"):
        await llm.complete(MESSAGES, kind="subquery")


async def test_subquery_without_a_script_is_an_error() -> None:
    with pytest.raises(ModelError, match="no sub-query replies"):
        await ScriptedClient(["x"]).complete(MESSAGES, kind="subquery")


async def test_a_scripted_model_error_is_raised() -> None:
    llm = ScriptedClient([ModelError("endpoint down", status=503, retryable=True), "after"])
    with pytest.raises(ModelError, match="endpoint down") as info:
        await llm.complete(MESSAGES)
    assert info.value.status == 503
    assert (await llm.complete(MESSAGES)).text == "after"


async def test_delay_lets_a_call_be_cancelled() -> None:
    llm = ScriptedClient(["slow"], delay_s=30)
    task = asyncio.create_task(llm.complete(MESSAGES))
    await asyncio.sleep(0)  # one step of the loop: the call begins and waits out its delay
    assert len(llm.calls) == 1 and not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_closed_scripted_client_refuses_calls() -> None:
    llm = ScriptedClient(["x"])
    await llm.aclose()
    with pytest.raises(ModelError, match="closed"):
        await llm.complete(MESSAGES)


async def test_from_file_reads_a_plain_list(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(["one", {"answer": "two"}]))
    llm = ScriptedClient.from_file(path)
    assert (await llm.complete(MESSAGES)).text == "one"
    assert json.loads((await llm.complete(MESSAGES)).text) == {"answer": "two"}


async def test_from_file_reads_replies_and_subquery_replies(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"replies": ["it"], "subquery_replies": ["sub"]}))
    llm = ScriptedClient.from_file(path)
    assert (await llm.complete(MESSAGES, kind="subquery")).text == "sub"
    assert (await llm.complete(MESSAGES)).text == "it"


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (None, "cannot read reply script"),
        ("{not json", "cannot read reply script"),
        ('{"answers": []}', "must be a JSON list of replies"),
        ('{"replies": [], "subquery_replies": "x"}', "subquery_replies must be a list"),
    ],
)
def test_from_file_rejects_bad_scripts(tmp_path: Path, content: str | None, fragment: str) -> None:
    path = tmp_path / "script.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError, match=fragment):
        ScriptedClient.from_file(path)


# -- RecordedClient ------------------------------------------------------------------------------


async def test_recorded_replies_replay_in_order_per_kind() -> None:
    llm = RecordedClient(["i1", "i2"], ["s1"])
    deltas = Deltas()
    assert (await llm.complete(MESSAGES, on_delta=deltas)).text == "i1"
    assert (await llm.complete(MESSAGES, kind="subquery")).text == "s1"
    completion = await llm.complete(MESSAGES)
    assert completion.text == "i2" and completion.estimated is True
    assert deltas.chunks == ["i1"]


async def test_a_failed_recorded_subquery_fails_again() -> None:
    llm = RecordedClient([], [None, "ok"])
    with pytest.raises(ModelError, match="had failed when it was recorded"):
        await llm.complete(MESSAGES, kind="subquery")
    assert (await llm.complete(MESSAGES, kind="subquery")).text == "ok"


@pytest.mark.parametrize("kind", ["iteration", "subquery"])
async def test_replay_past_the_record_raises(kind: str) -> None:
    llm = RecordedClient([], [])
    with pytest.raises(ModelError, match="replay ran past the recorded replies"):
        await llm.complete(MESSAGES, kind="iteration" if kind == "iteration" else "subquery")


async def test_closed_recorded_client_refuses_calls() -> None:
    llm = RecordedClient(["x"], [])
    await llm.aclose()
    with pytest.raises(ModelError, match="closed"):
        await llm.complete(MESSAGES)
