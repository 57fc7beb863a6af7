"""OpenAIClient over real HTTP against the fake endpoint, with the real ``openai`` package."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cove.config import Settings
from cove.engine.llm import Retry
from cove.engine.llm.openai import JSON_SCHEMA_FORMAT, OpenAIClient, redact, secret_pattern
from cove.engine.protocol import parse_reply
from cove.errors import ModelError
from tests.conftest import FAKE_API_KEY
from tests.fakes.openai_server import MALFORMED_REPLY, FakeOpenAI, Fault

MESSAGES = [
    {"role": "system", "content": "You write code."},
    {"role": "user", "content": "What is 2 + 2?"},
]
REPLY = json.dumps({"thinking": "add", "code": ["2 + 2"], "answer": None})


@pytest.fixture
async def client(openai_settings: Settings) -> AsyncIterator[OpenAIClient]:
    llm = OpenAIClient(openai_settings.model)
    yield llm
    await llm.aclose()


class Deltas:
    def __init__(self) -> None:
        self.chunks: list[str] = []

    async def __call__(self, text: str) -> None:
        self.chunks.append(text)


# -- streaming and usage -------------------------------------------------------------------------


async def test_streamed_deltas_arrive_in_order_and_join_to_the_text(
    client: OpenAIClient, fake_openai: FakeOpenAI
) -> None:
    fake_openai.chunk_size = 5
    fake_openai.add_replies(REPLY)
    deltas = Deltas()
    completion = await client.complete(MESSAGES, on_delta=deltas)
    assert completion.text == REPLY
    assert len(deltas.chunks) > 3
    assert "".join(deltas.chunks) == REPLY
    assert parse_reply(completion.text).blocks[0].code == "2 + 2"


async def test_usage_comes_from_the_api(client: OpenAIClient, fake_openai: FakeOpenAI) -> None:
    fake_openai.add_replies("x" * 40)
    completion = await client.complete(MESSAGES)
    prompt = sum(len(m["content"]) for m in MESSAGES)
    assert (completion.usage.tokens_in, completion.usage.tokens_out) == ((prompt + 3) // 4, 10)
    assert completion.estimated is False
    assert completion.model == "fake-model"
    assert fake_openai.requests[0]["stream_options"] == {"include_usage": True}


async def test_missing_usage_is_estimated(client: OpenAIClient, fake_openai: FakeOpenAI) -> None:
    fake_openai.send_usage = False
    fake_openai.add_replies("y" * 41)
    completion = await client.complete(MESSAGES)
    assert completion.estimated is True
    assert completion.usage.tokens_out == 11


async def test_iteration_asks_for_the_json_schema_and_subquery_for_nothing(
    client: OpenAIClient, fake_openai: FakeOpenAI
) -> None:
    fake_openai.add_replies(REPLY, "free text")
    await client.complete(MESSAGES)
    sub = await client.complete([{"role": "user", "content": "summarise"}], kind="subquery")
    assert sub.text == "free text"
    first, second = fake_openai.requests
    assert first["response_format"] == JSON_SCHEMA_FORMAT
    assert first["model"] == "fake-model" and first["messages"] == MESSAGES
    assert "response_format" not in second
    assert "reasoning_effort" not in first  # off unless settings.reasoning_effort


async def test_empty_reply_is_returned_not_raised(
    client: OpenAIClient, fake_openai: FakeOpenAI
) -> None:
    fake_openai.add_faults(Fault.empty())
    assert (await client.complete(MESSAGES)).text == ""


async def test_malformed_reply_text_is_returned_for_the_parser(
    client: OpenAIClient, fake_openai: FakeOpenAI
) -> None:
    fake_openai.add_faults(Fault.malformed())
    assert (await client.complete(MESSAGES)).text == MALFORMED_REPLY


# -- retries -------------------------------------------------------------------------------------


class Retries:
    """Collects what ``on_retry`` is told."""

    def __init__(self) -> None:
        self.told: list[Retry] = []

    async def __call__(self, retry: Retry) -> None:
        self.told.append(retry)


async def test_each_retry_is_told_before_it_is_sent_with_what_failed(
    client: OpenAIClient, fake_openai: FakeOpenAI
) -> None:
    fake_openai.add_faults(Fault.server_error(503), Fault.rate_limit(retry_after=0.01))
    fake_openai.add_replies(REPLY)
    retries = Retries()
    assert (await client.complete(MESSAGES, on_retry=retries)).text == REPLY
    assert retries.told == [
        Retry(1, 2, "server error (HTTP 503)"),
        Retry(2, 2, "rate limited (HTTP 429)"),
    ]


async def test_a_failure_past_the_retries_or_not_retried_is_never_told(
    client: OpenAIClient, fake_openai: FakeOpenAI
) -> None:
    fake_openai.add_faults(*[Fault.server_error(502)] * 3, Fault.error(404, "no such model"))
    retries = Retries()
    with pytest.raises(ModelError):
        await client.complete(MESSAGES, on_retry=retries)
    assert [r.attempt for r in retries.told] == [1, 2]  # the third failure gives up
    with pytest.raises(ModelError):
        await client.complete(MESSAGES, on_retry=retries)
    assert len(retries.told) == 2


async def test_a_reply_that_broke_off_or_never_came_is_told_as_a_retry(
    openai_settings: Settings, fake_openai: FakeOpenAI
) -> None:
    llm = OpenAIClient(openai_settings.replace(request_timeout_s=0.3).model)
    fake_openai.add_faults(Fault.drop(after_chunks=1), Fault.stall(30))
    fake_openai.add_replies(REPLY, REPLY)
    retries = Retries()
    assert (await llm.complete(MESSAGES, on_retry=retries)).text == REPLY
    await llm.aclose()
    assert retries.told == [Retry(1, 2, "the reply broke off"), Retry(2, 2, "no response")]


async def test_rate_limit_then_success_is_retried(
    client: OpenAIClient, fake_openai: FakeOpenAI
) -> None:
    fake_openai.add_faults(Fault.rate_limit(retry_after=0.01))
    fake_openai.add_replies(REPLY)
    assert (await client.complete(MESSAGES)).text == REPLY
    assert len(fake_openai.requests) == 2


async def test_a_retry_after_too_long_to_wait_fails_at_once_with_a_clear_error(
    client: OpenAIClient, fake_openai: FakeOpenAI
) -> None:
    fake_openai.add_faults(Fault.rate_limit(retry_after=3600))
    fake_openai.add_replies(REPLY)
    with pytest.raises(ModelError) as info:
        await client.complete(MESSAGES)
    assert info.value.status == 429 and info.value.retryable is True
    assert "answered 429: Rate limit reached" in str(info.value)
    assert "gave up" not in str(info.value)
    assert len(fake_openai.requests) == 1


async def test_rate_limits_beyond_max_retries_give_up_with_a_clear_error(
    client: OpenAIClient, fake_openai: FakeOpenAI
) -> None:
    fake_openai.add_faults(*[Fault.rate_limit(retry_after=0.01)] * 3)
    fake_openai.add_replies(REPLY)
    with pytest.raises(ModelError) as info:
        await client.complete(MESSAGES)
    assert info.value.status == 429
    assert "gave up after 3 attempts" in str(info.value)
    assert len(fake_openai.requests) == 3


async def test_a_broken_stream_and_server_errors_share_one_retry_budget(
    client: OpenAIClient, fake_openai: FakeOpenAI
) -> None:
    fake_openai.add_faults(Fault.drop(after_chunks=1), Fault.server_error(502))
    fake_openai.add_faults(Fault.server_error(502))
    fake_openai.add_replies(REPLY, REPLY)
    with pytest.raises(ModelError) as info:
        await client.complete(MESSAGES)
    assert info.value.status == 502 and "gave up after 3 attempts" in str(info.value)
    assert len(fake_openai.requests) == 3  # max_retries=2


@pytest.mark.parametrize("value", ["Wed, 21 Oct 2015 07:28:00 GMT", "whenever you like", "-5"])
async def test_retry_after_as_a_past_date_or_garbage_still_retries(
    client: OpenAIClient, fake_openai: FakeOpenAI, value: str
) -> None:
    fake_openai.add_faults(Fault("status", 429, "slow down", headers=(("retry-after", value),)))
    fake_openai.add_replies(REPLY)
    assert (await client.complete(MESSAGES)).text == REPLY
    assert len(fake_openai.requests) == 2


async def test_server_error_storm_beyond_max_retries_raises_with_status(
    client: OpenAIClient, fake_openai: FakeOpenAI
) -> None:
    fake_openai.add_faults(*[Fault.server_error(503)] * 3)
    fake_openai.add_replies(REPLY)
    with pytest.raises(ModelError) as info:
        await client.complete(MESSAGES)
    assert info.value.status == 503
    assert info.value.retryable is True
    assert "503" in str(info.value) and "gave up after 3 attempts" in str(info.value)
    assert len(fake_openai.requests) == 3  # max_retries=2: one try plus two retries


async def test_dropped_connection_mid_stream_is_retried(
    client: OpenAIClient, fake_openai: FakeOpenAI
) -> None:
    fake_openai.chunk_size = 4
    fake_openai.add_faults(Fault.drop(after_chunks=2))
    fake_openai.add_replies(REPLY, REPLY)
    deltas = Deltas()
    completion = await client.complete(MESSAGES, on_delta=deltas)
    assert completion.text == REPLY
    # The broken attempt's chunks came first; the completed text is authoritative.
    assert "".join(deltas.chunks).endswith(REPLY)
    assert len(fake_openai.requests) == 2


async def test_garbled_body_is_retried(client: OpenAIClient, fake_openai: FakeOpenAI) -> None:
    fake_openai.add_faults(Fault.garbage())
    fake_openai.add_replies(REPLY)
    assert (await client.complete(MESSAGES)).text == REPLY


async def test_garbled_body_every_time_raises(
    client: OpenAIClient, fake_openai: FakeOpenAI
) -> None:
    fake_openai.add_faults(*[Fault.garbage()] * 3)
    with pytest.raises(ModelError, match="not valid JSON"):
        await client.complete(MESSAGES)


async def test_a_reply_of_no_chat_completion_shape_is_retried_then_named(
    client: OpenAIClient, fake_openai: FakeOpenAI
) -> None:
    fake_openai.add_faults(Fault.shapeless())
    fake_openai.add_replies(REPLY)
    assert (await client.complete(MESSAGES)).text == REPLY
    fake_openai.add_faults(*[Fault.shapeless()] * 3)
    with pytest.raises(ModelError) as info:
        await client.complete(MESSAGES)
    assert "sent a reply whose delta is not a JSON object" in str(info.value)
    assert "gave up after 3 attempts" in str(info.value) and info.value.retryable is True


async def test_a_plain_reply_of_no_chat_completion_shape_fails_clearly(
    client: OpenAIClient, fake_openai: FakeOpenAI
) -> None:
    fake_openai.unsupported.add("stream")
    fake_openai.add_faults(*[Fault.shapeless()] * 3)
    with pytest.raises(ModelError, match="sent a reply whose choices are not a list") as info:
        await client.complete(MESSAGES)
    assert "gave up after 3 attempts" in str(info.value)


async def test_an_error_event_mid_stream_is_retried_then_told_with_its_message(
    client: OpenAIClient, fake_openai: FakeOpenAI
) -> None:
    fake_openai.chunk_size = 4
    fake_openai.add_faults(Fault.stream_error("the model is overloaded", after_chunks=2))
    fake_openai.add_replies(REPLY, REPLY)
    deltas = Deltas()
    assert (await client.complete(MESSAGES, on_delta=deltas)).text == REPLY
    assert "".join(deltas.chunks).endswith(REPLY)
    fake_openai.add_faults(*[Fault.stream_error("the model is overloaded")] * 3)
    fake_openai.add_replies(REPLY, REPLY, REPLY)
    with pytest.raises(ModelError, match="failed mid-reply: the model is overloaded"):
        await client.complete(MESSAGES)


async def test_client_error_is_not_retried(client: OpenAIClient, fake_openai: FakeOpenAI) -> None:
    fake_openai.add_faults(Fault.error(404, "The model `fake-model` does not exist"))
    with pytest.raises(ModelError) as info:
        await client.complete(MESSAGES)
    assert info.value.status == 404 and info.value.retryable is False
    assert "does not exist" in str(info.value) and "check the base URL" in str(info.value)
    assert len(fake_openai.requests) == 1


async def test_unknown_bad_request_is_not_a_fallback(
    client: OpenAIClient, fake_openai: FakeOpenAI
) -> None:
    fake_openai.add_faults(Fault.error(400, "messages: too many tokens"))
    with pytest.raises(ModelError) as info:
        await client.complete(MESSAGES)
    assert info.value.status == 400
    assert len(fake_openai.requests) == 1


async def test_dead_endpoint_fails_with_a_readable_error(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings = Settings.load(env={}, data_dir=tmp_path).replace(
        base_url=f"http://127.0.0.1:{port}/v1", max_retries=1, retry_base_delay_s=0.01
    )
    llm = OpenAIClient(settings.model)
    with pytest.raises(ModelError) as info:
        await llm.complete(MESSAGES)
    await llm.aclose()
    assert f"cannot reach the model endpoint http://127.0.0.1:{port}/v1" in str(info.value)
    assert info.value.status is None and info.value.retryable is True


async def test_stall_longer_than_the_timeout_fails_after_retries(
    openai_settings: Settings, fake_openai: FakeOpenAI
) -> None:
    llm = OpenAIClient(openai_settings.replace(request_timeout_s=0.3, max_retries=1).model)
    fake_openai.add_faults(Fault.stall(30), Fault.stall(30))
    with pytest.raises(ModelError, match=r"did not answer within 0.3 s \(gave up after 2"):
        await llm.complete(MESSAGES)
    await llm.aclose()


async def test_stall_mid_stream_is_a_timeout_then_retried(
    openai_settings: Settings, fake_openai: FakeOpenAI
) -> None:
    llm = OpenAIClient(openai_settings.replace(request_timeout_s=0.3, max_retries=1).model)
    fake_openai.add_faults(Fault.stall(30, after_chunks=1))
    fake_openai.add_replies(REPLY, REPLY)
    assert (await llm.complete(MESSAGES)).text == REPLY
    await llm.aclose()
    assert len(fake_openai.requests) == 2


async def test_client_is_an_async_context_manager(
    openai_settings: Settings, fake_openai: FakeOpenAI
) -> None:
    fake_openai.add_replies(REPLY)
    async with OpenAIClient(openai_settings.model) as llm:
        assert (await llm.complete(MESSAGES)).text == REPLY
    with pytest.raises(ModelError, match="closed"):
        await llm.complete(MESSAGES)


async def test_closed_client_refuses_calls(client: OpenAIClient) -> None:
    await client.aclose()
    with pytest.raises(ModelError, match="closed"):
        await client.complete(MESSAGES)


# -- falling back, and remembering it ------------------------------------------------------------


async def test_json_schema_rejected_falls_back_to_json_object_and_remembers(
    client: OpenAIClient, fake_openai: FakeOpenAI
) -> None:
    fake_openai.unsupported.add("json_schema")
    fake_openai.add_replies(REPLY, REPLY)
    assert (await client.complete(MESSAGES)).text == REPLY
    assert (await client.complete(MESSAGES)).text == REPLY
    formats = [r["response_format"]["type"] for r in fake_openai.requests]
    assert formats == ["json_schema", "json_object", "json_object"]


async def test_no_response_format_at_all_when_both_are_rejected(
    client: OpenAIClient, fake_openai: FakeOpenAI
) -> None:
    fake_openai.unsupported.update({"json_schema", "json_object"})
    fake_openai.add_replies(REPLY, REPLY)
    await client.complete(MESSAGES)
    await client.complete(MESSAGES)
    formats = [r.get("response_format", {}).get("type") for r in fake_openai.requests]
    assert formats == ["json_schema", "json_object", None, None]


async def test_reasoning_effort_is_mapped_then_dropped_when_rejected(
    openai_settings: Settings, fake_openai: FakeOpenAI
) -> None:
    llm = OpenAIClient(openai_settings.replace(reasoning_effort=True).model)
    fake_openai.add_replies(REPLY, REPLY, REPLY)
    await llm.complete(MESSAGES, reasoning="deep")
    fake_openai.unsupported.add("reasoning_effort")
    await llm.complete(MESSAGES, reasoning="quick")
    await llm.complete(MESSAGES, reasoning="quick")
    await llm.aclose()
    efforts = [r.get("reasoning_effort") for r in fake_openai.requests]
    assert efforts == ["high", "low", None, None]


async def test_stream_options_rejected_is_dropped_and_usage_estimated(
    client: OpenAIClient, fake_openai: FakeOpenAI
) -> None:
    fake_openai.unsupported.add("stream_options")
    fake_openai.add_replies(REPLY, REPLY)
    assert (await client.complete(MESSAGES)).estimated is True
    await client.complete(MESSAGES)
    assert ["stream_options" in r for r in fake_openai.requests] == [True, False, False]


async def test_streaming_rejected_falls_back_to_a_plain_request(
    client: OpenAIClient, fake_openai: FakeOpenAI
) -> None:
    fake_openai.unsupported.add("stream")
    fake_openai.add_replies(REPLY, REPLY)
    deltas = Deltas()
    completion = await client.complete(MESSAGES, on_delta=deltas)
    assert completion.text == REPLY and deltas.chunks == [REPLY]
    assert completion.estimated is False
    await client.complete(MESSAGES)
    assert [bool(r.get("stream")) for r in fake_openai.requests] == [True, False, False]


async def test_a_one_off_rejection_also_steps_down(
    client: OpenAIClient, fake_openai: FakeOpenAI
) -> None:
    fake_openai.add_faults(Fault.reject("json_schema"))
    fake_openai.add_replies(REPLY)
    await client.complete(MESSAGES)
    assert fake_openai.requests[-1]["response_format"] == {"type": "json_object"}


# -- secrets -------------------------------------------------------------------------------------


async def test_api_key_is_sent_but_never_leaked(
    client: OpenAIClient, fake_openai: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    fake_openai.add_faults(
        Fault.error(401, f"Incorrect API key provided: {FAKE_API_KEY}"),
        Fault.error(500, f"internal error for key {FAKE_API_KEY}"),
        Fault.error(500, f"internal error for key {FAKE_API_KEY}"),
        Fault.error(500, f"internal error for key {FAKE_API_KEY}"),
    )
    errors: list[ModelError] = []
    with caplog.at_level(logging.DEBUG):
        for _ in range(2):
            with pytest.raises(ModelError) as info:
                await client.complete(MESSAGES)
            errors.append(info.value)
    assert fake_openai.headers[0]["authorization"] == f"Bearer {FAKE_API_KEY}"
    assert errors[0].status == 401 and "[redacted]" in str(errors[0])
    assert errors[1].status == 500
    for error in errors:
        assert FAKE_API_KEY not in str(error) and FAKE_API_KEY not in repr(error)
        assert error.__cause__ is None or FAKE_API_KEY not in str(error.__cause__)
        assert error.__context__ is None or FAKE_API_KEY not in str(error.__context__)
    assert caplog.records  # the retries were logged
    for record in caplog.records:
        assert FAKE_API_KEY not in record.getMessage()
    assert FAKE_API_KEY not in repr(client)


async def test_no_key_uses_a_placeholder(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    settings = Settings.load(env={}, data_dir=tmp_path).replace(
        base_url=fake_openai.base_url, api_key=None
    )
    llm = OpenAIClient(settings.model)
    fake_openai.add_replies(REPLY)
    assert (await llm.complete(MESSAGES)).text == REPLY
    await llm.aclose()
    assert fake_openai.headers[0]["authorization"] == "Bearer not-needed"


async def test_credentials_in_the_base_url_stay_out_of_messages(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings = Settings.load(env={}, data_dir=tmp_path).replace(
        base_url=f"http://user:hunter2@127.0.0.1:{port}/v1", max_retries=0
    )
    llm = OpenAIClient(settings.model)
    with pytest.raises(ModelError) as info:
        await llm.complete(MESSAGES)
    await llm.aclose()
    assert "hunter2" not in str(info.value) and "hunter2" not in repr(llm)


# -- the fake server standalone ------------------------------------------------------------------


async def test_standalone_fake_server_serves_a_script(tmp_path: Path) -> None:
    script = tmp_path / "replies.json"
    script.write_text(json.dumps({"replies": [{"answer": "4"}], "subquery_replies": ["sub"]}))
    process = await asyncio.create_subprocess_exec(
        *[
            sys.executable,
            "-m",
            "tests.fakes.openai_server",
            "--port",
            "0",
            "--script",
            str(script),
        ],
        stdout=asyncio.subprocess.PIPE,
        cwd=Path(__file__).parents[3],
    )
    try:
        assert process.stdout is not None
        line = (await process.stdout.readline()).decode()
        assert line.startswith("listening on http://127.0.0.1:")
        settings = Settings.load(env={}, data_dir=tmp_path).replace(
            base_url=line.split()[-1], max_retries=0
        )
        llm = OpenAIClient(settings.model)
        assert json.loads((await llm.complete(MESSAGES)).text) == {"answer": "4"}
        assert (await llm.complete(MESSAGES, kind="subquery")).text == "sub"
        with pytest.raises(ModelError, match="no more replies"):
            await llm.complete(MESSAGES)
        await llm.aclose()
    finally:
        process.terminate()
        await process.wait()


# -- redaction keeps text whole ------------------------------------------------------------------


async def test_a_short_key_never_mangles_an_error_message(
    openai_settings: Settings, fake_openai: FakeOpenAI
) -> None:
    fake_openai.add_faults(Fault.error(404, "The model `fake-model` does not exist"))
    llm = OpenAIClient(openai_settings.replace(api_key="x").model)
    try:
        with pytest.raises(ModelError) as info:
            await llm.complete(MESSAGES)
    finally:
        await llm.aclose()
    assert "does not exist" in str(info.value)
    assert "[redacted]" not in str(info.value)


@pytest.mark.parametrize(
    ("key", "text", "expected"),
    [
        ("x", "does not exist", "does not exist"),
        ("none", "none of these, key none", "none of these, key none"),
        ("hunter22", "key hunter22 refused", "key [redacted] refused"),
        ("hunter22", "hunter222 and xhunter22 are other words", None),
        ("hunter22", "https://h/v1?key=hunter22&x=1", "https://h/v1?key=[redacted]&x=1"),
        (
            "sk-" + "a1" * 20,
            "Incorrect API key provided: sk-" + "a1" * 20 + ".",
            "Incorrect API key provided: [redacted].",
        ),
        (
            "sk-" + "a1" * 20,
            "GET https://user:sk-" + "a1" * 20 + "@host/v1?api_key=sk-" + "a1" * 20,
            "GET https://user:[redacted]@host/v1?api_key=[redacted]",
        ),
        ("sk-" + "a1" * 20, "glued:sk-" + "a1" * 20 + "zz", "glued:[redacted]zz"),
    ],
    ids=["one-char", "short-word", "medium", "medium-in-words", "medium-in-url", "long",
         "long-in-url", "long-glued"],
)  # fmt: skip
def test_redaction_takes_whole_secrets_only(key: str, text: str, expected: str | None) -> None:
    assert redact(text, secret_pattern(key)) == (text if expected is None else expected)
