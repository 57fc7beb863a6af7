"""What a type's handler may ask of the walk it is part of: ``NodeWriter`` while encoding,
``NodeReader`` while decoding.

``Encoder`` and ``Decoder`` walk a value node by node and call a handler for each type they do
not write themselves; a handler in a module of its own (``arrays.py``) is written against these
two, so it depends on what it uses and not on the walkers that call it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

Json = Any  # None | bool | int | float | str | list[Json] | dict[str, Json]


class NodeWriter(Protocol):
    """The encoder, as a handler sees it (``encoder.Encoder`` and its chunking subclass)."""

    def node(self, value: object, depth: int) -> Json:
        """The JSON tree of ``value`` found at nesting ``depth``."""
        ...

    def enter(self, container: object, depth: int) -> int:
        """Check depth and cycles before encoding ``container``'s items; returns their depth."""
        ...

    def leave(self, container: object) -> None:
        """Mark ``container`` as finished."""
        ...

    def items(self, values: Iterable[object], count: int, depth: int) -> Json:
        """Encode ``count`` items; returns the items' list."""
        ...

    def binary(self, tag: str, head: bytes, body: memoryview) -> Json:
        """``{tag: base64}`` of ``head + body``."""
        ...

    def tag(self, name: str, payload: Json) -> Json:
        """A one-key tag object."""
        ...


class NodeReader(Protocol):
    """The decoder, as a handler sees it (``decoder.Decoder``)."""

    def node(self, tree: Json, depth: int) -> Any:
        """The value of one JSON node found at nesting ``depth``."""
        ...

    def items(self, payload: Json, depth: int) -> list[Any]:
        """Decode a list payload's items one level deeper."""
        ...

    def binary(self, payload: Json) -> bytes:
        """The bytes of a binary payload."""
        ...
