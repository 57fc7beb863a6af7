"""The reply protocol: what the model sends back each iteration, and how cove reads it.

The model answers with ONE JSON object::

    {"thinking": "short reasoning",
     "code": ["total = sum(prices)", {"code": "slow()", "timeout_s": 20}],
     "answer": "The total is {{total}}.",
     "confidence": "high|medium|low",
     "title": "3-7 word conversation title",
     "next_reasoning": "quick|balanced|deep"}

``parse_reply`` is tolerant because models are not: it tries JSON, then a fenced
```` ```json ```` block, then the first balanced ``{...}`` object in the text, then fenced
```` ```python ```` blocks as code, and last the ``json-repair`` library on the first complete
``{...}`` (trailing commas, single quotes, unquoted keys...). Every JSON attempt accepts raw
newlines and tabs inside strings, which real models send. A reply that still cannot be read
raises ``ReplyParseError``, whose message is written for the model: it is shown to it in the next
context message.

``ReplyParseError`` derives from ``CoveError`` but deliberately not from ``ModelError``: an
unreadable reply is an error *iteration* (the model gets another try), whereas a ``ModelError`` is
an infrastructure failure that ends the turn.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import json_repair

from cove.errors import CoveError

CONFIDENCES: Final = ("high", "medium", "low")
REASONINGS: Final = ("quick", "balanced", "deep")

# Strict-mode compatible: every property is required, optional values are nullable and no
# additional properties are allowed. The parser accepts looser shapes than this.
REPLY_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "thinking": {"type": "string", "description": "Short reasoning for this iteration."},
        "code": {
            "type": "array",
            "description": "Python blocks to run in order; may be empty when answering.",
            "items": {
                "anyOf": [
                    {"type": "string"},
                    {
                        "type": "object",
                        "properties": {
                            "code": {"type": "string"},
                            "timeout_s": {"type": ["number", "null"]},
                        },
                        "required": ["code", "timeout_s"],
                        "additionalProperties": False,
                    },
                ]
            },
        },
        "answer": {
            "type": ["string", "null"],
            "description": "The final answer, with {{name}} placeholders; null to keep working.",
        },
        "confidence": {"type": ["string", "null"], "enum": [*CONFIDENCES, None]},
        "title": {"type": ["string", "null"], "description": "3-7 word conversation title."},
        "next_reasoning": {"type": ["string", "null"], "enum": [*REASONINGS, None]},
    },
    "required": ["thinking", "code", "answer", "confidence", "title", "next_reasoning"],
    "additionalProperties": False,
}

_EXAMPLE: Final = (
    '{"thinking": "...", "code": ["x = 1 + 1", "x"], "answer": null} to run code, or '
    '{"thinking": "...", "code": [], "answer": "The result is {{x}}."} to answer'
)


class ReplyParseError(CoveError):
    """Raised when a model reply cannot be read; the message is written for the model."""

    def __init__(self, problem: str) -> None:
        super().__init__(
            f"Your previous reply could not be used: {problem}. "
            f"Reply with exactly one JSON object, for example {_EXAMPLE}."
        )
        self.problem = problem


@dataclass(frozen=True)
class CodeBlock:
    """One block of code to run; ``timeout_s`` is the model's request, clamped later."""

    code: str
    timeout_s: float | None = None


