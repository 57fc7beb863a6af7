"""The variable index: a cached list of a conversation's current variables."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class VarEntry:
    """One current variable as the model sees it in ``<var_index>``.

    ``updated_seq`` orders entries: larger means written more recently.
    """

    name: str
    version: int
    kind: str  # value | function | opaque
    type_name: str
    size: int | None
    preview: str
    signature: str | None = None
    updated_seq: int = 0
