"""Work done once per set of extensions: what an extension set is worth computing only once.

Extensions are frozen (``Extension``, its functions and constants never change once built), so
what is derived from a set of them — the registry's signatures, the prompt's documentation —
holds for as long as the same objects are used. ``per_extension_set`` caches such a derivation
by the identity of the extension objects, in order: an equal but distinct extension is a new
set, and a value an extension holds need not be hashable. The cache keeps the extensions it
keys on alive, so an identity is never reused while its entry exists.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TypeVar

from cove.environment.extensions.base import Extension

T = TypeVar("T")

#: Distinct extension sets remembered per derivation (a process uses one or a few).
MAX_SETS = 32


class _ExtensionSet:
    """A tuple of extensions that hashes and compares by the identity of its members."""

    __slots__ = ("_hash", "extensions")

    def __init__(self, extensions: Sequence[Extension]) -> None:
        self.extensions = tuple(extensions)
        self._hash = hash(tuple(map(id, self.extensions)))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, _ExtensionSet)
            and len(other.extensions) == len(self.extensions)
            and all(a is b for a, b in zip(self.extensions, other.extensions, strict=True))
        )


def per_extension_set(
    build: Callable[[tuple[Extension, ...]], T],
) -> Callable[[Sequence[Extension]], T]:
    """``build`` computed once per set of extension objects (see the module docstring).

    What ``build`` returns is shared by every caller with the same set: it must not be changed.
    """

    @functools.lru_cache(maxsize=MAX_SETS)
    def cached(key: _ExtensionSet) -> T:
        return build(key.extensions)

    @functools.wraps(build)
    def lookup(extensions: Sequence[Extension]) -> T:
        return cached(_ExtensionSet(extensions))

    return lookup
