"""The one place where cove's errors become MCP errors.

A tool that fails tells the calling agent in its result (``isError`` with the reason, and the
kind of error in ``structuredContent``), so the agent can correct itself; a resource that cannot
be read is an MCP error (not found, or internal). Anything that is not a ``CoveError`` is the
SDK's to report: it never carries a traceback to the client.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import ParamSpec

from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.types import CallToolResult, TextContent

from cove.errors import AmbiguousId, Busy, ConfigError, CoveError, NotFound

P = ParamSpec("P")

#: A conversation another process (or another call) is running: say so, never its lease owner.
BUSY = "another cove process is running a turn in this conversation; try again when it finishes"


def kind_of(exc: CoveError) -> str:
    """A short name for the kind of error, for agents that branch on it."""
    if isinstance(exc, AmbiguousId):
        return "ambiguous_id"
    if isinstance(exc, NotFound):
        return "not_found"
    if isinstance(exc, Busy):
        return "busy"
    if isinstance(exc, ConfigError):
        return "configuration"
    return "error"


def message_of(exc: CoveError) -> str:
    """What the client is told: the error's own message (a lease owner's id never)."""
    if isinstance(exc, Busy) and exc.owner is not None:
        return BUSY
    return exc.message


def tool_error(exc: CoveError) -> CallToolResult:
    """A tool's failure as its result."""
    return CallToolResult(
        content=[TextContent(text=f"cove: {message_of(exc)}")],
        structured_content={"error": kind_of(exc), "message": message_of(exc)},
        is_error=True,
    )


def tool(
    fn: Callable[P, Awaitable[CallToolResult]],
) -> Callable[P, Awaitable[CallToolResult]]:
    """Wrap a tool so a ``CoveError`` it raises becomes its result (``tool_error``)."""

    @functools.wraps(fn)
    async def guarded(*args: P.args, **kwargs: P.kwargs) -> CallToolResult:
        try:
            return await fn(*args, **kwargs)
        except CoveError as exc:
            return tool_error(exc)

    return guarded


def resource_error(exc: CoveError) -> ResourceError:
    """A resource read's failure: not found for an unknown id or name, else an error."""
    if isinstance(exc, NotFound):
        return ResourceNotFoundError(message_of(exc))
    return ResourceError(message_of(exc))


def resource(fn: Callable[P, Awaitable[str | bytes]]) -> Callable[P, Awaitable[str | bytes]]:
    """Wrap a resource reader so a ``CoveError`` it raises becomes a ``resource_error``."""

    @functools.wraps(fn)
    async def guarded(*args: P.args, **kwargs: P.kwargs) -> str | bytes:
        try:
            return await fn(*args, **kwargs)
        except CoveError as exc:
            raise resource_error(exc) from exc

    return guarded
