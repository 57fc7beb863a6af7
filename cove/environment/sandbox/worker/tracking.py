"""Variable tracking inside the worker: which user variables a block created, changed or deleted.

A variable's snapshot is its codec encoding as a tree of chunks (``cove.codec.tree``), named by
the digest of its root, so mutation in place (``xs.append(1)``) counts as a change. A snapshot
carries the chunks the host does not hold yet: the tracker keeps the names of every chunk of the
trees it reported (the host keeps the same set), so a new version sends what changed. After a
block only the variables it could have touched are checked, so a block's cost follows what it
touched, not what the sandbox holds:

- the names its code objects use, and, transitively, the names used by the code of every
  function, method, class or generator reachable from those names' values (``reach.py``);
- every variable whose value shares an object with what the block reached (an alias, an element
  held in two containers), found through an index of which variables hold which objects;
- when a checked variable changed, every variable sharing an object with its old or new value.

A checked value is the same when it is the same immutable object (an int, a str...), or the same
container of scalars (or table of them) none of whose objects the mutation witness saw touched
(``witness.py``: no check at all, so ``len(rows)`` costs what reading costs), else when its tree's
digest is unchanged. A container of scalars or a table whose objects were touched is compared by
the identity of what it holds (``runs.py``), at the level that was touched: a list that only grew,
its new tail; rows untouched, not their cells; and only the runs that changed are encoded again.
When the witness could not attribute a change (it was flagged), every such value is compared in
full the next time it is checked. If the namespace holds a binding no name led to, every name is
compared once.
Functions and classes defined at the top level of a block keep the source of their definition and
what it read (a ``Definition``, see ``provenance.py``; looked up by object, so ``g = f`` keeps
``f``'s) and are reported as ``kind="function"``. Values the codec refuses or whose encoding
exceeds ``value_limit`` (the absolute cap on one value, in bytes) are ``opaque``. Curated modules,
their members and builtins (extension functions included) bound to a name are import bindings,
tracked separately and never reported as variables.
"""

from __future__ import annotations

import contextlib
import inspect
import weakref
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from fractions import Fraction
from types import CodeType, FunctionType
from typing import Any

from cove import codec
from cove.codec.chunks import Tree, has_refs, text_hash
from cove.codec.shapes import Definition, DefinitionKind, Reads
from cove.codec.tree import TreeEncoder
from cove.environment.sandbox.worker import runs
from cove.environment.sandbox.worker.modules import ModuleTable
from cove.environment.sandbox.worker.reach import Reach
from cove.environment.sandbox.worker.runs import Runs
from cove.environment.sandbox.worker.witness import Witness, pure_member

MAX_DEPTH = 100
"""The deepest nesting of containers a snapshot may hold."""

REPORT_BUDGET_BYTES = 512 * 1024 * 1024
"""New chunks one report may carry (sent in frames of their own); past it, changes are opaque."""

ImportRef = tuple[str, str | None]
"""``(module, member)``: ``("math", None)`` is ``import math``; module ``"builtins"`` names a
builtin or an extension function bound to another name."""

# Values of these exact types cannot change in place: the same object means the same value.
_IMMUTABLE = frozenset(
    {int, float, complex, str, bytes, bool, type(None), Decimal, Fraction, date, datetime, time,
     timedelta}
)  # fmt: skip


@dataclass
class _Tracked:
    value: object
    digest: str  # of its tree's root (of its opaque record when it has no tree)
    # The objects the value is made of (a ``set``, once grown in place, is this record's own).
    ids: AbstractSet[int] = frozenset()
    runs: Runs | None = None  # for a container of scalars or a table: what it held, by identity
    closure: frozenset[str] = frozenset()  # the chunks of the tree reported for it (host-held)
    quick: str | None = None  # an array's or a pandas value's buffer fingerprint
    token: str | None = None  # its provenance token, once asked for
    armed: bool = False  # it held a callable a later call of which no guard sees (``reach.py``)

    def unchanged(self, value: object) -> bool:
        """Whether ``value`` is the tracked object, provably holding what it held (no encode)."""
        if value is not self.value:
            return False
        return type(value) in _IMMUTABLE or (self.runs is not None and self.runs.holds(value))


