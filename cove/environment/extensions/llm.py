"""The ``llm`` extension: one-shot sub-queries to the model from inside code.

The engine owns the LLM client; these functions delegate to the running turn's hooks, which bound,
run (concurrently for a batch), count and record the sub-queries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cove.environment.extensions.base import CallContext, Extension, ExtensionFunction

_PROMPT = """
Use these for work that needs judgement on many pieces (classify, summarise, extract): put the
pieces in variables and query per piece. Each call sees only its prompt, not this conversation.
"""


async def llm_query(ctx: CallContext, prompt: str) -> str:
    """Ask the model one self-contained question; returns its reply text."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("llm_query(): prompt must be a non-empty str")
    return await ctx.turn("llm_query").llm_query(prompt)


async def llm_query_batch(ctx: CallContext, prompts: Sequence[str]) -> list[str]:
    """Ask several self-contained questions concurrently; replies in the same order."""
    items: Any = prompts
    if isinstance(items, (str, bytes)) or not isinstance(items, (list, tuple)):
        raise TypeError("llm_query_batch(): prompts must be a list of str")
    for index, item in enumerate(items):
        if not isinstance(item, str) or not item.strip():
            raise ValueError(f"llm_query_batch(): prompts[{index}] must be a non-empty str")
    return await ctx.turn("llm_query_batch").llm_query_batch(list(items))


LLM = Extension(
    name="llm",
    doc="One-shot questions to the language model from inside your code.",
    prompt=_PROMPT,
    effect="spend",
    functions=(
        ExtensionFunction(
            name="llm_query",
            implementation=llm_query,
            doc=llm_query.__doc__ or "",
            signature="llm_query(prompt) -> str",
            examples=('label = llm_query(f"Is this spam? Answer yes or no.\\n{text}")',),
        ),
        ExtensionFunction(
            name="llm_query_batch",
            implementation=llm_query_batch,
            doc=llm_query_batch.__doc__ or "",
            signature="llm_query_batch(prompts) -> list[str]",
            examples=('summaries = llm_query_batch([f"Summarise:\\n{d}" for d in docs])',),
        ),
    ),
)
