"""Long containers of scalars and tables, kept run by run: proof by identity that one still holds
what it held, and its chunk tree rebuilt only where it changed.

Reading data is the common block (``len(rows)``, ``rows[:5]``, a sum): the value is reached, so it
must be checked, but encoding 50,000 rows to learn that nothing changed costs tens of
milliseconds. For the shapes data usually has — a list or dict of scalars, a table (a list of
dicts, lists or tuples of scalars), a tuple of scalars — a ``Runs`` record keeps, for each run of
``RUN_ITEMS`` items (the runs of the value's chunk tree, ``cove.codec.tree``), the very objects
the value held when it was encoded and the name of the run's chunk. Scalars (int, float, complex,
str, bytes, bool, None) cannot change in place, so the same objects in the same order mean the
same value; comparing them by identity runs at C speed.

After a change (``nums.append(x)``, ``rows[7]["qty"] = 3``), ``encode`` compares run by run and
encodes only the runs whose objects differ; the others keep their chunk, so the new version's
tree costs what changed. Told what the mutation witness saw (``witness.py``), it compares only
what may have changed: after an append, the runs from the old end on; when no row was touched,
the rows' identities, not their cells. The tree it builds is exactly the one
``cove.codec.encode_tree`` builds for the value (same runs, same chunks, same root). Anything
else is left to the codec.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from itertools import chain
from operator import attrgetter, is_
from typing import Any, Literal

from cove.codec.chunks import RUN_ITEMS, Tree
from cove.codec.shapes import dumps
from cove.codec.tree import TreeEncoder, index, leaf

MAX_ELEMENTS = 4_000_000
"""The most references one record keeps (32 MB of pointers); bigger values are encoded whole."""

_SCALARS = frozenset({int, float, complex, str, bytes, bool, type(None)})
_ROWS = frozenset({dict, list, tuple})

Kind = Literal["list", "dict", "table", "tuple"]


Hint = tuple[bool | None, frozenset[int], int]
"""What the witness saw of a recorded value: its container touched (None: no; True: it only grew
at its end; False: in any way), the ids of its rows touched, and its recorded length."""


@dataclass
class _Run:
    """One run: the objects it held and the chunks it was stored as."""

    items: list[Any]  # a list's items, a dict's keys, a table's rows
    values: list[Any] | None  # a dict's values; the cells of a table of dicts
    cells: list[Any] | None  # a table's keys (dict rows) or items (list and tuple rows)
    lens: list[int] | None  # a table's row lengths
    name: str  # the run's chunk
    sizes: dict[str, int]  # every chunk making the run (a split run has several), by size
    # A run shorter than RUN_ITEMS (a value's last) keeps its items' trees and what encoding
    # them charged, when they made no chunk of their own: a run that then only grows encodes
    # its new items alone.
    trees: list[Any] | None = None
    charged: int = 0
    text: str = ""  # with ``trees``: their leaf text, which a grown run's extends


class Runs:
    """What a container held, run by run, and the tree it was encoded as."""

    __slots__ = ("full", "interior", "kind", "length", "obj", "runs", "tree")

    def __init__(
        self,
        kind: Kind,
        obj: Any,
        runs: list[_Run],
        tree: Tree,
        interior: dict[tuple[str, ...], tuple[str, int]] | None = None,
    ) -> None:
        self.kind = kind
        self.obj = obj
        self.length = len(obj)
        self.runs = runs
        self.tree = tree
        self.interior = interior or {}  # the tree's interior chunks (``TreeEncoder.interior``)
        # The chunks of the leading full runs, merged, with their count and total size: what
        # an append keeps, made once per run filled rather than once per append.
        self.full: tuple[int, dict[str, int], int] = (0, {}, 0)

    def holds(self, value: Any, hint: Hint | None = None) -> bool:
        """Whether ``value`` (the recorded object) holds the same objects in the same order
        (comparing only what ``hint`` says may have changed)."""
        if value is not self.obj or len(value) != self.length:
            return False
        if self.kind == "tuple":
            return True
        views = _views(self.kind, value)
        return all(
            _kept(self.kind, run, views, start, hint)
            for run, start in zip(self.runs, range(0, self.length, RUN_ITEMS), strict=True)
        )


def kind_of(value: object) -> Kind | None:
    """The shape ``value`` has among those ``Runs`` records, or None (found at C speed)."""
    kind = type(value)
    if kind is tuple:
        return "tuple" if set(map(type, value)) <= _SCALARS else None  # type: ignore[call-overload]
    if kind is dict:
        mapping: dict[Any, Any] = value  # type: ignore[assignment]
        if len(mapping) > MAX_ELEMENTS or not set(map(type, mapping)) <= _SCALARS:
            return None
        return "dict" if set(map(type, mapping.values())) <= _SCALARS else None
    if kind is not list or len(value) > MAX_ELEMENTS:  # type: ignore[arg-type]
        return None
    items: list[Any] = value  # type: ignore[assignment]
    kinds = set(map(type, items))
    if kinds <= _SCALARS:
        return "list"
    return "table" if _table(items, kinds) else None


def _table(rows: list[Any], kinds: set[type]) -> bool:
    """Whether ``rows`` are distinct dicts, or lists and tuples, of scalars."""
    if not (kinds == {dict} or kinds <= {list, tuple}):
        return False
    if sum(map(len, rows)) + len(rows) > MAX_ELEMENTS:
        return False
    if not set(map(type, chain.from_iterable(rows))) <= _SCALARS:
        return False
    return (
        kinds != {dict} or set(map(type, chain.from_iterable(map(dict.values, rows)))) <= _SCALARS
    )


def hint_of(previous: Runs, held: AbstractSet[int], touched: Mapping[int, bool]) -> Hint:
    """The ``Hint`` for ``previous`` (whose value holds the objects ``held``) from what the
    witness recorded (``touched``: by id, True when the object only grew)."""
    top = touched.get(id(previous.obj))
    rows = frozenset(key for key in touched if key in held and key != id(previous.obj))
    return top, rows, previous.length


def encode(
    value: Any,
    kind: Kind,
    enc: TreeEncoder,
    previous: Runs | None,
    hint: Hint | None = None,
    held: bool = False,
) -> tuple[Tree, Runs] | None:
    """The tree of ``value`` (of shape ``kind``) and its record, keeping ``previous``'s runs
    where they still hold the same objects and their chunks are known to ``enc``.

    ``hint`` (for ``previous``'s very object) says what may have changed since ``previous``;
    without it, every run is compared object by object. ``held``: the caller knows ``enc``
    knows every chunk of ``previous``'s tree (it is the tree the caller last reported).

    Returns None when a changed run no longer has the shape (the caller encodes it whole).
    """
    views = _views(kind, value)
    if kind == "tuple" or len(value) <= RUN_ITEMS:
        tree = enc.tree(value)  # short: encoded whole, recorded for ``holds`` only
        short = [] if kind == "tuple" or not value else [_record(kind, views, 0)]
        return tree, Runs(kind, value, short, tree)
    reuse = previous if previous is not None and previous.kind == kind else None
    enc.enter(value, 0)
    built = _kept_prefix(reuse, enc, hint, held)
    kept = len(built)
    try:
        for start in range(len(built) * RUN_ITEMS, len(value), RUN_ITEMS):
            number = start // RUN_ITEMS
            old = reuse.runs[number] if reuse is not None and number < len(reuse.runs) else None
            if (
                old is not None
                and _kept(kind, old, views, start, hint)
                and all(map(enc.known, old.sizes))
            ):
                for name, size in old.sizes.items():
                    enc.keep(name, None, size)
                enc.charge(sum(old.sizes.values()))
                built.append(old)
                continue
            grown = old if old is not None and _grew(kind, old, views, start, hint) else None
            run = _build(kind, views, start, enc, grown)
            if run is None:
                return None
            built.append(run)
    except UnicodeEncodeError:
        return None  # a string with lone surrogates: the codec encodes it again, tagged
    enc.leave(value)
    if reuse is not None:
        enc.earlier = reuse.interior
    node = index(enc, [run.name for run in built])
    root = dumps({"dict": node} if kind == "dict" else node)
    tree = enc.finish(root)
    record = Runs(kind, value, built, tree, dict(enc.interior))
    if reuse is not None and reuse.full[0] <= kept:  # the very runs it merged were kept
        record.full = reuse.full
    return tree, record


def _kept_prefix(reuse: Runs | None, enc: TreeEncoder, hint: Hint | None, held: bool) -> list[_Run]:
    """The leading runs of ``reuse`` that ``hint`` proves unchanged (an untouched container, or
    the full runs before the end of one that only grew, none of its rows touched), kept in one
    step when ``enc`` knows all their chunks (``held``: the caller knows it does); else none
    (the caller compares run by run)."""
    if reuse is None or hint is None or hint[1] or hint[0] is False:
        return []
    # Its full runs; a short last one is compared by the caller.
    count = min(len(reuse.runs), hint[2] // RUN_ITEMS)
    prefix = reuse.runs[:count]
    sizes, total = _merged(reuse, count)
    if not held and not all(map(enc.known, sizes)):
        return []
    enc.sizes.update(sizes)
    if enc.log is not None:
        enc.log.extend(sizes)
    enc.charge(total)
    return prefix


def _merged(reuse: Runs, count: int) -> tuple[dict[str, int], int]:
    """The chunks of ``reuse``'s first ``count`` runs (full ones), merged, and their total
    size: kept on the record (``Runs.full``) and extended when a run filled, so an append
    costs its own run, not every run's."""
    made, sizes, total = reuse.full
    if made > count:
        made, sizes, total = 0, {}, 0
    if count > made:
        per_run = list(map(attrgetter("sizes"), reuse.runs[made:count]))  # C-speed
        sizes = dict(sizes)  # the record's own stays as it was
        sizes.update(chain.from_iterable(map(dict.items, per_run)))
        total += sum(map(sum, map(dict.values, per_run)))
        reuse.full = (count, sizes, total)
    return sizes, total


def _views(kind: Kind, value: Any) -> tuple[list[Any], list[Any] | None]:
    """A dict's keys and values as lists (sliced by position); a list's items as they are."""
    if kind == "dict":
        return list(value), list(value.values())
    return value, None


def _kept(
    kind: Kind,
    run: _Run,
    views: tuple[list[Any], list[Any] | None],
    start: int,
    hint: Hint | None,
) -> bool:
    """Whether the run at ``start`` holds what ``run`` recorded, comparing only what ``hint``
    says may have changed."""
    if hint is None:
        return _same(kind, run, views, start)
    top, rows, length = hint
    if top is None or (top is True and start + RUN_ITEMS <= length):
        # The same items (an untouched container, or a full run before its old end).
        if not rows or rows.isdisjoint(map(id, views[0][start : start + RUN_ITEMS])):
            return True  # and none of its rows touched
        return _same(kind, run, views, start)
    if kind == "table" and not rows:
        segment = views[0][start : start + RUN_ITEMS]
        return len(segment) == len(run.items) and all(map(is_, segment, run.items))
    return _same(kind, run, views, start)


def _grew(
    kind: Kind,
    run: _Run,
    views: tuple[list[Any], list[Any] | None],
    start: int,
    hint: Hint | None,
) -> bool:
    """Whether the run at ``start`` begins with exactly what ``run`` recorded and holds more
    (a last run that only grew), with ``run``'s item trees kept to build on."""
    held = len(run.items)
    if run.trees is None or len(views[0]) - start <= held:
        return False
    if hint is not None and hint[0] is True and start + held <= hint[2]:
        rows = hint[1]
        if not rows or rows.isdisjoint(map(id, run.items)):
            return True  # only grew at its end, none of these rows touched
    return _same(kind, run, views, start, start + held)


def _same(
    kind: Kind,
    run: _Run,
    views: tuple[list[Any], list[Any] | None],
    start: int,
    stop: int | None = None,
) -> bool:
    """Whether the run at ``start`` (up to ``stop``, its end by default) holds the objects
    ``run`` recorded."""
    items, values = views
    end = start + RUN_ITEMS if stop is None else stop
    segment = items[start:end]
    if len(segment) != len(run.items) or not all(map(is_, segment, run.items)):
        return False
    if kind == "dict":
        assert values is not None and run.values is not None
        return all(map(is_, values[start:end], run.values))
    if kind != "table":
        return True
    if list(map(len, segment)) != run.lens:
        return False
    if not all(map(is_, chain.from_iterable(segment), run.cells or ())):
        return False
    return run.values is None or all(
        map(is_, chain.from_iterable(map(dict.values, segment)), run.values)
    )


def _record(kind: Kind, views: tuple[list[Any], list[Any] | None], start: int) -> _Run:
    """The objects the run at ``start`` holds (its chunk not named yet)."""
    items, values = views
    segment = items[start : start + RUN_ITEMS]
    run = _Run(segment, None, None, None, "", {})
    if kind == "dict":
        assert values is not None
        run.values = values[start : start + RUN_ITEMS]
    elif kind == "table":
        run.lens = list(map(len, segment))
        run.cells = list(chain.from_iterable(segment))
        if segment and type(segment[0]) is dict:
            run.values = list(chain.from_iterable(map(dict.values, segment)))
    return run


def _build(
    kind: Kind,
    views: tuple[list[Any], list[Any] | None],
    start: int,
    enc: TreeEncoder,
    grown: _Run | None = None,
) -> _Run | None:
    """Encode the run at ``start`` anew (only the items past ``grown``'s, a run it extends);
    None when it no longer has the shape."""
    run = _record(kind, views, start)
    segment = run.items
    kinds = set(map(type, segment))
    if kind == "table":
        if not _table(segment, kinds):
            return None
    elif not kinds <= _SCALARS:
        return None
    elif kind == "dict":
        assert run.values is not None
        if not set(map(type, run.values)) <= _SCALARS:
            return None
    kept: list[Any] = grown.trees or [] if grown is not None else []
    # What encoding the kept items charged, less the list overhead charged again below.
    base = grown.charged - (2 if kind == "dict" else 1) if grown is not None and kept else 0
    enc.charge(base)
    used, chunks = enc.used, len(enc.sizes)
    fresh = segment[len(kept) :]
    if kind == "dict":
        assert run.values is not None
        keys = enc.trees(fresh, len(fresh), 1)
        values = enc.trees(run.values[len(kept) :], len(fresh), 1)
        added = [[key, value] for key, value in zip(keys, values, strict=True)]
    else:
        added = enc.trees(fresh, len(fresh), 1)
    trees = kept + added
    # The leaf text of kept + added is the kept one's extended (the codec's JSON is compact).
    text = (
        f"{grown.text[:-1]},{dumps(added)[1:]}" if kept and grown and grown.text else dumps(trees)
    )
    if len(segment) < RUN_ITEMS and len(enc.sizes) == chunks:
        run.trees, run.charged, run.text = trees, base + enc.used - used, text
    enc.log = []
    run.name = leaf(enc, trees, text)
    run.sizes = {name: enc.sizes[name] for name in enc.log}
    enc.log = None
    return run
