"""The decoding half of the value codec: tagged-JSON text back to Python values (``cove.codec``).

Every payload shape is checked; whatever the text, failures surface as ``CodecError`` (only
exceptions raised by the caller's ``make_definition`` pass through unchanged).
"""

from __future__ import annotations

import base64
import json
from collections import Counter, OrderedDict, defaultdict, deque
from collections.abc import Callable
from datetime import date, datetime, time, timedelta, timezone, tzinfo
from decimal import Decimal, InvalidOperation, localcontext
from fractions import Fraction
from typing import Any, NoReturn
from zoneinfo import ZoneInfo

from cove.codec import arrays
from cove.codec.chunks import BINARY, MAX_LEVELS, ChunkSource
from cove.codec.nodes import Json
from cove.codec.shapes import BUILTIN_TYPES, Definition, MakeDefinition, Opaque
from cove.errors import CodecError, ValueTooLarge

# What a malformed payload makes the constructors raise (binascii.Error is a ValueError,
# decimal.InvalidOperation and ZeroDivisionError are ArithmeticErrors; a zone name that is a
# directory of the tzdata package raises an OSError).
_PAYLOAD_ERRORS = (ValueError, TypeError, OverflowError, ArithmeticError, LookupError, OSError)


class _CallbackFailed(Exception):
    """Carries an exception of ``make_definition`` past the payload error handling."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not valid JSON")


class Decoder:
    """Decodes one text; create a new instance per ``decode`` call.

    ``chunks`` gives the chunks a chunked value's nodes name (``chunks.py``); without it such a
    value cannot be decoded.
    """

    def __init__(
        self,
        *,
        max_depth: int,
        make_definition: MakeDefinition | None,
        chunks: ChunkSource | None = None,
    ) -> None:
        self.max_depth = max_depth
        self.make_definition = make_definition
        self.chunks = chunks

    def decode(self, text: str) -> Any:
        """The value encoded in ``text``.

        Raises:
            CodecError: Malformed text, an unknown tag, a wrong payload shape or too deep nesting.
        """
        if not isinstance(text, str):
            raise CodecError(f"encoded value must be str, not {type(text).__name__}")
        try:
            tree = json.loads(text, parse_constant=_reject_constant)
        except RecursionError as exc:
            raise ValueTooLarge("encoded value is nested too deeply to decode") from exc
        except ValueError as exc:  # JSONDecodeError, or an over-long integer literal
            raise CodecError(f"malformed encoded value: {exc}") from exc
        try:
            return self.node(tree, 0)
        except RecursionError as exc:
            raise ValueTooLarge("encoded value is nested too deeply to decode") from exc
        except _CallbackFailed as exc:
            raise exc.error from None

    def node(self, tree: Json, depth: int) -> Any:
        """The value of one JSON node found at nesting ``depth``."""
        kind = type(tree)
        if tree is None or kind is str or kind is int or kind is float or kind is bool:
            return tree
        if kind is list:
            inner = self.enter(depth)
            return [self.node(item, inner) for item in tree]
        if kind is not dict or len(tree) != 1:
            raise CodecError(
                f"malformed encoded value: expected a one-key tag object, got {tree!r:.80}"
            )
        ((tag, payload),) = tree.items()
        handler = _HANDLERS.get(tag)
        if handler is None:
            raise CodecError(f"malformed encoded value: unknown tag {tag!r:.40}")
        try:
            value = handler(self, payload, depth)
        except _PAYLOAD_ERRORS as exc:
            raise CodecError(f"malformed {tag!r} value: {exc}") from exc
        if type(value) is Definition and self.make_definition is not None:
            try:
                return self.make_definition(value)
            except Exception as exc:
                raise _CallbackFailed(exc) from exc
        return value

    def enter(self, depth: int) -> int:
        """The nesting depth of a container's items; fails past ``max_depth``."""
        if depth >= self.max_depth:
            raise ValueTooLarge(
                f"encoded value nested too deeply: more than {self.max_depth} levels of "
                f"containers (max_depth={self.max_depth})"
            )
        return depth + 1

    def items(self, payload: Json, depth: int) -> list[Any]:
        """Decode a list payload's items one level deeper."""
        inner = self.enter(depth)
        return [self.node(item, inner) for item in self.expand(payload)]

    def pairs(self, payload: Json, depth: int) -> list[tuple[Any, Any]]:
        """Decode ``[[key, value], ...]`` one level deeper."""
        inner = self.enter(depth)
        return [
            (self.node(k, inner), self.node(v, inner))
            for k, v in (_list(p, 2) for p in self.expand(payload))
        ]

    def expand(self, payload: Json) -> list[Any]:
        """The item trees of a list payload: the list itself, or what a runs node's chunks hold.

        Raises:
            TypeError: Neither a list nor a runs node.
            CodecError: A chunk is missing or malformed.
        """
        if type(payload) is list:
            return payload
        if type(payload) is dict and len(payload) == 1 and "runs" in payload:
            found: list[Any] = []
            self._runs(payload["runs"], found, 0)
            return found
        return _list(payload)

    def _runs(self, names: Json, found: list[Any], level: int) -> None:
        if level > MAX_LEVELS:
            raise ValueTooLarge("a chunked value is nested too deeply")
        for name in _list(names):
            tree = self._json(self._chunk(name))
            if type(tree) is list:
                found.extend(tree)
            elif type(tree) is dict and len(tree) == 1 and "runs" in tree:
                self._runs(tree["runs"], found, level + 1)
            else:
                raise CodecError("malformed chunk: neither a run of items nor a runs node")

    def binary(self, payload: Json) -> bytes:
        """The bytes of a binary payload: base64 text, or a parts node.

        Raises:
            TypeError, ValueError: A malformed payload.
            CodecError: A chunk is missing or malformed.
        """
        if type(payload) is dict and len(payload) == 1 and "parts" in payload:
            pieces: list[bytes] = []
            level, names = _list(payload["parts"], 2)
            self._parts(level, names, pieces)
            return b"".join(pieces)
        return base64.b64decode(_str(payload), validate=True)

    def _parts(self, level: Json, names: Json, pieces: list[bytes]) -> None:
        if type(level) is not int or not 0 <= level <= MAX_LEVELS:
            raise ValueError(f"bad parts level {level!r:.20}")
        for name in _list(names):
            data = self._chunk(name)
            if level == 0:
                if data[:1] != BINARY:
                    raise CodecError("malformed chunk: not a binary part")
                pieces.append(data[1:])
                continue
            tree = self._json(data)
            if type(tree) is not dict or len(tree) != 1 or "parts" not in tree:
                raise CodecError("malformed chunk: not a parts node")
            inner, more = _list(tree["parts"], 2)
            if inner != level - 1:
                raise CodecError("malformed chunk: a parts node at the wrong level")
            self._parts(inner, more, pieces)

    def _chunk(self, name: Json) -> bytes:
        if type(name) is not str:
            raise TypeError(f"a chunk name must be a string, got {name!r:.40}")
        if self.chunks is None:
            raise CodecError("this value is stored in chunks, and they were not given")
        try:
            return self.chunks(name)
        except KeyError:
            raise CodecError(f"a chunk of this value is missing: {name:.40}") from None

    def _json(self, data: bytes) -> Json:
        try:
            return json.loads(
                data.decode("utf-8", "surrogatepass"), parse_constant=_reject_constant
            )
        except RecursionError as exc:
            raise ValueTooLarge("encoded value is nested too deeply to decode") from exc
        except ValueError as exc:
            raise CodecError(f"malformed chunk: {exc}") from exc


