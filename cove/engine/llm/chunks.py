"""What cove reads of a chat completion's JSON: the text of choice 0 and the token usage.

``OpenAIClient`` asks the ``openai`` package for the decoded JSON of each streamed chunk (or of
a whole reply) instead of its typed objects: building a typed object per chunk cost about
30 times what decoding the JSON does, and a streamed reply has one chunk per few tokens. These
functions read that JSON. A body of a shape no chat completion has raises ``MalformedReply``
(the client treats it like a body that is not JSON: sent again, then a ``ModelError``).
Fields cove does not read are never looked at, so an endpoint's extras pass unharmed; a
``usage`` of an odd shape counts as no usage (the tokens are then estimated).
"""

from __future__ import annotations

from typing import Any

from cove.results import Usage


class MalformedReply(ValueError):
    """A chat completion body (or a streamed chunk of one) of a shape cove cannot read."""


def chunk_text(chunk: Any) -> str:
    """The text a streamed chunk adds to choice 0 (``""`` when it adds none).

    Raises:
        MalformedReply: ``chunk`` is not an object, its ``choices`` not a list of objects, or a
            ``delta`` or its ``content`` of the wrong type.
    """
    return _choice_text(chunk, "delta")


def reply_text(body: Any) -> str:
    """The text of choice 0 of a whole (not streamed) reply (``""`` when it has none).

    Raises:
        MalformedReply: As ``chunk_text``, for ``message`` instead of ``delta``.
    """
    return _choice_text(body, "message")


def usage_of(body: Any) -> Usage | None:
    """The token usage a reply or chunk reports; None without one (or of an odd shape)."""
    usage = body.get("usage") if isinstance(body, dict) else None
    if not isinstance(usage, dict):
        return None
    tokens_in, tokens_out = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if type(tokens_in) is int and type(tokens_out) is int:
        return Usage(tokens_in, tokens_out)
    return None


def _choice_text(body: Any, part: str) -> str:
    if not isinstance(body, dict):
        raise MalformedReply(f"a reply that is not a JSON object ({type(body).__name__})")
    choices = body.get("choices")
    if choices is None:
        return ""
    if not isinstance(choices, list):
        raise MalformedReply("a reply whose choices are not a list")
    text = ""
    for choice in choices:
        if not isinstance(choice, dict):
            raise MalformedReply("a reply with a choice that is not a JSON object")
        if choice.get("index", 0) != 0:
            continue
        said = choice.get(part)
        if said is None:
            continue
        if not isinstance(said, dict):
            raise MalformedReply(f"a reply whose {part} is not a JSON object")
        content = said.get("content")
        if content is None:
            continue
        if not isinstance(content, str):
            raise MalformedReply(f"a reply whose {part} content is not text")
        text += content
    return text
