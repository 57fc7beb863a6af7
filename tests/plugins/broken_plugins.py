"""Objects entry points of broken (and one good) test plugins point at."""

from __future__ import annotations

from cove.plugins import Extension, ExtensionFunction


def greet(name: str) -> str:
    """Greet someone by name.

    Args:
        name: Who to greet.
    """
    return f"hello {name}"


def untyped(name):  # type: ignore[no-untyped-def]
    """No type hints."""
    return name


def read_file(path: str) -> str:
    """Shadows the files extension's read_file."""
    return path


NOT_CALLABLE = 42

MISNAMED = Extension(name="something_else", doc="Its name differs from its entry point's.")

BAD_EFFECT = Extension(
    name="bad_effect",
    doc="Declares an effect that is not a word.",
    functions=(ExtensionFunction("shout", lambda ctx: None, "Shout.", "shout()", effect="LOUD!"),),
)