@dataclass(frozen=True)
class Reply:
    """One parsed model reply. At least one of ``blocks`` and ``answer`` is present."""

    thinking: str
    blocks: tuple[CodeBlock, ...] = ()
    answer: str | None = None
    confidence: str | None = None
    title: str | None = None
    next_reasoning: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The reply in the wire shape of ``REPLY_SCHEMA`` (what a model would send)."""
        code: list[Any] = [
            b.code if b.timeout_s is None else {"code": b.code, "timeout_s": b.timeout_s}
            for b in self.blocks
        ]
        return {
            "thinking": self.thinking,
            "code": code,
            "answer": self.answer,
            "confidence": self.confidence,
            "title": self.title,
            "next_reasoning": self.next_reasoning,
        }


_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)
_KNOWN_KEYS: Final = frozenset({"thinking", "code", "answer"})
_PYTHON: Final = frozenset({"python", "py", "python3", ""})
_MAX_OBJECT_STARTS: Final = 200


def parse_reply(text: str) -> Reply:
    """Read a model reply, tolerating fences, surrounding prose and code-only replies.

    Args:
        text: The raw reply text.

    Returns:
        The parsed reply.

    Raises:
        ReplyParseError: When no usable reply can be found; the message says what to send.
    """
    stripped = text.strip()
    if not stripped:
        raise ReplyParseError("the reply was empty")
    fences = [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(text)]
    reply, decode_error = _from_json_text(stripped, fences)
    if reply is None:
        reply = _from_prose(text, fences)
    if reply is not None:
        return reply
    if decode_error is not None and "{" in text:
        raise ReplyParseError(f"the JSON object is invalid ({decode_error})")
    raise ReplyParseError("no JSON object was found in the reply")


def _from_json_text(
    stripped: str, fences: list[tuple[str, str]]
) -> tuple[Reply | None, str | None]:
    """The reply when the text, or a fenced block, is JSON; else the last decoding error."""
    decode_error: str | None = None
    for lang, body in [("json", stripped), *fences]:
        if _looks_like_json(lang, body):
            try:
                return _from_json_value(_loads(body), depth=0), None
            except json.JSONDecodeError as exc:
                decode_error = _describe(exc)
    return None, decode_error


def _from_prose(text: str, fences: list[tuple[str, str]]) -> Reply | None:
    """The reply found in prose: an object with known keys, fenced code, any object, a repair."""
    found, known = _first_object(text)
    if found is not None and known:
        return _from_object(found)
    code = [body for lang, body in fences if lang in _PYTHON and not _looks_like_json(lang, body)]
    if any(body.strip() for body in code):
        thinking = _FENCE.sub("", text).strip()
        return _from_object({"thinking": thinking, "code": code})
    if found is not None:
        return _from_object(found)
    repaired = _repaired(text)
    return None if repaired is None else _from_object(repaired)


def _loads(text: str) -> Any:
    """``json.loads`` that also takes raw control characters (newlines, tabs) inside strings."""
    return json.loads(text, strict=False)


def _repaired(text: str) -> Mapping[str, Any] | None:
    """The last resort: ``json-repair`` on the first complete ``{...}``, if that gives a reply.

    An object cut short (a reply that hit the token limit) is not completed: its code may be cut
    mid-statement, so the model is asked to send it again.
    """
    start = text.find("{")
    end = _matching_brace(text, start) if start != -1 else None
    if end is None:
        return None
    try:
        value = json_repair.loads(text[start : end + 1])
    except Exception:  # a repair library failing is one more unreadable reply, not a crash
        return None
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, Mapping) and _KNOWN_KEYS & value.keys():
        return value
    return None


def _looks_like_json(lang: str, body: str) -> bool:
    return lang == "json" or (lang == "" and body.lstrip().startswith("{"))


def _describe(exc: json.JSONDecodeError) -> str:
    return f"{exc.msg} at line {exc.lineno}, column {exc.colno}"


def _from_json_value(value: Any, depth: int) -> Reply:
    if isinstance(value, Mapping):
        return _from_object(value)
    # Some models double-encode (a JSON string holding the object) or wrap it in a list.
    if isinstance(value, str) and depth == 0:
        try:
            return _from_json_value(_loads(value), depth=1)
        except json.JSONDecodeError:
            pass
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], Mapping):
        return _from_object(value[0])
    raise ReplyParseError(f"the reply is JSON but {_kind(value)}, not an object")


def _first_object(text: str) -> tuple[Mapping[str, Any] | None, bool]:
    """The first balanced ``{...}`` decoding to an object, preferring one with known keys.

    Returns the object (or None) and whether it has one of the protocol's keys.
    """
    fallback: Mapping[str, Any] | None = None
    start = text.find("{")
    # Bounded so a reply full of stray braces cannot make this quadratic in practice.
    for _ in range(_MAX_OBJECT_STARTS):
        if start == -1:
            break
        end = _matching_brace(text, start)
        value = None
        if end is not None:
            try:
                value = _loads(text[start : end + 1])
            except json.JSONDecodeError:
                value = None
        if isinstance(value, Mapping):
            if _KNOWN_KEYS & value.keys():
                return value, True
            if fallback is None:
                fallback = value
            start = text.find("{", (end or start) + 1)
        else:
            start = text.find("{", start + 1)
    return fallback, False


def _matching_brace(text: str, start: int) -> int | None:
    """Index of the brace closing the one at ``start``, skipping braces inside JSON strings."""
    depth = 0
    in_string = False
    escaped = False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index
    return None


def _from_object(obj: Mapping[str, Any]) -> Reply:
    blocks = _blocks(obj.get("code"))
    answer = _optional_text(obj.get("answer"), "answer")
    if not blocks and answer is None:
        raise ReplyParseError(
            'the reply has neither "code" nor "answer": send code to run, or your answer '
            "when you are done"
        )
    return Reply(
        thinking=_thinking(obj.get("thinking")),
        blocks=blocks,
        answer=answer,
        confidence=_choice(obj.get("confidence"), CONFIDENCES),
        title=_title(obj.get("title")),
        next_reasoning=_choice(obj.get("next_reasoning"), REASONINGS),
    )


def _blocks(value: Any) -> tuple[CodeBlock, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, Mapping)):
        value = [value]
    if not isinstance(value, list):
        raise ReplyParseError(f'"code" is {_kind(value)}; it must be a list of code strings')
    blocks: list[CodeBlock] = []
    for index, item in enumerate(value):
        block = _block(item, index)
        if block.code.strip():
            blocks.append(block)
    return tuple(blocks)


def _block(item: Any, index: int) -> CodeBlock:
    if isinstance(item, str):
        return CodeBlock(item)
    if not isinstance(item, Mapping):
        raise ReplyParseError(
            f'"code"[{index}] is {_kind(item)}; each block must be a string or '
            '{"code": "...", "timeout_s": 30}'
        )
    code = item.get("code")
    if not isinstance(code, str):
        raise ReplyParseError(f'"code"[{index}] has no "code" string')
    return CodeBlock(code, _timeout(item.get("timeout_s"), index))


def _timeout(value: Any, index: int) -> float | None:
    if value is None:
        return None
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = float(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
        if math.isfinite(seconds) and seconds > 0:
            return seconds
    raise ReplyParseError(f'"code"[{index}].timeout_s must be a positive number of seconds')


def _thinking(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    return json.dumps(value, ensure_ascii=False)


def _optional_text(value: Any, key: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ReplyParseError(f'"{key}" must be a string or null, not a boolean')
    if isinstance(value, (int, float)):
        return str(value)
    if not isinstance(value, str):
        raise ReplyParseError(f'"{key}" must be a string or null, not {_kind(value)}')
    # An empty answer is how some models say "not yet" despite the schema asking for null.
    return value if value.strip() else None


def _choice(value: Any, allowed: tuple[str, ...]) -> str | None:
    # Advisory fields: an unknown value is dropped rather than failing the whole reply.
    if isinstance(value, str) and value.strip().lower() in allowed:
        return value.strip().lower()
    return None


def _title(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _kind(value: Any) -> str:
    names = {list: "a list", dict: "an object", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "a number"
    return names.get(type(value), f"a {type(value).__name__}")
