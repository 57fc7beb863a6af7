"""What a definition read when it ran — and whether running it again would read the same.

A function or class is restored by running its recorded ``def``/``class``/lambda statement again
(``runtime._make_definition``). Its decorators, default values, bases and class body run again,
and so does any sandbox code they call; what they read decides what the statement makes. So when
a statement runs live, the worker records each name it reads, with a token of the value the name
held just before the statement ran:

- the names its own parts read: decorators, default values, bases, class keywords, class bodies
  and the comprehensions among them (``statements.py``, from the syntax; annotations are labels,
  not reads, unless they call something);
- every global name read or written by other sandbox code that runs during the statement — a
  decorator, a function a default value calls, a class it instantiates — found as each such frame
  starts (a profile hook, set only while such a statement runs), plus the variables holding the
  objects that frame was handed (its arguments and closure).

A token is ``import:<module>.<member>`` for a curated module, member or builtin, ``value:<hash>``
for a value the codec encodes (its fingerprint), ``absent`` for an unbound name the statement
writes. Some tokens never match, so the definition can never be run again: ``volatile`` (the
block's random generator and clock: ``random``, ``time``, ``uuid``), ``unknown`` (a value the
codec cannot encode), ``changed`` (the statement changed a name it read: running it again would
do it again) and ``extension`` (it called an extension: running it again would call it again).

Before a restored statement runs, every recorded name must hold a value with the same token
(``problem``), else the definition is refused (``NotRestorable``) and reported lost. The
statement then runs with extension calls refused and no clock (``runtime``), so what it makes is
what the live run made. Not covered: worker state no name holds (the ``decimal`` context).
"""

from __future__ import annotations

import dis
import sys
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from fractions import Fraction
from types import CodeType, FrameType
from typing import TYPE_CHECKING, Any

from cove.codec.shapes import Definition, Reads
from cove.environment.sandbox.worker.guards import BLOCK_FILENAME
from cove.environment.sandbox.worker.statements import StatementReads

if TYPE_CHECKING:
    from cove.environment.sandbox.worker.tracking import VariableTracker

ABSENT = "absent"
CHANGED = "changed"
EXTENSION = "extension"
UNKNOWN = "unknown"
VOLATILE = "volatile"
NEVER = frozenset({CHANGED, EXTENSION, UNKNOWN, VOLATILE})
"""Tokens no current value matches: a definition recording one is never run again."""

_VOLATILE_MODULES = frozenset({"random", "time", "uuid"})
_READ_OPS = frozenset({"LOAD_GLOBAL", "LOAD_NAME"})
_WRITE_OPS = frozenset({"STORE_GLOBAL", "DELETE_GLOBAL"})
_SCALARS: frozenset[type] = frozenset(
    {int, float, complex, str, bytes, bool, type(None), Decimal, Fraction, date, datetime, time,
     timedelta}
)  # fmt: skip
_CODE_NAMES: weakref.WeakKeyDictionary[CodeType, tuple[tuple[str, ...], tuple[str, ...]]] = (
    weakref.WeakKeyDictionary()
)


class NotRestorable(ValueError):
    """A recorded definition would not make what it made when it ran: it is not run again."""


