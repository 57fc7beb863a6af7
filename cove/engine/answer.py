"""Final answers: ``{{name}}`` placeholders filled from sandbox variables, and refusal rules."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z][A-Za-z0-9_]*)\s*\}\}")
MAX_ANSWER_CHARS = 200_000


class AnswerRefused(Exception):
    """The model's answer cannot be accepted yet; ``reason`` goes back to the model."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def placeholders(template: str) -> list[str]:
    """The variable names referenced by ``{{name}}`` placeholders, in order of appearance."""
    return list(dict.fromkeys(PLACEHOLDER.findall(template)))


def fill_answer(
    template: str,
    lookup: Callable[[str], str | None],
    *,
    failed_blocks: Sequence[int] = (),
) -> str:
    """Fill ``{{name}}`` placeholders from variables, or refuse the answer.

    Args:
        template: The answer text as the model wrote it.
        lookup: Returns the text of a variable's current value, or None when it is undefined.
        failed_blocks: 1-based positions of the iteration's blocks that failed.

    Returns:
        The final answer text.

    Raises:
        AnswerRefused: When a block of the same reply failed or a placeholder is undefined.
    """
    if failed_blocks:
        shown = ", ".join(str(i) for i in failed_blocks)
        raise AnswerRefused(
            f"answer refused: block {shown} of the same reply failed; fix the error, then answer"
        )
    values: dict[str, str] = {}
    missing: list[str] = []
    for name in placeholders(template):
        try:
            text = lookup(name)
        except (ValueError, TypeError, OverflowError, RecursionError) as exc:  # not the turn's end
            raise AnswerRefused(
                f"answer refused: {{{{{name}}}}} cannot be shown as text ({type(exc).__name__}); "
                "convert it in code first"
            ) from None
        if text is None:
            missing.append(name)
        else:
            values[name] = text
    if missing:
        raise AnswerRefused(
            "answer refused: undefined placeholder(s) "
            + ", ".join("{{" + name + "}}" for name in missing)
            + "; define the variable(s) in code first or write the text directly"
        )
    filled = PLACEHOLDER.sub(lambda m: values[m.group(1)], template)
    if len(filled) > MAX_ANSWER_CHARS:
        filled = filled[:MAX_ANSWER_CHARS] + f"\n…[answer cut at {MAX_ANSWER_CHARS:,} characters]"
    return filled
