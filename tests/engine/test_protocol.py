"""The reply protocol: tolerant parsing, clear errors for the model, and the JSON schema."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cove.engine.protocol import (
    REPLY_SCHEMA,
    CodeBlock,
    Reply,
    ReplyParseError,
    parse_reply,
)
from cove.errors import CoveError, ModelError

# -- each reading path -------------------------------------------------------------------------


def test_strict_json_with_every_field() -> None:
    text = json.dumps(
        {
            "thinking": "add them",
            "code": ["total = sum(prices)", {"code": "slow()", "timeout_s": 20}],
            "answer": "The total is {{total}}.",
            "confidence": "high",
            "title": "Summing the prices",
            "next_reasoning": "quick",
        }
    )
    assert parse_reply(text) == Reply(
        thinking="add them",
        blocks=(CodeBlock("total = sum(prices)"), CodeBlock("slow()", 20.0)),
        answer="The total is {{total}}.",
        confidence="high",
        title="Summing the prices",
        next_reasoning="quick",
    )


def test_fenced_json_block_is_read() -> None:
    text = 'Sure:\n```json\n{"thinking": "t", "code": ["x = 1"]}\n```\nDone.'
    assert parse_reply(text) == Reply(thinking="t", blocks=(CodeBlock("x = 1"),))


def test_bare_fence_holding_an_object_is_read_as_json() -> None:
    text = '```\n{"thinking": "t", "answer": "42"}\n```'
    assert parse_reply(text).answer == "42"


def test_first_balanced_object_in_prose_is_read() -> None:
    text = 'I will compute {first}. {"thinking": "brace } in a string", "code": "y = {1: 2}"} ok'
    reply = parse_reply(text)
    assert reply.thinking == "brace } in a string"
    assert reply.blocks == (CodeBlock("y = {1: 2}"),)


def test_object_with_protocol_keys_wins_over_earlier_unrelated_object() -> None:
    text = 'Config {"a": 1} then {"thinking": "", "answer": "yes"}'
    assert parse_reply(text).answer == "yes"


def test_python_fences_become_code_and_prose_becomes_thinking() -> None:
    text = "Let me count.\n```python\nn = len(data)\n```\nThen:\n```py\nn * 2\n```\n"
    reply = parse_reply(text)
    assert reply.blocks == (CodeBlock("n = len(data)\n"), CodeBlock("n * 2\n"))
    assert "Let me count." in reply.thinking and "Then:" in reply.thinking
    assert "```" not in reply.thinking


def test_python_fence_with_a_dict_literal_is_code_not_json() -> None:
    reply = parse_reply('Plan:\n```python\nd = {"a": 1}\n```')
    assert reply.blocks == (CodeBlock('d = {"a": 1}\n'),)


def test_double_encoded_json_string_is_unwrapped() -> None:
    inner = json.dumps({"thinking": "", "answer": "ok"})
    assert parse_reply(json.dumps(inner)).answer == "ok"


def test_list_holding_one_object_is_unwrapped() -> None:
    assert parse_reply('[{"answer": "ok"}]').answer == "ok"


# -- coercions ---------------------------------------------------------------------------------


def test_code_may_be_a_single_string_or_a_single_object() -> None:
    assert parse_reply('{"code": "x = 1"}').blocks == (CodeBlock("x = 1"),)
    assert parse_reply('{"code": {"code": "x", "timeout_s": "5"}}').blocks == (CodeBlock("x", 5.0),)


def test_blank_blocks_are_dropped_and_unknown_keys_ignored() -> None:
    reply = parse_reply('{"code": ["", "  ", "x = 1"], "mood": "great", "thinking": null}')
    assert reply.blocks == (CodeBlock("x = 1"),)
    assert reply.thinking == ""


def test_empty_answer_means_no_answer_yet() -> None:
    reply = parse_reply('{"code": ["x = 1"], "answer": "", "title": " "}')
    assert reply.answer is None and reply.title is None


def test_numeric_answer_becomes_text() -> None:
    assert parse_reply('{"answer": 42}').answer == "42"


def test_advisory_fields_are_normalised_or_dropped() -> None:
    reply = parse_reply(
        '{"answer": "a", "confidence": " HIGH ", "next_reasoning": "extreme", "title": 3}'
    )
    assert reply.confidence == "high"
    assert reply.next_reasoning is None
    assert reply.title is None


def test_thinking_given_as_a_list_of_lines_is_joined() -> None:
    assert parse_reply('{"thinking": ["a", "b"], "answer": "x"}').thinking == "a\nb"


# -- what real models send -----------------------------------------------------------------------


def test_trailing_commas_are_accepted() -> None:
    reply = parse_reply('{"code": ["x = 1",],}')
    assert reply.blocks == (CodeBlock("x = 1"),)
    reply = parse_reply('{"thinking": "t", "code": [{"code": "y()", "timeout_s": 5,},], }')
    assert (reply.thinking, reply.blocks) == ("t", (CodeBlock("y()", 5.0),))


def test_raw_newlines_and_tabs_inside_strings_are_accepted() -> None:
    reply = parse_reply('{"thinking": "first\nsecond", "code": ["for i in r:\n\tprint(i)"]}')
    assert reply.thinking == "first\nsecond"
    assert reply.blocks == (CodeBlock("for i in r:\n\tprint(i)"),)


def test_raw_newlines_inside_a_fenced_or_embedded_object_are_accepted() -> None:
    fenced = '```json\n{"code": ["a = 1\nb = 2"]}\n```'
    assert parse_reply(fenced).blocks == (CodeBlock("a = 1\nb = 2"),)
    embedded = 'Here you go: {"answer": "line one\nline two"} — done.'
    assert parse_reply(embedded).answer == "line one\nline two"


def test_trailing_comma_and_raw_newline_inside_prose_are_repaired() -> None:
    text = 'Sure. {"thinking": "sum\tit", "code": ["total = sum(xs)\ntotal",],} Let me know.'
    reply = parse_reply(text)
    assert (reply.thinking, reply.blocks) == ("sum\tit", (CodeBlock("total = sum(xs)\ntotal"),))


def test_single_quoted_object_is_repaired_as_the_last_resort() -> None:
    assert parse_reply("{'code': ['x = 1'], 'answer': None}").blocks == (CodeBlock("x = 1"),)


def test_python_fences_still_win_over_a_repairable_object() -> None:
    text = "Use {this, one,} pattern.\n```python\nx = 1\n```"
    assert parse_reply(text).blocks == (CodeBlock("x = 1\n"),)


def test_a_reply_cut_short_is_not_completed() -> None:
    assert _problem('{"thinking": "t", "code": ["x = fo').startswith("the JSON object is invalid")


# -- errors the model sees ---------------------------------------------------------------------


def _problem(text: str) -> str:
    with pytest.raises(ReplyParseError) as info:
        parse_reply(text)
    message = str(info.value)
    # Every message tells the model what to send instead.
    assert "Reply with exactly one JSON object" in message
    return info.value.problem


@pytest.mark.parametrize("text", ["", "   \n\t"])
def test_empty_reply(text: str) -> None:
    assert _problem(text) == "the reply was empty"


@pytest.mark.parametrize(
    ("text", "kind"),
    [("42", "a number"), ('"hello"', "a string"), ("[1, 2]", "a list"), ("null", "null")],
)
def test_json_that_is_not_an_object(text: str, kind: str) -> None:
    assert _problem(text) == f"the reply is JSON but {kind}, not an object"


def test_object_with_neither_code_nor_answer() -> None:
    assert "neither" in _problem('{"thinking": "hmm"}')


def test_object_with_only_blank_code_has_neither() -> None:
    assert "neither" in _problem('{"thinking": "hmm", "code": [" "], "answer": null}')


def test_invalid_json_reports_where() -> None:
    problem = _problem('{"thinking": "cut short", "code": ["x = 1"')
    assert problem.startswith("the JSON object is invalid")
    assert "line 1" in problem


def test_prose_without_any_object() -> None:
    assert _problem("I think the answer is 4.") == "no JSON object was found in the reply"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('{"code": 5}', '"code" is a number'),
        ('{"code": [1]}', '"code"[0] is a number'),
        ('{"code": [{"timeout_s": 3}]}', '"code"[0] has no "code" string'),
        ('{"code": [{"code": "x", "timeout_s": -1}]}', "timeout_s must be a positive"),
        ('{"code": [{"code": "x", "timeout_s": true}]}', "timeout_s must be a positive"),
        ('{"code": [{"code": "x", "timeout_s": "soon"}]}', "timeout_s must be a positive"),
        ('{"answer": ["a"]}', '"answer" must be a string or null, not a list'),
        ('{"answer": true}', '"answer" must be a string or null, not a boolean'),
    ],
)
def test_wrong_types_are_rejected_with_the_field_named(text: str, fragment: str) -> None:
    assert fragment in _problem(text)


def test_parse_error_is_a_cove_error_but_not_a_model_error() -> None:
    # An unreadable reply is an error iteration, not an infrastructure failure.
    assert issubclass(ReplyParseError, CoveError)
    assert not issubclass(ReplyParseError, ModelError)


# -- the schema --------------------------------------------------------------------------------


def test_schema_is_strict_mode_compatible() -> None:
    assert REPLY_SCHEMA["additionalProperties"] is False
    assert set(REPLY_SCHEMA["required"]) == set(REPLY_SCHEMA["properties"])
    block = REPLY_SCHEMA["properties"]["code"]["items"]["anyOf"][1]
    assert block["additionalProperties"] is False
    assert set(block["required"]) == set(block["properties"])


def test_to_json_matches_the_schema_keys() -> None:
    reply = Reply(thinking="t", blocks=(CodeBlock("a"), CodeBlock("b", 2.0)), answer="x")
    wire = reply.to_json()
    assert set(wire) == set(REPLY_SCHEMA["properties"])
    assert wire["code"] == ["a", {"code": "b", "timeout_s": 2.0}]


# -- round trip --------------------------------------------------------------------------------

_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)
_code = _text.filter(lambda s: s.strip() != "")
_blocks = st.lists(
    st.builds(
        CodeBlock,
        code=_code,
        timeout_s=st.none() | st.floats(min_value=0.001, max_value=1e6, allow_nan=False),
    ),
    max_size=4,
).map(tuple)


@st.composite
def _replies(draw: st.DrawFn) -> Reply:
    blocks = draw(_blocks)
    answer = draw(st.none() | _code) if blocks else draw(_code)
    return Reply(
        thinking=draw(_text),
        blocks=blocks,
        answer=answer,
        confidence=draw(st.sampled_from([None, "high", "medium", "low"])),
        title=draw(st.none() | _code),
        next_reasoning=draw(st.sampled_from([None, "quick", "balanced", "deep"])),
    )


_prose = st.text(st.characters(exclude_characters="{}`", exclude_categories=["Cs"]), max_size=30)


@given(_replies(), st.booleans())
def test_round_trip_plain_json(reply: Reply, ascii_only: bool) -> None:
    assert parse_reply(json.dumps(reply.to_json(), ensure_ascii=ascii_only)) == reply


@given(_replies(), _prose, _prose)
def test_round_trip_fenced_json(reply: Reply, before: str, after: str) -> None:
    text = f"{before}\n```json\n{json.dumps(reply.to_json(), indent=2)}\n```\n{after}"
    assert parse_reply(text) == reply


@given(_replies(), _prose, _prose)
def test_round_trip_json_inside_prose(reply: Reply, before: str, after: str) -> None:
    text = f"{before} {json.dumps(reply.to_json(), ensure_ascii=False)} {after}"
    assert parse_reply(text) == reply
