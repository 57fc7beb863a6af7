"""Spreading concurrent model calls over lanes, each with a connection pool of its own."""

from __future__ import annotations

import contextlib

from openai import AsyncOpenAI

from cove.engine.llm.lanes import Lanes


def made() -> tuple[Lanes, list[AsyncOpenAI]]:
    clients: list[AsyncOpenAI] = []

    def make() -> AsyncOpenAI:
        clients.append(AsyncOpenAI(api_key="sk-test", base_url="http://127.0.0.1:9/v1"))
        return clients[-1]

    return Lanes(make, per_lane=2), clients


async def test_one_call_at_a_time_keeps_to_one_lane() -> None:
    lanes, clients = made()
    for _ in range(5):
        with lanes.lane() as client:
            assert client is clients[0]
    assert len(lanes) == 1
    await lanes.aclose()


async def test_a_lane_opens_only_when_every_lane_is_full_and_the_least_busy_is_used() -> None:
    lanes, clients = made()
    with contextlib.ExitStack() as calls:
        given = [calls.enter_context(lanes.lane()) for _ in range(5)]
        assert len(lanes) == 3
        assert given == [clients[0], clients[0], clients[1], clients[1], clients[2]]
    with lanes.lane() as client:  # all idle again: no new lane
        assert client in clients and len(lanes) == 3
    await lanes.aclose()
    assert all(client.is_closed() for client in clients)
