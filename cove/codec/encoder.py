"""The encoding half of the value codec: a Python value to tagged-JSON text (see ``cove.codec``).

Size is charged while the tree is built, from lower bounds of each piece's encoded length, so an
oversized value fails after about ``max_bytes`` of work, not after building a gigantic string;
the exact UTF-8 size of the final text is checked once more at the end.
"""

from __future__ import annotations

import base64
import math
from collections import Counter, OrderedDict, defaultdict, deque
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import date, datetime, time, timedelta, timezone, tzinfo
from decimal import Decimal
from fractions import Fraction
from types import FunctionType
from typing import Any
from zoneinfo import ZoneInfo

from cove.codec import arrays
from cove.codec.nodes import Json
from cove.codec.shapes import (
    BUILTIN_TYPE_NAMES,
    Definition,
    DefinitionKind,
    Opaque,
    SourceOf,
    dumps,
)
from cove.errors import CodecError, ValueTooLarge

_SAFE_INT = 2**53  # beyond this, JSON readers other than Python lose precision
_JSON_SCALARS = frozenset({int, float, str, bool, type(None)})
_NUMBERS = frozenset({int, float, bool})
# Up to ~600 decimal digits: under CPython's int/str conversion limit however low a process sets
# it (640 at least), so the text never depends on that setting. Larger ints use hex, whose
# conversion has no limit and is linear.
_DECIMAL_INT_BITS = 2_000