class _Owners:
    """Which variables' values hold each object (by id): how a change is traced to aliases."""

    def __init__(self) -> None:
        self._by_id: dict[int, str | set[str]] = {}  # one owner is the common case: no set
        self.shared: set[int] = set()
        """Ids of objects held by more than one variable."""

    def names_for(self, keys: Iterable[int]) -> set[str]:
        """Every variable holding one of the objects ``keys``."""
        names: set[str] = set()
        by_id = self._by_id
        for key in keys:
            found = by_id.get(key)
            if found is None:
                continue
            if isinstance(found, str):
                names.add(found)
            else:
                names.update(found)
        return names

    def add(self, name: str, ids: Iterable[int]) -> None:
        by_id = self._by_id
        for key in ids:
            found = by_id.setdefault(key, name)
            if found is name or found == name:
                continue
            if isinstance(found, str):
                by_id[key] = {found, name}
                self.shared.add(key)
            else:
                found.add(name)

    def remove(self, name: str, ids: Iterable[int]) -> None:
        by_id = self._by_id
        for key in ids:
            found = by_id.get(key)
            if found is None:
                continue
            if isinstance(found, str):
                if found == name:
                    del by_id[key]
            else:
                found.discard(name)
                if len(found) == 1:
                    by_id[key] = next(iter(found))
                    self.shared.discard(key)

    def clear(self) -> None:
        self._by_id.clear()
        self.shared.clear()


def deleted(name: str) -> dict[str, Any]:
    """The wire form of a ``deleted`` snapshot."""
    return {"name": name, "kind": "deleted", "encoded": None, "type_name": "", "preview": ""}