def _global_names(code: CodeType) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The global names ``code`` reads and writes (``co_names`` also holds attribute names)."""
    known = _CODE_NAMES.get(code)
    if known is None:
        reads: dict[str, None] = {}
        writes: dict[str, None] = {}
        for instruction in dis.get_instructions(code):
            if instruction.opname in _READ_OPS:
                reads[str(instruction.argval)] = None
            elif instruction.opname in _WRITE_OPS:
                writes[str(instruction.argval)] = None
        known = _CODE_NAMES[code] = (tuple(reads), tuple(writes))
    return known


@dataclass
class _Watch:
    """What one running statement has read so far."""

    before: dict[str, str] = field(default_factory=dict)
    codes: set[int] = field(default_factory=set)  # ids of the code objects already read
    extension: bool = False
    broken: bool = False


class Provenance:
    """Records what definition statements read, and checks a recorded one before it runs again.

    Args:
        tracker: The worker's variable tracker (fingerprints, import bindings, held objects).
        namespace: The sandbox's globals.
        builtins: The sandbox's builtins.
    """

    def __init__(
        self, tracker: VariableTracker, namespace: dict[str, Any], builtins: dict[str, Any]
    ) -> None:
        self.tracker = tracker
        self.namespace = namespace
        self.builtins = builtins
        self._watch: _Watch | None = None

    # -- live: recording -------------------------------------------------------------------

    def begin(self, statement: StatementReads) -> None:
        """A definition statement is about to run: note the tokens of what it will read.

        Its own parts are known from its syntax (``statements.py``). Other sandbox code it may
        call — a decorator, a function in a default value, a class it instantiates, a function
        its class body defines and calls — is followed as it runs, by a profile hook set only
        when one of the names it reads may hold such code.
        """
        self.stop()
        watch = _Watch()
        self._note(watch, statement.names, writes=False)
        self._note(watch, statement.writes, writes=True)
        self._watch = watch
        if any(token in NEVER for token in watch.before.values()):
            return  # it will never run again whatever else it reads: nothing more to follow
        if statement.calls_itself or any(self._may_run_code(name) for name in watch.before):
            sys.setprofile(self._profile)

    def end(self) -> Reads:
        """The statement ran: what it read, each name with its token (see the module docstring)."""
        watch, self._watch = self._watch, None
        sys.setprofile(None)
        if watch is None:
            return ((CHANGED, CHANGED),)
        reads = dict(watch.before)
        for name, token in watch.before.items():
            if token not in NEVER and self.token(name, ABSENT) != token:
                reads[name] = CHANGED
        if watch.extension:
            reads[EXTENSION] = EXTENSION
        if watch.broken:
            reads[UNKNOWN] = UNKNOWN
        return tuple(sorted(reads.items()))

    def stop(self) -> None:
        """Forget a statement that did not finish (it raised)."""
        if self._watch is not None:
            self._watch = None
            sys.setprofile(None)

    def extension_called(self) -> None:
        """An extension function was called: the running statement, if any, cannot run again."""
        if self._watch is not None:
            self._watch.extension = True

    def _profile(self, frame: FrameType, event: str, arg: object) -> None:
        if event != "call":
            return
        watch = self._watch
        code = frame.f_code
        if watch is None or id(code) in watch.codes or code.co_filename != BLOCK_FILENAME:
            return
        if frame.f_globals is not self.namespace:
            return
        watch.codes.add(id(code))
        try:
            reads, writes = _global_names(code)
            self._note(watch, reads, writes=False)
            self._note(watch, writes, writes=True)
            handed = [id(value) for value in frame.f_locals.values()]
            self._note(watch, sorted(self.tracker.holders(handed)), writes=False)
        except Exception:  # never disturb the statement; it just cannot be run again
            watch.broken = True

    def _may_run_code(self, name: str) -> bool:
        """Whether ``name`` may hold sandbox code a statement could call (conservative)."""
        value: Any = self.namespace[name] if name in self.namespace else self.builtins.get(name)
        kind = type(value)
        if kind in _SCALARS or self.tracker.import_ref(value) is not None:
            return False
        if kind in (list, tuple, set, frozenset):
            return not set(map(type, value)) <= _SCALARS
        if kind is dict:
            return not (set(map(type, value)) | set(map(type, value.values()))) <= _SCALARS
        return True

    def _note(self, watch: _Watch, names: Iterable[str], *, writes: bool) -> None:
        for name in names:
            if name.startswith("_") or name in watch.before:
                continue
            token = self.token(name, ABSENT if writes else None)
            if token is not None:
                watch.before[name] = token

    # -- restore: checking ------------------------------------------------------------------

    def problem(self, definition: Definition) -> str | None:
        """Why ``definition`` would not make what it made if run now, or None.

        A definition recorded without reads (older data) is not checked.
        """
        for name, token in definition.reads or ():
            if token in NEVER:
                return _never(definition.name, name, token)
            if self.token(name, ABSENT) != token:
                return (
                    f"{definition.name} cannot be rebuilt as it ran: {name!r} holds another "
                    f"value than when {definition.name} was defined"
                )
        return None

    # -- tokens -----------------------------------------------------------------------------

    def token(self, name: str, unbound: str | None = None) -> str | None:
        """The token of what ``name`` holds now (namespace, then builtins), or ``unbound``."""
        if name in self.namespace:
            value = self.namespace[name]
        elif name in self.builtins:
            value = self.builtins[name]
        else:
            return unbound
        ref = self.tracker.import_ref(value)
        if ref is not None:
            module, member = ref
            if module in _VOLATILE_MODULES:
                return VOLATILE
            return f"import:{module}" + (f".{member}" if member else "")
        fingerprint = self.tracker.fingerprint_of(name, value)
        return UNKNOWN if fingerprint is None else f"value:{fingerprint}"


def _never(definition: str, name: str, token: str) -> str:
    why = {
        CHANGED: f"running it again would change {name!r} again",
        EXTENSION: "it called an extension function, which a restore does not call again",
        UNKNOWN: f"{name!r} held a value that could not be recorded",
        VOLATILE: f"it used {name!r}, whose result differs from run to run",
    }[token]
    return f"{definition} cannot be rebuilt as it ran: {why}"
