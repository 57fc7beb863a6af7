"""The extensions' documentation as it goes into the system prompt.

The text is stable for a given set of extensions (no timestamps, no per-turn values) so the system
prompt hashes the same across turns and is stored once; it is rendered once per set of extensions.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence

from cove.environment.extensions.base import Extension, ExtensionFunction
from cove.environment.extensions.memo import per_extension_set


def render_docs(extensions: Sequence[Extension]) -> str:
    """Render each extension's name, doc, prompt text, functions and constants.

    Args:
        extensions: The active extensions, in the order they should appear.

    Returns:
        Plain text, one section per extension, separated by blank lines.
    """
    return _rendered(extensions)


def _render(extensions: tuple[Extension, ...]) -> str:
    return "\n\n".join(_render_extension(ext) for ext in extensions).strip() + "\n"


_rendered = per_extension_set(_render)


def _render_extension(ext: Extension) -> str:
    lines = [f"## {ext.name}: {ext.doc}"]
    if ext.prompt:
        lines.append(inspect.cleandoc(ext.prompt))
    for function in ext.functions:
        lines.extend(_render_function(function))
    if ext.constants:
        lines.append("Read-only names:")
        lines.extend(f"- {c.name}: {c.doc}" for c in ext.constants)
    return "\n".join(lines)


def _render_function(function: ExtensionFunction) -> list[str]:
    lines = [f"- {function.signature}"]
    summary = _first_paragraph(function.doc)
    lines.extend(f"    {line}" for line in summary.splitlines())
    lines.extend(f"    e.g. {example}" for example in function.examples)
    return lines


def _first_paragraph(doc: str) -> str:
    text = inspect.cleandoc(doc)
    return text.split("\n\n", 1)[0].strip()
