"""Reading a chat completion's decoded JSON: choice 0's text, the usage, odd shapes refused."""

from __future__ import annotations

from typing import Any

import pytest

from cove.engine.llm.chunks import MalformedReply, chunk_text, reply_text, usage_of
from cove.results import Usage


def chunk(*choices: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"id": "c", "object": "chat.completion.chunk", "choices": list(choices), **extra}


def test_a_chunk_gives_the_text_of_choice_zero_only() -> None:
    assert chunk_text(chunk({"index": 0, "delta": {"content": "he"}})) == "he"
    assert chunk_text(chunk({"index": 1, "delta": {"content": "no"}})) == ""
    both = chunk({"index": 1, "delta": {"content": "x"}}, {"index": 0, "delta": {"content": "y"}})
    assert chunk_text(both) == "y"


@pytest.mark.parametrize(
    "quiet",
    [
        chunk(),
        chunk({"index": 0, "delta": {}}),
        chunk({"index": 0, "delta": {"role": "assistant", "content": None}}),
        chunk({"index": 0, "delta": None, "finish_reason": "stop"}),
        {"id": "c", "choices": None, "usage": {"prompt_tokens": 1, "completion_tokens": 2}},
        {"id": "c"},
    ],
)
def test_chunks_without_text_give_nothing(quiet: Any) -> None:
    assert chunk_text(quiet) == ""


def test_a_choice_without_an_index_counts_as_the_first() -> None:
    assert chunk_text({"choices": [{"delta": {"content": "z"}}]}) == "z"


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ([1, 2], "not a JSON object (list)"),
        ("text", "not a JSON object (str)"),
        ({"choices": "all"}, "choices are not a list"),
        ({"choices": ["x"]}, "a choice that is not a JSON object"),
        ({"choices": [{"index": 0, "delta": "text"}]}, "delta is not a JSON object"),
        ({"choices": [{"index": 0, "delta": {"content": 5}}]}, "delta content is not text"),
    ],
)
def test_a_chunk_of_no_completion_shape_is_refused_by_name(body: Any, said: str) -> None:
    with pytest.raises(MalformedReply) as info:
        chunk_text(body)
    assert said in str(info.value)


def test_a_whole_reply_reads_its_message() -> None:
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}]}
    assert reply_text(body) == "hi"
    assert reply_text({"choices": []}) == ""
    with pytest.raises(MalformedReply, match="message is not a JSON object"):
        reply_text({"choices": [{"index": 0, "message": ["hi"]}]})


@pytest.mark.parametrize(
    ("body", "usage"),
    [
        ({"usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}}, Usage(3, 4)),
        ({"usage": None}, None),
        ({}, None),
        ({"usage": {"prompt_tokens": 3}}, None),
        ({"usage": {"prompt_tokens": "3", "completion_tokens": 4}}, None),
        ({"usage": {"prompt_tokens": True, "completion_tokens": 4}}, None),
        ({"usage": [3, 4]}, None),
        ([1], None),
    ],
)
def test_usage_is_read_only_when_both_counts_are_whole_numbers(body: Any, usage: Any) -> None:
    assert usage_of(body) == usage