class Encoder:
    """Encodes one value; create a new instance per ``encode`` call."""

    def __init__(self, *, max_bytes: int, max_depth: int, source_of: SourceOf | None) -> None:
        self.max_bytes = max_bytes
        self.max_depth = max_depth
        self.source_of = source_of
        self.used = 0
        self.check_surrogates = False
        self._path: set[int] = set()  # ids of the containers enclosing the current value

    def encode(self, value: object) -> str:
        """The encoded text of ``value``.

        Raises:
            ValueTooLarge: Over ``max_bytes`` or nested deeper than ``max_depth``.
            CodecError: An unsupported type, or a container that contains itself.
        """
        text = self._run(value)
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            # Rare: a string holds lone surrogates. Encode again, tagging such strings.
            self.check_surrogates = True
            self.used = 0
            text = self._run(value)
            try:
                size = len(text.encode("utf-8"))
            except UnicodeEncodeError as exc:
                raise CodecError(
                    "cannot encode lone surrogates outside a str (in a time zone name, a "
                    "definition or an opaque record)"
                ) from exc
        if size > self.max_bytes:
            raise ValueTooLarge(
                f"value too large: its encoding is {size:,} bytes, over the limit of "
                f"{self.max_bytes:,} bytes (max_bytes)"
            )
        return text

    def _run(self, value: object) -> str:
        try:
            return dumps(self.node(value, 0))
        except RecursionError as exc:
            raise ValueTooLarge(
                "value nested too deeply to encode (Python's recursion limit was reached)"
            ) from exc

    def charge(self, size: int) -> None:
        """Count ``size`` more bytes of output, failing once over ``max_bytes``."""
        self.used += size
        if self.used > self.max_bytes:
            raise ValueTooLarge(
                f"value too large: its encoding needs at least {self.used:,} bytes, over the "
                f"limit of {self.max_bytes:,} bytes (max_bytes)"
            )

    def node(self, value: object, depth: int) -> Json:
        """The JSON tree of ``value`` found at nesting ``depth``."""
        handler = _HANDLERS.get(type(value))
        if handler is None:
            if arrays.handles(value):
                return arrays.encode(self, value, depth)
            return self._other(value)
        return handler(self, value, depth)

    def enter(self, container: object, depth: int) -> int:
        """Check depth and cycles before encoding ``container``'s items; returns their depth."""
        depth += 1
        if depth > self.max_depth:
            raise ValueTooLarge(
                f"value nested too deeply: more than {self.max_depth} levels of containers "
                f"(max_depth={self.max_depth})"
            )
        key = id(container)
        if key in self._path:
            raise CodecError(
                f"cannot encode a {type(container).__name__} that contains itself "
                "(a reference cycle)"
            )
        self._path.add(key)
        return depth

    def leave(self, container: object) -> None:
        """Mark ``container`` as finished (it may appear again elsewhere: shared, not a cycle)."""
        self._path.discard(id(container))

    def items(self, values: Iterable[object], count: int, depth: int) -> Json:
        """Encode ``count`` items (separators are charged up front, so huge ones fail at once).

        Returns the items' list (``seq`` decides its form)."""
        start = self.used
        trees = self.trees(values, count, depth)
        return self.seq(trees, self.used - start)

    def trees(self, values: Iterable[object], count: int, depth: int) -> list[Json]:
        """The trees of ``count`` items, in order.

        Items that are all JSON scalars standing for themselves (ints within 2**53, finite
        floats, strings, bools, None) are taken as they are, found in a few passes at C speed
        instead of one call per item.
        """
        self.charge(count + 1)
        if type(values) is list or type(values) is tuple:
            plain = self.plain(values, set(map(type, values)))
            if plain is not None:
                return plain
        return [self.node(v, depth) for v in values]

    def plain(self, values: list[Any] | tuple[Any, ...], kinds: set[type]) -> list[Json] | None:
        """``values`` as a list when every item (of the types ``kinds``) is a JSON scalar that
        is its own tree; else None."""
        if not kinds <= _JSON_SCALARS:
            return None
        if str in kinds:
            if self.check_surrogates or len(kinds) > 1 + (type(None) in kinds):
                return None  # mixed with numbers: let each item say how it is encoded
            if type(None) not in kinds:
                self.charge(sum(map(len, values)) + 2 * len(values))
            return list(values)
        if kinds & _NUMBERS and not _plain_numbers(values, kinds):
            return None
        return list(values)

    def pairs(self, mapping: dict[Any, Any], depth: int) -> Json:
        """Encode a mapping's entries in insertion order as ``[key, value]`` pairs."""
        start = self.used
        self.charge(4 * len(mapping) + 1)
        trees = [[self.node(k, depth), self.node(v, depth)] for k, v in mapping.items()]
        return self.seq(trees, self.used - start)

    def seq(self, trees: list[Json], charged: int) -> Json:
        """The form of a list of item trees in the output: the list itself (a chunked
        encoding may store long ones apart, see ``cove.codec.tree``).

        Args:
            trees: The item trees.
            charged: What encoding them was charged (at least 1/17 of their text).
        """
        return trees

    def text(self, value: str) -> Json:
        """The tree of a string (a chunked encoding may store a long one apart)."""
        return value

    def binary(self, tag: str, head: bytes, body: memoryview) -> Json:
        """``{tag: base64}`` of ``head + body`` (a chunked encoding may store long ones apart)."""
        self.charge(4 * ((len(head) + len(body) + 2) // 3) + len(tag) + 7)
        data = head + body.tobytes() if head else body.tobytes()
        return {tag: base64.b64encode(data).decode("ascii")}

    def tag(self, name: str, payload: Json) -> Json:
        """A one-key tag object (its framing is charged here)."""
        self.charge(len(name) + 5)
        return {name: payload}

    def _other(self, value: object) -> Json:
        # issubclass on type(value) never consults a (possibly hostile) __class__ property.
        if issubclass(type(value), type):
            name = BUILTIN_TYPE_NAMES.get(value)
            if name is not None:
                return self.tag("type", name)
            return self._definition(value, "class")
        if type(value) is FunctionType:
            return self._definition(value, "function")
        kind = type(value)
        message = f"cannot encode a value of type {kind.__qualname__}"
        base = next((b for b in kind.__mro__[1:] if b in _HANDLERS), None)
        if base is not None:
            message += f" (a subclass of {base.__name__}; only the exact type is supported)"
        raise CodecError(message)

    def _definition(self, value: Any, kind: str) -> Json:
        name = str(value.__name__)
        recorded = self.source_of(value) if self.source_of is not None else None
        if recorded is None:
            raise CodecError(
                f"cannot encode {kind} {name}: its source is unknown (only functions and classes "
                "defined in the sandbox can be saved)"
            )
        known: DefinitionKind = "class" if kind == "class" else "function"
        if isinstance(recorded, Definition):
            return _definition(self, replace(recorded, kind=known, name=name), 0)
        return _definition(self, Definition(known, name, recorded), 0)


def _none(enc: Encoder, value: None, depth: int) -> Json:
    enc.charge(4)
    return None


def _bool(enc: Encoder, value: bool, depth: int) -> Json:
    enc.charge(4)
    return value


def int_tree(enc: Encoder, value: int, depth: int = 0) -> Json:
    """Small ints are JSON numbers; others a tagged string (decimal, or hex when huge)."""
    if -_SAFE_INT < value < _SAFE_INT:
        enc.charge(1)
        return value
    bits = value.bit_length()
    enc.charge(bits // 4 + 3)  # a lower bound of both the hex and the decimal length
    return enc.tag("int", str(value) if bits <= _DECIMAL_INT_BITS else hex(value))


def float_tree(enc: Encoder, value: float, depth: int = 0) -> Json:
    """Finite floats are JSON numbers (repr round-trips, -0.0 included); others a tag."""
    if math.isfinite(value):
        enc.charge(3)
        return value
    return enc.tag("float", "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf"))


def _str(enc: Encoder, value: str, depth: int) -> Json:
    enc.charge(len(value) + 2)
    if enc.check_surrogates and not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raw = value.encode("utf-8", "surrogatepass")
            return enc.binary("str", b"", memoryview(raw))
    return enc.text(value)


def _bytes(enc: Encoder, value: bytes, depth: int) -> Json:
    return enc.binary("bytes", b"", memoryview(value))


def _list(enc: Encoder, value: list[Any], depth: int) -> Json:
    inner = enc.enter(value, depth)
    tree = enc.items(value, len(value), inner)
    enc.leave(value)
    return tree


def _plain_numbers(values: list[Any] | tuple[Any, ...], kinds: set[type]) -> bool:
    """Whether numbers (with bools and Nones) are their own JSON: ints within 2**53 and finite
    floats; mixed with None, they are left to the item-by-item path."""
    if type(None) in kinds:
        return False
    try:
        if float in kinds and not all(map(math.isfinite, values)):
            return False
        return bool(min(values) > -_SAFE_INT and max(values) < _SAFE_INT)
    except (OverflowError, TypeError):  # an int too large for a float
        return False


def _sequence(tag: str) -> Callable[[Encoder, Any, int], Json]:
    def encode(enc: Encoder, value: tuple[Any, ...], depth: int) -> Json:
        inner = enc.enter(value, depth)
        tree = enc.tag(tag, enc.items(value, len(value), inner))
        enc.leave(value)
        return tree

    return encode


def _unordered(tag: str) -> Callable[[Encoder, Any, int], Json]:
    def encode(enc: Encoder, value: set[Any], depth: int) -> Json:
        inner = enc.enter(value, depth)
        start = enc.used
        items = enc.trees(value, len(value), inner)
        # Iteration order of a set depends on hashing; sorting by encoded text makes the text
        # a function of the value alone.
        items.sort(key=dumps)
        enc.leave(value)
        return enc.tag(tag, enc.seq(items, enc.used - start))

    return encode


def _mapping(tag: str) -> Callable[[Encoder, Any, int], Json]:
    def encode(enc: Encoder, value: dict[Any, Any], depth: int) -> Json:
        inner = enc.enter(value, depth)
        tree = enc.tag(tag, enc.pairs(value, inner))
        enc.leave(value)
        return tree

    return encode


def _defaultdict(enc: Encoder, value: defaultdict[Any, Any], depth: int) -> Json:
    factory = value.default_factory
    factory_name = None if factory is None else BUILTIN_TYPE_NAMES.get(factory)
    if factory is not None and factory_name is None:
        raise CodecError(
            f"cannot encode a defaultdict whose default factory is {factory!r}: only built-in "
            "types (list, int, set, ...) are supported"
        )
    inner = enc.enter(value, depth)
    tree = enc.tag("defaultdict", [factory_name, enc.pairs(value, inner)])
    enc.leave(value)
    return tree


def _deque(enc: Encoder, value: deque[Any], depth: int) -> Json:
    inner = enc.enter(value, depth)
    tree = enc.tag("deque", [enc.items(value, len(value), inner), value.maxlen])
    enc.leave(value)
    return tree


def tz_tree(tz: tzinfo | None) -> Json:
    """``null``, ``["fixed", offset_microseconds(, name)]`` or ``["zone", key]``."""
    if tz is None:
        return None
    if type(tz) is timezone:
        offset = tz.utcoffset(None)
        micro = (offset.days * 86_400 + offset.seconds) * 1_000_000 + offset.microseconds
        name = tz.tzname(None)
        # Only an explicit name differs from the one timezone() would generate.
        return ["fixed", micro] if name == timezone(offset).tzname(None) else ["fixed", micro, name]
    if type(tz) is ZoneInfo and tz.key is not None:
        return ["zone", tz.key]
    raise CodecError(
        f"cannot encode time zone {tz!r} of type {type(tz).__qualname__}: only fixed offsets "
        "(datetime.timezone) and named zoneinfo zones are supported"
    )


def _clock(tag: str) -> Callable[[Encoder, Any, int], Json]:
    def encode(enc: Encoder, value: datetime | time, depth: int) -> Json:
        naive = value.replace(tzinfo=None).isoformat()
        enc.charge(len(naive) + 9)  # at least ["<naive>",null]
        payload = [naive, tz_tree(value.tzinfo)]
        if value.fold:
            payload.append(1)
        return enc.tag(tag, payload)

    return encode


def _date(enc: Encoder, value: date, depth: int) -> Json:
    return enc.tag("date", value.isoformat())


def _timedelta(enc: Encoder, value: timedelta, depth: int) -> Json:
    return enc.tag("timedelta", [value.days, value.seconds, value.microseconds])


def _decimal(enc: Encoder, value: Decimal, depth: int) -> Json:
    text = str(value)  # exact: keeps sign, exponent, NaN, sNaN and Infinity
    enc.charge(len(text) + 2)
    return enc.tag("decimal", text)


def _fraction(enc: Encoder, value: Fraction, depth: int) -> Json:
    return enc.tag("fraction", [int_tree(enc, value.numerator), int_tree(enc, value.denominator)])


def _complex(enc: Encoder, value: complex, depth: int) -> Json:
    return enc.tag("complex", [float_tree(enc, value.real), float_tree(enc, value.imag)])


def _definition(enc: Encoder, value: Definition, depth: int) -> Json:
    enc.charge(len(value.name) + len(value.source) + 15)  # at least ["class","<name>","<source>"]
    if value.reads is None:
        return enc.tag("def", [value.kind, value.name, value.source])
    enc.charge(sum(len(name) + len(token) + 6 for name, token in value.reads) + 3)
    reads = [[name, token] for name, token in value.reads]
    return enc.tag("def", [value.kind, value.name, value.source, reads])


def _opaque(enc: Encoder, value: Opaque, depth: int) -> Json:
    enc.charge(len(value.type_name) + len(value.repr) + 9)
    return enc.tag("opaque", [value.type_name, value.repr, value.size])


_HANDLERS: dict[type, Callable[[Encoder, Any, int], Json]] = {
    type(None): _none,
    bool: _bool,
    int: int_tree,
    float: float_tree,
    str: _str,
    bytes: _bytes,
    list: _list,
    tuple: _sequence("tuple"),
    dict: _mapping("dict"),
    OrderedDict: _mapping("odict"),
    Counter: _mapping("counter"),
    defaultdict: _defaultdict,
    deque: _deque,
    set: _unordered("set"),
    frozenset: _unordered("frozenset"),
    date: _date,
    datetime: _clock("datetime"),
    time: _clock("time"),
    timedelta: _timedelta,
    Decimal: _decimal,
    Fraction: _fraction,
    complex: _complex,
    Definition: _definition,
    Opaque: _opaque,
}
