"""Structured logs: JSON lines off a terminal, readable lines on one, ids on every line."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator

import pytest

from cove.channels.serve.logs import REQUEST_ID, bind_turn, configure_logging


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = configure_logging("INFO", stream=stream)
    try:
        yield stream
    finally:
        logging.getLogger().removeHandler(handler)


def test_records_are_json_lines_with_the_ids_of_the_work_they_belong_to(
    captured: io.StringIO,
) -> None:
    log = logging.getLogger("cove.test")

    async def turn() -> None:
        bind_turn("c0ffee", 3)
        log.info("inside", extra={"fields": {"status": "done"}})

    async def request() -> None:
        REQUEST_ID.set("req-1")
        await asyncio.create_task(turn())  # a turn a request started inherits its id
        log.info("after the turn")  # the request's own task never saw the turn's ids

    asyncio.run(request())
    log.warning("outside")

    records = [json.loads(line) for line in captured.getvalue().splitlines()]
    assert [(r["msg"], r["request_id"], r["conversation_id"], r["turn"]) for r in records] == [
        ("inside", "req-1", "c0ffee", 3),
        ("after the turn", "req-1", None, None),
        ("outside", None, None, None),
    ]
    assert records[0]["status"] == "done" and records[0]["level"] == "info"
    assert records[0]["logger"] == "cove.test" and records[0]["ts"].endswith("Z")


def test_a_terminal_gets_readable_lines() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    handler = configure_logging("DEBUG", stream=stream)
    try:

        async def turn() -> None:
            REQUEST_ID.set("r9")
            bind_turn("abcdef0123456789", 2)
            logging.getLogger("cove.serve").info("turn finished", extra={"fields": {"ms": 12}})

        asyncio.run(turn())
    finally:
        logging.getLogger().removeHandler(handler)
    line = stream.getvalue().strip()
    assert line.endswith("info    cove.serve [abcdef01/2 req r9] turn finished ms=12")
    assert not line.startswith("{")