class VariableTracker:
    """The worker's record of user variables, definition sources and import bindings."""

    def __init__(
        self,
        *,
        value_limit: int,
        modules: ModuleTable,
        builtins: dict[str, Any],
        namespace: dict[str, Any] | None = None,
        witness: Witness | None = None,
    ):
        self.value_limit = value_limit
        self.witness = Witness() if witness is None else witness
        self.modules = modules
        self.builtins = builtins
        self.namespace: dict[str, Any] = {} if namespace is None else namespace
        self.sources: weakref.WeakKeyDictionary[Any, Definition] = weakref.WeakKeyDictionary()
        self.state: dict[str, _Tracked] = {}
        self.imports: dict[str, ImportRef] = {}
        self.encodes = 0
        """How many snapshots were encoded: a check's cost, observable by tests."""
        self.known: dict[str, int] = {}
        """Every chunk of the trees reported for the tracked variables (as the host holds them),
        with how many variables' trees hold it."""
        self.outbox: dict[str, bytes] = {}
        """The chunks the changes reported since ``take_outbox`` need and the host lacks."""
        self._owners = _Owners()
        self._hidden: int | None = None  # names starting with "_"; None: count on the next check
        self._budget = REPORT_BUDGET_BYTES
        self._proven: set[str] = set()  # reached this check, shown unchanged without an encode
        self._skipped: set[str] = set()  # reached this check, not walked: its recorded ids kept
        self._suspect: set[str] = set()  # changed maybe unseen by the witness: compare in full
        self._touched: dict[int, bool] = {}  # the witness's record, for this check
        self._armed: set[str] = set()  # the names whose walk this check met such callables
        self._index: dict[int, ImportRef] = {}
        self._index_key: tuple[int, int] | None = None

    def source_of(self, value: object) -> Definition | None:
        """The recorded definition of a function or class made in the sandbox (the codec's
        ``source_of``)."""
        try:
            return self.sources.get(value)
        except TypeError:  # unhashable or not weak-referenceable
            return None

    def remember(self, made: list[tuple[object, str, Reads]]) -> None:
        """Record, for each object a top-level definition statement made, that statement's source
        and what it read (``provenance.py``).

        ``made`` comes from the statements themselves (``policy.DEFINE_HOOK``), in the order they
        ran, so the source is the one of the branch that actually ran, never another statement
        that merely binds the same name.
        """
        for value, source, reads in made:
            if isinstance(value, FunctionType | type):
                kind: DefinitionKind = "class" if isinstance(value, type) else "function"
                with contextlib.suppress(TypeError):
                    self.sources[value] = Definition(kind, value.__name__, source, reads)

    def import_ref(self, value: object) -> ImportRef | None:
        """The import binding ``value`` is (a curated module, member or builtin), or None."""
        return self._import_ref(value)

    def fingerprint_of(self, name: str, value: object) -> str | None:
        """The fingerprint of ``value`` (None when it has none): its buffers' for an array or a
        pandas value, else its codec encoding's. ``name``'s, kept, when it provably still holds
        it (a definition's reads record these; ``provenance.py``)."""
        old = self.state.get(name)
        if old is not None and self.namespace.get(name) is value and old.unchanged(value):
            if old.token is None:
                old.token = self._token(value)
            return old.token
        return self._token(value)

    def _token(self, value: object) -> str | None:
        quick = codec.data_fingerprint(value)
        if quick is not None:
            return quick
        try:
            return codec.fingerprint(self.encode(value))
        except MemoryError:
            raise
        except Exception:  # CodecError, or a RecursionError from a hostile structure
            return None

    def holders(self, objects: Iterable[int]) -> set[str]:
        """The tracked variables whose values hold one of ``objects`` (ids), as last checked."""
        return self._owners.names_for(objects)

    def resolve(self, ref: ImportRef) -> Any:
        """The object an import binding refers to.

        Raises:
            ImportError: The module or member no longer exists.
            KeyError: A builtin of that name no longer exists.
        """
        module, member = ref
        if module == "builtins":
            return self.builtins[member or ""]
        namespace = self.modules.get(module)
        return namespace if member is None else getattr(namespace, member)

    def changes(
        self, namespace: dict[str, Any], codes: Sequence[CodeType] | None = None
    ) -> list[dict[str, Any]]:
        """Snapshots of the variables created, changed or deleted since the last call.

        Args:
            namespace: The sandbox's globals.
            codes: The code objects run since the last call (the block's). Only the variables
                they can reach are checked (see the module docstring); None checks every one.
        """
        self.namespace = namespace
        self._proven.clear()
        self._skipped.clear()
        touched, anything = self.witness.take()
        reach = self._reach()
        candidates = self._candidates(namespace, codes, reach)
        for key, grown in reach.witness.touched.items():  # receivers of held methods
            if not grown or touched.get(key, True):
                touched[key] = grown
        self._armed = reach.armed
        if anything or reach.witness.anything or codes is None or self._armed_before(candidates):
            self._suspect = set(self.state)
        self._touched = touched
        found: list[dict[str, Any]] = []
        self._budget = REPORT_BUDGET_BYTES - sum(map(len, self.outbox.values()))
        pending = list(candidates)
        checked: set[str] = set()
        for name in pending:  # grows while it runs: co-holders of changed values are appended
            if name in checked or name.startswith("_"):
                continue
            checked.add(name)
            also = self._check_safely(namespace, name, found, reach.walked.get(name))
            pending.extend(sorted(also - checked))
        self._sweep(namespace, checked, found)
        # What was touched in values this check did not look at stays for a later one.
        self._touched = {}
        self.witness.put_back(
            {key: grown for key, grown in touched.items() if self.holders((key,)) - checked}
        )
        return found

    def _armed_before(self, candidates: Iterable[str]) -> bool:
        """Whether a candidate held, when last checked, a callable whose call no guard sees (a
        bound method, an impure module's function): the block may have called it and dropped
        it (``box.pop()(1)``), so the walk after it cannot tell what it touched."""
        for name in candidates:
            old = self.state.get(name)
            if old is not None and old.armed:
                return True
            module, member = self.imports.get(name, ("builtins", None))
            if member is not None and module != "builtins" and not pure_member(module, member):
                return True  # a module's member is named: a module is fetched from by a guard
        return False

    def _candidates(
        self, namespace: dict[str, Any], codes: Sequence[CodeType] | None, reach: Reach
    ) -> dict[str, None]:
        """The names to check first, in order: those the code reached, and their co-holders."""
        if codes is None:
            return dict.fromkeys(n for n in namespace if not n.startswith("_"))
        reach.from_code(codes)
        candidates = dict.fromkeys(reach.names)
        for name, (_, ids) in reach.walked.items():
            old = self.state.get(name)
            # Other holders of a reached object: shared ones, and any the value newly holds.
            keys = ids & self._owners.shared
            if (
                old is None
                or old.value is not reach.namespace.get(name)
                or (ids is not old.ids and ids != old.ids)
            ):
                keys |= ids - (old.ids if old is not None else frozenset())
            candidates.update(dict.fromkeys(sorted(self._owners.names_for(keys))))
        return candidates

    def _sweep(
        self, namespace: dict[str, Any], checked: set[str], found: list[dict[str, Any]]
    ) -> None:
        """When the namespace holds a binding no name led to, compare every name once."""
        expected = -1
        if self._hidden is not None:
            expected = self._hidden + len(self.state) + len(self.imports)
        if len(namespace) == expected:
            return
        for name in [n for n in namespace if not n.startswith("_") and n not in checked]:
            if name not in self.state and name not in self.imports:
                self._check_safely(namespace, name, found, None)
        for name in [n for n in (*self.state, *self.imports) if n not in namespace]:
            self._check_safely(namespace, name, found, None)
        self._hidden = sum(1 for n in namespace if n.startswith("_"))

    def _check_safely(
        self,
        namespace: dict[str, Any],
        name: str,
        found: list[dict[str, Any]],
        walked: tuple[object, AbstractSet[int]] | None,
    ) -> set[str]:
        """``_check``, failing closed: a value the tracker cannot handle (a foreign type whose
        hash, comparison or traversal raises) is reported opaque, never an error."""
        try:
            return self._check(namespace, name, found, walked)
        except MemoryError:
            raise
        except Exception:
            value = namespace.get(name)
            self._untrack_quietly(name)
            found.append(
                {"name": name, "kind": "opaque", "encoded": None, "preview": codec.preview(value),
                 "type_name": _type_name(value), "size": None}
            )  # fmt: skip
            return set()

    def _untrack_quietly(self, name: str) -> None:
        if name in self.state:
            with contextlib.suppress(Exception):
                self._untrack(name)
            self.state.pop(name, None)
        self.imports.pop(name, None)

    def _check(
        self,
        namespace: dict[str, Any],
        name: str,
        found: list[dict[str, Any]],
        walked: tuple[object, AbstractSet[int]] | None,
    ) -> set[str]:
        """Bring ``name``'s tracking up to date; if it changed, the variables sharing with it."""
        old = self.state.get(name)
        if name not in namespace:
            self.imports.pop(name, None)
            return self._gone(name, found) if old is not None else set()
        value = namespace[name]
        if name in self._proven or (old is not None and self._same(name, old, value)):
            return set()  # the same object, provably holding the same: nothing to encode
        if name in self._skipped:
            walked = None  # the walk kept its recorded ids: not what it holds now
        if old is None or old.value is not value:
            ref = self._import_ref(value)
            if ref is not None:
                self.imports[name] = ref
                return self._gone(name, found) if old is not None else set()
            self.imports.pop(name, None)
        return self._compare(name, value, old, found, walked)

    def _same(self, name: str, old: _Tracked, value: object) -> bool:
        """Whether ``value`` is ``old``'s object, provably holding what it held: an immutable
        object; a container of scalars or a table none of whose objects the witness saw touched
        (or, when the witness was flagged since its last full comparison, holding the very
        objects it held)."""
        if value is not old.value:
            return False
        if type(value) in _IMMUTABLE:
            return True
        if old.runs is None:
            return False
        if name in self._suspect:
            if not old.runs.holds(value):
                return False
            self._suspect.discard(name)
            return True
        if old.ids.isdisjoint(self._touched):
            return True
        return old.runs.holds(value, runs.hint_of(old.runs, old.ids, self._touched))

    def _gone(self, name: str, found: list[dict[str, Any]]) -> set[str]:
        """A tracked value is no longer a variable (deleted, or now an import)."""
        found.append(deleted(name))
        return self._untrack(name)

    def _compare(
        self,
        name: str,
        value: object,
        old: _Tracked | None,
        found: list[dict[str, Any]],
        walked: tuple[object, AbstractSet[int]] | None,
    ) -> set[str]:
        """Snapshot ``value`` and report it when its content changed; track it either way.

        An array or a pandas value is first compared by a hash of its buffers: unchanged, it is
        not encoded at all."""
        ids = walked[1] if walked is not None and walked[0] is value else None
        delta: tuple[AbstractSet[int], AbstractSet[int]] | None = None
        quick = codec.data_fingerprint(value)
        if quick is not None and old is not None and old.value is value and old.quick == quick:
            return self._retrack(name, value, old, ids)
        snapshot, record, tree = self.snapshot(name, value, old)
        record.quick = quick
        if ids is None and old is not None and record.runs is not None and old.runs is not None:
            ids, delta = self._held_now(name, value, old, record.runs)
        if old is not None and old.digest == record.digest:
            # Same content (maybe in another object): the host's tree is this tree.
            record.closure, record.token = old.closure, old.token
            return self._track(name, record, ids, delta)
        if tree is not None:
            fresh = {n: d for n, d in tree.chunks.items() if not self._held(n)}
            self._budget -= len(tree.root) + sum(map(len, fresh.values()))
            if self._budget < 0:  # too much changed at once to carry: keep the report sendable
                snapshot.update(kind="opaque", encoded=None, signature=None)
            else:
                self.outbox.update(fresh)
                record.closure = tree.closure
        found.append(snapshot)
        return self._track(name, record, ids, delta)

    def _held_now(
        self, name: str, value: object, old: _Tracked, record: Runs
    ) -> tuple[AbstractSet[int] | None, tuple[AbstractSet[int], AbstractSet[int]] | None]:
        """The objects ``value`` (still of ``old``'s shape) holds, from ``old``'s and what the
        witness saw, without a walk, with what was added and removed; ``(None, None)`` when they
        must be found by a walk."""
        if value is not old.value or old.runs is None or record.kind != old.runs.kind:
            return None, None
        none: tuple[AbstractSet[int], AbstractSet[int]] = (frozenset(), frozenset())
        if record.kind != "table":
            return old.ids, none  # the container itself
        if name in self._suspect:
            return None, None
        if id(value) not in self._touched:
            return old.ids, none  # the very rows it held
        if self._touched[id(value)]:  # it only grew: its old rows, and the new ones
            rows: list[Any] = value  # type: ignore[assignment]
            added = frozenset(map(id, rows[old.runs.length :])) - old.ids
            # A record's ``set`` of ids is its own (only made here): from the second append
            # on, the rows' ids grow in place instead of being copied (50,000 ids: ~3 ms).
            ids = old.ids if type(old.ids) is set else set(old.ids)
            ids |= added
            return ids, (added, frozenset())
        return None, None

    def _retrack(
        self, name: str, value: object, old: _Tracked, ids: AbstractSet[int] | None
    ) -> set[str]:
        """``name`` provably holds what it held: only its index of held objects may change (an
        element swapped for an equal object, which a later change through it concerns)."""
        if ids is None:
            ids = self._objects_of(value)[0]
        if ids == old.ids:
            return set()
        return self._track(name, replace(old, ids=ids), ids)

    def _track(
        self,
        name: str,
        record: _Tracked,
        ids: AbstractSet[int] | None = None,
        delta: tuple[AbstractSet[int], AbstractSet[int]] | None = None,
    ) -> set[str]:
        """Record ``name``'s value; the other variables holding objects it held or now holds.

        ``delta``, when known, is ``(added, removed)``: the ids ``ids`` has that the recorded
        value had not, and the reverse (a table that grew by one row costs that row)."""
        if ids is None:
            (ids, record.armed), delta = self._objects_of(record.value), None
        else:
            record.armed = name in self._armed
        record.ids = ids
        old = self.state.get(name)
        before = old.ids if old is not None else frozenset()
        if old is None or delta is None:
            delta = (ids - before, before - ids) if ids is not before else (frozenset(),) * 2
        added, removed = delta
        # Before the index changes: holders of what it shared, and of what it newly holds.
        shared = self._owners.shared  # small: intersections cost its size, not the value's
        others = self._owners.names_for((before & shared) | (ids & shared) | added)
        others.discard(name)
        self._owners.remove(name, removed)  # only the difference: a big value that
        self._owners.add(name, added)  # grew by one row costs one index entry
        self._suspect.discard(name)
        self._hold(record.closure, old.closure if old is not None else frozenset())
        self.state[name] = record
        return others

    def _hold(self, closure: frozenset[str], before: frozenset[str]) -> None:
        """Move the known chunks from a variable's ``before`` tree to its new one."""
        if closure is before:
            return
        known = self.known
        for name in closure - before:  # what both trees reach keeps its count
            known[name] = known.get(name, 0) + 1
        for name in before - closure:
            left = known[name] - 1
            if left:
                known[name] = left
            else:
                del known[name]

    def _held(self, name: str) -> bool:
        """Whether the host holds chunk ``name`` or is about to receive it."""
        return name in self.known or name in self.outbox

    def take_outbox(self) -> dict[str, bytes]:
        """The chunks to send with the report (children before parents); empties the outbox."""
        out, self.outbox = self.outbox, {}
        return out

    def _untrack(self, name: str) -> set[str]:
        old = self.state.pop(name)
        self._suspect.discard(name)
        others = self._owners.names_for(old.ids & self._owners.shared)
        others.discard(name)
        self._owners.remove(name, old.ids)
        self._hold(frozenset(), old.closure)
        return others

    def _objects_of(self, value: object) -> tuple[frozenset[int], bool]:
        """The ids of the objects ``value`` is made of; whether it holds a callable the witness
        must hear of (``reach.Reach.armed``)."""
        if type(value) in _IMMUTABLE:
            return frozenset(), False
        reach = self._reach()
        ids = reach.objects_of(value)[0]
        return ids, reach.met > 0

    def _reach(self) -> Reach:
        return Reach(self.namespace, self.builtins, self._is_sandbox_class, self._known, self._pure)

    def _known(self, name: str, value: object) -> AbstractSet[int] | None:
        """The held objects of a variable that holds no code, without a walk: an immutable
        object, or the container of scalars (or table) it was (whether it still holds what it
        held is for the check to say; until then, its ids are the recorded ones)."""
        old = self.state.get(name)
        if old is None or old.value is not value:
            return None
        if type(value) in _IMMUTABLE:
            self._proven.add(name)
        elif old.runs is not None:
            self._skipped.add(name)
        else:
            return None
        return old.ids

    def _pure(self, value: object) -> bool:
        """Whether ``value`` is an import binding that never changes its arguments (a builtin,
        an extension function, a member of a module in ``witness.PURE_MODULES``)."""
        ref = self._import_ref(value)
        if ref is None:
            return False
        module, member = ref
        return module == "builtins" or (member is not None and pure_member(module, member))

    def adopt(self, name: str, value: object, encoded: str, closure: frozenset[str]) -> None:
        """Take a restored variable as unchanged.

        Args:
            name: The variable.
            value: What was restored.
            encoded: The stored root it was decoded from.
            closure: The chunks that root reaches (the host holds them).
        """
        try:
            record = self._encoded(value, None, lambda chunk: True)[0]
        except MemoryError:
            raise
        except Exception:  # it decoded, so it encodes; but never fail a restore over it
            record = _Tracked(value, text_hash(encoded))
        record.closure = closure
        record.quick = codec.data_fingerprint(value)
        if record.quick is not None:
            record.token = record.quick
        elif not has_refs(encoded):
            record.token = codec.fingerprint(encoded)  # the encoding itself
        self._track(name, record)

    def forget_all(self) -> None:
        """Drop every tracked variable and import binding (before a full restore)."""
        self.state.clear()
        self.imports.clear()
        self.known.clear()
        self.outbox.clear()
        self._owners.clear()
        self._suspect.clear()
        self._hidden = None

    def encode(self, value: object, limit: int | None = None) -> str:
        """Encode ``value`` as one text (a block's value, a call's arguments), within ``limit``
        bytes (default: ``value_limit``).

        Raises:
            CodecError: The value cannot be encoded (``ValueTooLarge`` when over the limits).
        """
        return codec.encode(
            value,
            source_of=self.source_of,
            max_bytes=self.value_limit if limit is None else limit,
            max_depth=MAX_DEPTH,
        )

    def snapshot(
        self, name: str, value: object, old: _Tracked | None = None
    ) -> tuple[dict[str, Any], _Tracked, Tree | None]:
        """The wire form of ``value``'s snapshot, its record and its tree (None when opaque)."""
        self.encodes += 1
        try:
            record, tree = self._encoded(value, old, self._held, name)
        except MemoryError:
            raise
        except Exception:  # CodecError, or a RecursionError from a hostile structure
            record, tree = None, None
        source = self.source_of(value) if isinstance(value, FunctionType | type) else None
        snapshot: dict[str, Any] = {
            "name": name,
            "kind": "value",
            "encoded": tree.root if tree is not None else None,
            "type_name": type(value).__name__,
            "preview": codec.preview(value),
            "size": codec.size_of(value),
        }
        if record is None:
            snapshot["kind"] = "opaque"
            return snapshot, _Tracked(value, text_hash(codec.encode_opaque(value))), None
        if source is not None:
            snapshot["kind"] = "function"
            snapshot["signature"] = snapshot["preview"] = signature_of(name, value)
        return snapshot, record, tree

    def _encoded(
        self, value: object, old: _Tracked | None, known: Any, name: str = ""
    ) -> tuple[_Tracked, Tree]:
        """``value``'s tree (run by run when it has one of the shapes of ``runs.py``, keeping
        ``old``'s runs that still hold the same objects) and its new record.

        Raises:
            CodecError: The value cannot be encoded, or not within ``value_limit``.
        """
        limits = {"max_bytes": self.value_limit, "max_depth": MAX_DEPTH}
        previous = old.runs if old is not None and old.value is value else None
        kind = previous.kind if previous is not None else runs.kind_of(value)
        if kind is not None:
            encoder = TreeEncoder(source_of=self.source_of, known=known, **limits)
            hint, held = None, False
            if previous is not None and old is not None and name not in self._suspect:
                hint = runs.hint_of(previous, old.ids, self._touched)
                held = old.closure is previous.tree.closure  # reported whole: host-held
            done = runs.encode(value, kind, encoder, previous, hint, held)
            if done is not None:
                tree, record = done
                return _Tracked(value, tree.digest, runs=record), tree
        tree = TreeEncoder(source_of=self.source_of, known=known, **limits).tree(value)
        return _Tracked(value, tree.digest), tree

    def _is_sandbox_class(self, cls: type) -> bool:
        # Read through ``type`` so a class cannot answer for itself.
        module = type.__dict__["__module__"].__get__(cls)
        return type(module) is str and module == "sandbox"

    def _import_ref(self, value: object) -> ImportRef | None:
        """The import binding ``value`` is, if it is a curated module, member or builtin."""
        # Extension proxies are rebound every turn and modules load on import: re-index then.
        key = (len(self.modules.loaded()), sum(map(id, self.builtins.values())))
        if key != self._index_key:
            self._index, self._index_key = self._import_index(), key
        return self._index.get(id(value))

    def _import_index(self) -> dict[int, ImportRef]:
        index: dict[int, ImportRef] = {}
        for name, value in self.builtins.items():
            if not name.startswith("_") and callable(value):
                index[id(value)] = ("builtins", name)
        for module, namespace in self.modules.loaded().items():
            index[id(namespace)] = (module, None)
            for member_name, member in namespace.members().items():
                if callable(member):
                    index.setdefault(id(member), (module, member_name))
        return index


def _type_name(value: object) -> str:
    name = type(value).__name__
    return name if type(name) is str else "object"


def signature_of(name: str, value: object) -> str:
    """``name(x, y=2)`` for a function or class bound to ``name``."""
    try:
        text = f"{name}{inspect.signature(value)}"  # type: ignore[arg-type]
    except (TypeError, ValueError):
        text = f"{name}(...)"
    return text if len(text) <= 200 else text[:199] + "…"
