"""The MCP tools through the SDK's in-memory client: real conversations, store and workers,
the fake OpenAI endpoint for ``ask_cove``."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from mcp import Client
from mcp.types import ImageContent

from cove.channels.mcp import build_server
from cove.conversation import Conversations
from cove.events import BlockStarted, TurnFinished
from tests.channels.mcp.helpers import Spinning, data, run, text, until
from tests.fakes.openai_server import FakeOpenAI
from tests.scripted import reply, settings_for

TOOLS = {
    "run_python",
    "ask_cove",
    "list_conversations",
    "list_variables",
    "variable_versions",
    "diff_variable",
    "search",
    "fork_conversation",
}


async def test_the_tools_are_listed_with_their_arguments(convs: Conversations) -> None:
    async with Client(build_server(convs)) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(listed) == TOOLS
        run_python = listed["run_python"]
        assert run_python.input_schema["required"] == ["code"]
        assert set(run_python.input_schema["properties"]) == {"code", "conversation", "timeout_s"}
        assert run_python.description and run_python.description.startswith("Run Python")
        assert listed["search"].annotations and listed["search"].annotations.read_only_hint


async def test_run_python_keeps_state_and_reports_output_value_and_variables(
    convs: Conversations,
) -> None:
    async with Client(build_server(convs)) as client:
        steps: list[tuple[float, float | None, str | None]] = []

        async def progress(value: float, total: float | None, message: str | None) -> None:
            steps.append((value, total, message))

        first = await client.call_tool(
            "run_python",
            {"code": "rows = [1, 2, 3]\nprint('three rows')"},
            progress_callback=progress,
        )
        assert not first.is_error
        made = data(first)
        cid = made["conversation_id"]
        assert (made["turn"], made["status"], made["stdout"]) == (1, "done", "three rows\n")
        assert made["variables"] == [
            {"name": "rows", "version": 1, "kind": "value", "type": "list", "preview": "[1, 2, 3]"}
        ]
        assert "three rows" in text(first) and "rows v1 (list)" in text(first)
        assert [message for _, _, message in steps] == [
            "iteration 1 of 1",
            "iteration 1: running block 1",
        ]

        second = await run(client, "rows.append(4)\nsum(rows)", cid[:8])
        assert (second["conversation_id"], second["turn"], second["value"]) == (cid, 2, "10")
        assert second["variables"][0]["version"] == 2
        record = await convs.get(cid)
        assert (record.channel, record.turn_count) == ("mcp", 2)


async def test_an_error_is_the_result_and_the_sandbox_stays_usable(convs: Conversations) -> None:
    async with Client(build_server(convs)) as client:
        cid = (await run(client, "total = 41"))["conversation_id"]
        failed = await client.call_tool("run_python", {"code": "total / 0", "conversation": cid})
        assert failed.is_error and "ZeroDivisionError" in text(failed)
        assert data(failed)["status"] == "failed"
        timed_out = await run(client, "total += 1\nwhile True:\n    pass", cid, timeout_s=1)
        assert timed_out["timed_out"] and timed_out["status"] == "failed"
        assert (await run(client, "total + 1", cid))["value"] == "42"

        unknown = await client.call_tool("run_python", {"code": "1", "conversation": "f" * 32})
        assert unknown.is_error and data(unknown)["error"] == "not_found"
        empty = await client.call_tool("run_python", {"code": "  "})
        assert empty.is_error and "the code is empty" in text(empty)
        assert len(data(await client.call_tool("list_conversations", {}))["conversations"]) == 1


async def test_the_reading_tools_and_fork(convs: Conversations) -> None:
    async with Client(build_server(convs)) as client:
        cid = (await run(client, "word = 'alpha'\nlog = ['start']"))["conversation_id"]
        await run(client, "word = 'beta'\nlog.append('more')", cid)

        listed = data(await client.call_tool("list_conversations", {}))["conversations"]
        assert [(c["id"], c["turns"], c["last_status"]) for c in listed] == [(cid, 2, "done")]
        variables = data(await client.call_tool("list_variables", {"conversation": cid}))
        assert {(v["name"], v["version"]) for v in variables["variables"]} == {
            ("word", 2),
            ("log", 2),
        }
        versions = await client.call_tool(
            "variable_versions", {"conversation": cid, "name": "word"}
        )
        assert [(v["version"], v["preview"]) for v in data(versions)["versions"]] == [
            (1, "'alpha'"),
            (2, "'beta'"),
        ]
        diff = await client.call_tool(
            "diff_variable",
            {"conversation": cid, "name": "log", "from_version": 1, "to_version": 2},
        )
        assert text(diff).endswith("-['start']\n+['start', 'more']")
        hits = data(await client.call_tool("search", {"query": "beta"}))["hits"]
        assert hits and hits[0]["conversation_id"] == cid
        missing = await client.call_tool("variable_versions", {"conversation": cid, "name": "nope"})
        assert missing.is_error and data(missing)["error"] == "not_found"

        fork = data(await client.call_tool("fork_conversation", {"conversation": cid, "turn": 1}))
        assert (fork["parent_id"], fork["fork_turn"]) == (cid, 1)
        assert (await run(client, "word", fork["id"]))["value"] == "'alpha'"
        assert (await run(client, "word", cid))["value"] == "'beta'"


async def test_a_cancelled_call_stops_its_block_and_another_channel_watches_it_all(
    convs: Conversations,
) -> None:
    async with Client(build_server(convs)) as client:
        cid = (await run(client, "spins = 0"))["conversation_id"]
        async with convs.watch(cid) as watched:  # another channel, following the conversation
            spinning = Spinning(client, cid)
            await spinning.running()
            seen = [event async for event in until(watched, BlockStarted)]
            assert isinstance(seen[-1], BlockStarted) and "spins += 1" in seen[-1].code
            await spinning.cancel()
            ended = [event async for event in until(watched, TurnFinished)]
        finished = ended[-1]
        assert isinstance(finished, TurnFinished) and finished.status == "cancelled"
        transcript = await convs.inspect(cid, turn=2)
        (block,) = transcript.turns[0].iterations[0].blocks
        assert (block.error or "").startswith("CancelledError")
        assert (await run(client, "spins", cid))["value"] == "0"  # the killed block left no trace


async def test_ask_cove_runs_a_turn_with_progress_per_iteration(
    convs: Conversations, fake: FakeOpenAI
) -> None:
    async with Client(build_server(convs)) as client:
        cid = (await run(client, "prices = [3, 5, 8]"))["conversation_id"]
        fake.add_replies(
            reply(["total = sum(prices)"], thinking="add them up"),
            reply(None, "The total is {{total}}."),
        )
        steps: list[str] = []

        async def progress(value: float, total: float | None, message: str | None) -> None:
            steps.append(message or "")

        result = await client.call_tool(
            "ask_cove", {"question": "What do the prices add up to?", "conversation": cid},
            progress_callback=progress,
        )  # fmt: skip
        assert not result.is_error, text(result)
        answered = data(result)
        assert (answered["answer"], answered["iterations"], answered["turn"]) == (
            "The total is 16.",
            2,
            2,
        )
        assert [s for s in steps if s.startswith("iteration") and "block" not in s] == [
            "iteration 1 of 4",
            "iteration 2 of 4",
        ]
        # cove's model saw the block the agent ran: the sandbox is shared.
        context = json.dumps(fake.requests[0]["messages"])
        assert "prices = [3, 5, 8]" in context


async def test_ask_cove_without_an_endpoint_says_what_to_configure(tmp_path: Path) -> None:
    async with (
        Conversations.open(settings_for(tmp_path)) as convs,
        Client(build_server(convs)) as client,
    ):
        result = await client.call_tool("ask_cove", {"question": "anyone there?"})
        assert result.is_error and data(result)["error"] == "configuration"
        assert "OPENAI_API_KEY" in text(result)
        assert await convs.list() == []  # nothing was created for a call that could not run


@pytest.mark.slow  # a zygote with the data libraries
async def test_figures_come_back_as_images_and_as_resources(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, sandbox_libraries=True)
    async with Conversations.open(settings) as convs, Client(build_server(convs)) as client:
        code = "import matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nplt.title('squares')"
        result = await client.call_tool("run_python", {"code": code})
        assert not result.is_error, text(result)
        (image,) = [c for c in result.content if isinstance(c, ImageContent)]
        png = base64.b64decode(image.data)
        assert image.mime_type == "image/png" and png.startswith(b"\x89PNG")
        (figure,) = data(result)["figures"]
        assert figure["title"] == "squares"
        read = await client.read_resource(figure["uri"])
        assert base64.b64decode(read.contents[0].blob) == png  # type: ignore[union-attr]
