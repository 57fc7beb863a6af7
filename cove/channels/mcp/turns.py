"""The tools that run a turn: ``run_python`` (the agent's code, no model) and ``ask_cove``
(a whole turn of cove's own model).

Each call is one turn of the conversation it names (a new conversation, channel ``mcp``, when
it names none), recorded like any other turn: other channels watch it live, and it can be
forked and replayed. A call waits in the conversation's queue behind a running turn. When the
client cancels the call the turn is cancelled (``follow.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, ImageContent
from pydantic import Field

from cove.channels.mcp.errors import tool
from cove.channels.mcp.follow import follow
from cove.channels.mcp.results import (
    MAX_IMAGE_BYTES,
    MAX_IMAGES,
    ask_result,
    figure_image,
    run_result,
)
from cove.conversation import Conversations
from cove.errors import CoveError
from cove.results import BlockFigure

#: The channel conversations created over MCP show.
CHANNEL = "mcp"

Code = Annotated[str, Field(description="The Python source to run, as one block.")]
Question = Annotated[str, Field(description="What to ask, in plain words.")]
ConversationId = Annotated[
    str | None,
    Field(
        description="The conversation (its id, or a unique prefix of it). Leave it out to "
        "start a new conversation; the result names it."
    ),
]
TimeLimit = Annotated[
    float | None,
    Field(
        description="Seconds the block may run before it is stopped (clamped to the "
        "server's bounds; default: the server's block timeout)."
    ),
]
Iterations = Annotated[
    int | None,
    Field(ge=1, description="The turn's iteration budget (default: the server's)."),
]


class TurnTools:
    """``run_python`` and ``ask_cove`` over one ``Conversations``."""

    def __init__(self, convs: Conversations) -> None:
        self.convs = convs

    @tool
    async def run_python(
        self,
        code: Code,
        ctx: Context[Any, Any],
        conversation: ConversationId = None,
        timeout_s: TimeLimit = None,
    ) -> CallToolResult:
        """Run Python in a conversation's sandbox and get back what the block gave: its
        output, the value of its last expression, or its error, the variables it changed and
        its figures as images.

        Variables persist between calls (and across restarts of the server), and every
        version of every variable is kept. Each call is recorded as a turn of the
        conversation: people can watch it live in cove's other channels. No model is
        involved: you write the code. The sandbox has no network and no file system beyond
        the conversation's workspace (read_file, write_file, list_files). An error does not
        break it: variables keep what the block did before the error, and a block stopped at
        its time limit (or cancelled) leaves them as they were before it.
        """
        if not code.strip():
            raise CoveError("the code is empty")
        cid = await self._conversation(conversation)
        seen = await follow(self.convs.execute(cid, code, timeout_s=timeout_s), ctx.report_progress)
        figures = seen.blocks[-1].figures if seen.blocks else ()
        return run_result(seen, await self._images(seen.conversation_id, figures))

    @tool
    async def ask_cove(
        self,
        question: Question,
        ctx: Context[Any, Any],
        conversation: ConversationId = None,
        max_iterations: Iterations = None,
    ) -> CallToolResult:
        """Ask cove a question: cove's own model answers it by writing and running code in
        the conversation's sandbox, over as many iterations as it needs, and the answer
        comes back with the variables it changed and its figures.

        The conversation's variables (also the ones run_python made) are there for it to
        use. Progress is reported per iteration.
        """
        if not question.strip():
            raise CoveError("the question is empty")
        self.convs.check_model()
        cid = await self._conversation(conversation)
        handle = self.convs.send(cid, question, max_iterations=max_iterations)
        seen = await follow(handle, ctx.report_progress)
        figures = [f for block in seen.blocks for f in block.figures]
        return ask_result(seen, await self._images(seen.conversation_id, figures))

    async def _conversation(self, wanted: str | None) -> str:
        """The conversation named (by id or prefix), or a new one."""
        if wanted is None:
            return (await self.convs.create(channel=CHANNEL)).id
        return (await self.convs.get(wanted)).id

    async def _images(self, cid: str, figures: Sequence[BlockFigure]) -> list[ImageContent]:
        """The first figures as images, within ``MAX_IMAGES`` and ``MAX_IMAGE_BYTES``."""
        images: list[ImageContent] = []
        total = 0
        for figure in figures[:MAX_IMAGES]:
            png = await self.convs.figure(cid, figure.digest)
            total += len(png)
            if total > MAX_IMAGE_BYTES:
                break
            images.append(figure_image(png))
        return images
