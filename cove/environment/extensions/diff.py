"""``var_diff`` of two versions whose values are chunked: what it reads is what differs.

Two versions of a long list (or dict, tuple, set...) share every run an edit did not touch
(``cove.codec.chunks``). Their item lists are compared as sequences of chunk names: a name both
sides hold stands for the same items and is never read; only the names one side lacks are opened
(interior chunks to their children, until leaves remain), and only the differing leaves are
decoded and diffed item by item. So the diff of a changed element of a million-item list reads a
few chunks, not the list. Values of any other form are diffed whole, up to ``WHOLE_LIMIT`` bytes.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import pprint
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from cove import codec
from cove.codec.preview import text_of
from cove.codec.shapes import dumps

Read = Callable[[list[str]], Awaitable[dict[str, bytes]]]
"""Reads chunks by name (those it has)."""

ReadTree = Callable[[list[str]], Awaitable[dict[str, bytes]]]
"""Reads every chunk the given roots reach."""

WHOLE_LIMIT = 16 * 1024 * 1024
"""Chunk bytes a value may have to be diffed whole (forms other than an item list)."""

_PAIRS = frozenset({"dict", "odict", "counter"})


@dataclass(frozen=True)
class Items:
    """A root whose value is an item list in runs: its form and its runs' chunk names."""

    form: str  # "list", or the tag whose payload the runs are ("tuple", "dict"...)
    names: list[str]


def items_of(root: str) -> Items | None:
    """The runs of a root that is a list value (or a one-tag value of a list) in runs."""
    try:
        tree = json.loads(root)
    except ValueError:
        return None
    if type(tree) is dict and len(tree) == 1:
        ((tag, payload),) = tree.items()
        if tag == "runs" and type(payload) is list:
            return Items("list", payload)
        if type(payload) is dict and list(payload) == ["runs"] and type(payload["runs"]) is list:
            return Items(tag, payload["runs"])
    return None


async def leaves(old: list[str], new: list[str], read: Read) -> tuple[list[str], list[str]]:
    """The two name sequences, with every name only one side holds opened down to leaves (a
    name both hold stands for the same items and stays closed)."""
    while True:
        shared = set(old) & set(new)
        closed = [name for name in dict.fromkeys(old + new) if name not in shared]
        found = await read(closed) if closed else {}
        inner = {
            name: json.loads(data)["runs"]
            for name, data in found.items()
            if data[:1] == b"{"  # an interior chunk: {"runs": [...]}
        }
        if not inner:
            return old, new
        old = [part for name in old for part in inner.get(name, [name])]
        new = [part for name in new for part in inner.get(name, [name])]


async def item_lines(form: str, names: list[str], read_tree: ReadTree) -> list[str]:
    """The lines of the items held by leaf chunks ``names`` (each item one or more lines)."""
    if not names:
        return []
    root = dumps({"runs": names})
    chunks = await read_tree([root])
    items = codec.decode(root, chunks=chunks.__getitem__)
    lines: list[str] = []
    for item in items:
        if form in _PAIRS or (form == "defaultdict"):
            key, value = item
            lines.extend(f"{_text(key)}: {_text(value)}".splitlines() or [""])
        else:
            lines.extend(_text(item).splitlines() or [""])
    return lines


async def runs_diff(
    old: Items, new: Items, labels: tuple[str, str], read: Read, read_tree: ReadTree, limit: int
) -> tuple[list[str], bool]:
    """Diff lines of two item lists in runs, reading only the runs that differ; and whether the
    lines were cut at ``limit``."""
    before, after = await leaves(old.names, new.names, read)
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    lines = [f"--- {labels[0]}", f"+++ {labels[1]}"]
    same_runs = 0
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            same_runs += i2 - i1
            continue
        removed = await item_lines(old.form, before[i1:i2], read_tree)
        added = await item_lines(new.form, after[j1:j2], read_tree)
        cut = len(removed) > limit or len(added) > limit
        # difflib is quadratic at worst: its input is cut first, like a whole diff's.
        hunk = await asyncio.to_thread(_hunk, removed[:limit], added[:limit])
        lines.extend(hunk)
        if cut or len(lines) > limit:
            return lines[:limit], True
    if same_runs:
        lines.append("[the other items are unchanged (shared chunks: neither read nor shown)]")
    return lines, False


def _hunk(removed: list[str], added: list[str]) -> list[str]:
    return list(difflib.unified_diff(removed, added, lineterm="", n=2))[2:]


def _text(value: Any) -> str:
    try:
        return pprint.pformat(value, width=88, sort_dicts=False)
    except ValueError:  # an int past the digit limit of str()
        return text_of(value)
