"""Cutting a streamed reply's body into its events' data, however the bytes arrive."""

from __future__ import annotations

import pytest

from cove.engine.llm.stream import EventSplitter

BODY = b'data: {"a":1}\n\ndata: {"b":2}\n\n: a comment\n\ndata: [DONE]\n\n'
EXPECTED = [b'{"a":1}', b'{"b":2}', b"[DONE]"]


def feed_all(splitter: EventSplitter, pieces: list[bytes]) -> list[bytes]:
    return [data for piece in pieces for data in splitter.feed(piece)]


def test_events_in_one_piece_come_out_in_order() -> None:
    assert EventSplitter().feed(BODY) == EXPECTED


@pytest.mark.parametrize("size", [1, 2, 3, 7, 16])
def test_events_cut_anywhere_come_out_whole(size: int) -> None:
    pieces = [BODY[i : i + size] for i in range(0, len(BODY), size)]
    assert feed_all(EventSplitter(), pieces) == EXPECTED


@pytest.mark.parametrize("ending", [b"\r\n", b"\r"])
@pytest.mark.parametrize("size", [1, 5, 1000])
def test_crlf_and_cr_line_endings_are_lines_too(ending: bytes, size: int) -> None:
    # A CR that is the last byte so far may be half of a CRLF: the next byte decides.
    body = BODY.replace(b"\n", ending) + b": next"
    pieces = [body[i : i + size] for i in range(0, len(body), size)]
    assert feed_all(EventSplitter(), pieces) == EXPECTED


def test_an_unfinished_event_waits_for_its_blank_line() -> None:
    splitter = EventSplitter()
    assert splitter.feed(b'data: {"a":') == []
    assert splitter.feed(b"1}\n") == []
    assert splitter.feed(b"\n") == [b'{"a":1}']


def test_data_lines_join_and_other_fields_are_ignored() -> None:
    body = b"event: chunk\nid: 7\ndata: first\ndata:second\nretry: 10\n\nevent: ping\n\n"
    assert EventSplitter().feed(body) == [b"first\nsecond"]


def test_a_trailing_cr_is_decided_by_the_next_byte() -> None:
    splitter = EventSplitter()
    assert splitter.feed(b"data: x\r\r") == []
    assert splitter.feed(b"\n") == [b"x"]  # CR then CRLF: still one blank line
    assert splitter.feed(b"data: y\r\r") == []
    assert splitter.feed(b"d") == [b"y"]
