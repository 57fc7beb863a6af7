"""The MCP server: cove's tools and resources over one ``Conversations``, built with the
official SDK's ``MCPServer``. The transports (stdio, streamable HTTP) are in ``stdio.py`` and
``http.py``; this module only assembles what they serve."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from cove.channels.mcp.reads import ReadTools
from cove.channels.mcp.resources import LISTING, Resources
from cove.channels.mcp.turns import TurnTools
from cove.conversation import Conversations

NAME = "cove"
INSTRUCTIONS = """\
cove is a Python sandbox that keeps its variables between calls, versions every one of them \
and records every step. Use run_python to run code in a conversation's sandbox (a new \
conversation when you name none; pass the conversation id it returns to keep going in it), \
and ask_cove to have cove's own model answer a question there. Variables persist across calls \
and restarts; list_variables, variable_versions and diff_variable show their history, \
fork_conversation branches from any turn, search finds earlier work. Resources under \
cove://conversations hold transcripts and variables' values in full. Everything you run is \
recorded as a turn that people can watch and replay in cove's other channels."""

_READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
#: Turns add versions and never remove any; files the code writes may be overwritten.
_RUNS = ToolAnnotations(read_only_hint=False, idempotent_hint=False, open_world_hint=False)


def _version() -> str:
    try:
        return version("cove")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0"


def build_server(convs: Conversations) -> MCPServer[Any]:
    """The MCP server of ``convs``: its tools and its ``cove://`` resources.

    The server does not own ``convs``: whoever opened it closes it.
    """
    server: MCPServer[Any] = MCPServer(
        NAME, instructions=INSTRUCTIONS, version=_version(), website_url=None
    )
    turns, reads = TurnTools(convs), ReadTools(convs)
    fork = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
    tools: list[tuple[Callable[..., Any], str, ToolAnnotations]] = [
        (turns.run_python, "Run Python", _RUNS),
        (turns.ask_cove, "Ask cove", _RUNS),
        (reads.list_conversations, "List conversations", _READ_ONLY),
        (reads.list_variables, "List variables", _READ_ONLY),
        (reads.variable_versions, "Variable versions", _READ_ONLY),
        (reads.diff_variable, "Diff two versions", _READ_ONLY),
        (reads.search, "Search", _READ_ONLY),
        (reads.fork_conversation, "Fork a conversation", fork),
    ]
    for fn, title, hints in tools:
        description = inspect.cleandoc(fn.__doc__ or "")
        server.add_tool(fn, title=title, description=description, annotations=hints)
    resources = Resources(convs)
    for uri, reader, mime_type in LISTING:
        read = getattr(resources, reader)
        description = inspect.cleandoc(read.__doc__ or "")
        server.resource(uri, name=reader, description=description, mime_type=mime_type)(read)
    return server