def _list(payload: Json, length: int | None = None) -> list[Any]:
    if type(payload) is not list or (length is not None and len(payload) != length):
        shape = "a list" if length is None else f"a list of {length} items"
        raise TypeError(f"expected {shape}, got {payload!r:.80}")
    return payload


def _str(payload: Json) -> str:
    if type(payload) is not str:
        raise TypeError(f"expected a string, got {payload!r:.80}")
    return payload


def _int(payload: Json) -> int:
    if type(payload) is not int:
        raise TypeError(f"expected an integer, got {payload!r:.80}")
    return payload


def _big_int(dec: Decoder, payload: Json, depth: int) -> int:
    text = _str(payload)
    if text.startswith(("0x", "-0x")):
        return int(text, 16)
    return int(text)


def _float(dec: Decoder, payload: Json, depth: int) -> float:
    if payload not in ("nan", "inf", "-inf"):
        raise ValueError(f"expected nan, inf or -inf, got {payload!r:.80}")
    return float(payload)


def _surrogate_str(dec: Decoder, payload: Json, depth: int) -> str:
    return dec.binary(payload).decode("utf-8", "surrogatepass")


def _bytes(dec: Decoder, payload: Json, depth: int) -> bytes:
    return dec.binary(payload)


def _utf8(dec: Decoder, payload: Json, depth: int) -> str:
    if type(payload) is not dict:
        raise TypeError("a long string is a parts node")
    return dec.binary(payload).decode("utf-8", "surrogatepass")


def _number(dec: Decoder, tree: Json, depth: int, kind: type) -> Any:
    value = dec.node(tree, depth)
    if type(value) is not kind:
        raise TypeError(f"expected {kind.__name__}, got {type(value).__name__}")
    return value


def _fraction(dec: Decoder, payload: Json, depth: int) -> Fraction:
    numerator, denominator = _list(payload, 2)
    return Fraction(_number(dec, numerator, depth, int), _number(dec, denominator, depth, int))


def _complex(dec: Decoder, payload: Json, depth: int) -> complex:
    real, imag = _list(payload, 2)
    return complex(_number(dec, real, depth, float), _number(dec, imag, depth, float))


def _decimal(dec: Decoder, payload: Json, depth: int) -> Decimal:
    with localcontext() as context:
        context.traps[InvalidOperation] = True  # a bad literal must not quietly become NaN
        return Decimal(_str(payload))


def _tz(payload: Json) -> tzinfo | None:
    if payload is None:
        return None
    kind, *rest = _list(payload)
    if kind == "fixed" and len(rest) in (1, 2):
        offset = timedelta(microseconds=_int(rest[0]))
        return timezone(offset) if len(rest) == 1 else timezone(offset, _str(rest[1]))
    if kind == "zone" and len(rest) == 1:
        return ZoneInfo(_str(rest[0]))
    raise ValueError(f"unknown time zone form {payload!r:.80}")


def _clock(parse: Callable[[str], datetime | time]) -> Callable[[Decoder, Json, int], Any]:
    def decode(dec: Decoder, payload: Json, depth: int) -> datetime | time:
        items = _list(payload)
        if len(items) not in (2, 3) or (len(items) == 3 and items[2] != 1):
            raise ValueError(f"expected [iso, tz] or [iso, tz, 1], got {payload!r:.80}")
        naive = parse(_str(items[0]))
        if naive.tzinfo is not None:
            raise ValueError("the time zone belongs in the second item, not in the text")
        return naive.replace(tzinfo=_tz(items[1]), fold=len(items) == 3)

    return decode


def _timedelta(dec: Decoder, payload: Json, depth: int) -> timedelta:
    days, seconds, micro = (_int(x) for x in _list(payload, 3))
    return timedelta(days=days, seconds=seconds, microseconds=micro)


def _definition(dec: Decoder, payload: Json, depth: int) -> Definition:
    items = _list(payload)
    if len(items) not in (3, 4):
        raise TypeError(f"expected a list of 3 or 4 items, got {payload!r:.80}")
    kind, name, source = items[:3]
    if kind not in ("function", "class"):
        raise ValueError(f"definition kind must be function or class, got {kind!r:.40}")
    reads = None
    if len(items) == 4:
        reads = tuple((_str(n), _str(t)) for n, t in (_list(pair, 2) for pair in _list(items[3])))
    return Definition(kind, _str(name), _str(source), reads)


def _opaque(dec: Decoder, payload: Json, depth: int) -> Opaque:
    type_name, text, size = _list(payload, 3)
    return Opaque(_str(type_name), _str(text), None if size is None else _int(size))


def _builtin_type(dec: Decoder, payload: Json, depth: int) -> type:
    return BUILTIN_TYPES[_str(payload)]


def _defaultdict(dec: Decoder, payload: Json, depth: int) -> defaultdict[Any, Any]:
    factory, entries = _list(payload, 2)
    result: defaultdict[Any, Any] = defaultdict(
        None if factory is None else BUILTIN_TYPES[_str(factory)]
    )
    result.update(dec.pairs(entries, depth))
    return result


def _deque(dec: Decoder, payload: Json, depth: int) -> deque[Any]:
    items, maxlen = _list(payload, 2)
    return deque(dec.items(items, depth), None if maxlen is None else _int(maxlen))


def _counter(dec: Decoder, payload: Json, depth: int) -> Counter[Any]:
    result: Counter[Any] = Counter()
    # dict.update, not Counter.update: the latter would add counts instead of setting them.
    dict.update(result, dec.pairs(payload, depth))
    return result


_HANDLERS: dict[str, Callable[[Decoder, Json, int], Any]] = {
    "int": _big_int,
    "float": _float,
    "str": _surrogate_str,
    "utf8": _utf8,
    "bytes": _bytes,
    "runs": lambda dec, p, d: dec.items({"runs": p}, d),
    "tuple": lambda dec, p, d: tuple(dec.items(p, d)),
    "set": lambda dec, p, d: set(dec.items(p, d)),
    "frozenset": lambda dec, p, d: frozenset(dec.items(p, d)),
    "deque": _deque,
    "dict": lambda dec, p, d: dict(dec.pairs(p, d)),
    "odict": lambda dec, p, d: OrderedDict(dec.pairs(p, d)),
    "counter": _counter,
    "defaultdict": _defaultdict,
    "date": lambda dec, p, d: date.fromisoformat(_str(p)),
    "datetime": _clock(datetime.fromisoformat),
    "time": _clock(time.fromisoformat),
    "timedelta": _timedelta,
    "decimal": _decimal,
    "fraction": _fraction,
    "complex": _complex,
    "type": _builtin_type,
    "def": _definition,
    "opaque": _opaque,
}
_HANDLERS.update(arrays.decoders())
