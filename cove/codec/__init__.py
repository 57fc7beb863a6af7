"""The value codec: how values cross process and disk boundaries (never pickle).

A value is encoded as compact JSON text. JSON's own scalars and arrays stand for themselves; every
other value is a one-key object ``{"tag": payload}``. Output is deterministic — the same value
gives the same text, so ``fingerprint(text)`` can tell whether a variable changed — and decoding
gives back a value of exactly the same types (``True`` stays a bool, a tuple stays a tuple).

====================  ============================================  ===============================
Python value          Encoded as                                    Notes
====================  ============================================  ===============================
None, bool            ``null``, ``true``, ``false``
int, abs < 2**53      a JSON number
other int             ``{"int": "-123..."}``                        hex ``"0x..."`` past 2,000 bits
float, finite         a JSON number                                 repr; ``-0.0`` kept
float nan, ±inf       ``{"float": "nan"|"inf"|"-inf"}``             NaN sign not kept
str                   a JSON string                                 UTF-8, not ASCII-escaped
str, lone surrogates  ``{"str": base64}``                           UTF-8 "surrogatepass"
bytes                 ``{"bytes": base64}``
list                  a JSON array
tuple                 ``{"tuple": [items]}``
dict                  ``{"dict": [[key, value], ...]}``             any hashable keys; order kept
OrderedDict           ``{"odict": [[key, value], ...]}``            from ``collections``
Counter               ``{"counter": [[key, count], ...]}``          from ``collections``
defaultdict           ``{"defaultdict": [factory, pairs]}``         factory: null or built-in type
deque                 ``{"deque": [[items], maxlen]}``              maxlen may be null
set, frozenset        ``{"set": [...]}``, ``{"frozenset": [...]}``  sorted by encoded text
date                  ``{"date": "2024-05-01"}``
datetime              ``{"datetime": [naive iso, tz]}``             ``[.., 1]`` when fold=1
time                  ``{"time": [naive iso, tz]}``                 ``[.., 1]`` when fold=1
(their tz)            ``null`` | ``["fixed", offset_us]``           ``datetime.timezone``;
                      | ``["fixed", offset_us, name]``              name only if explicit
                      | ``["zone", "Europe/Paris"]``                ``zoneinfo.ZoneInfo``
timedelta             ``{"timedelta": [days, s, us]}``
Decimal               ``{"decimal": str(value)}``                   NaN, sNaN, Infinity, -0
Fraction              ``{"fraction": [num, den]}``                  ints encoded as above
complex               ``{"complex": [real, imag]}``                 floats encoded as above
built-in type         ``{"type": "int"}``                           bool, int, str, list, ...
sandbox def           ``{"def": [kind, name, source]}``             kind: function | class;
                      ``{"def": [kind, name, source, reads]}``      decodes to ``Definition``;
                                                                    reads: [[name, token], ...]
numpy/pandas values   binary ``.npy`` in base64, see ``arrays.py``  ndarray, numpy scalar, Series,
                                                                    DataFrame, Index
anything else         ``{"opaque": [type, repr, size]}``            only via ``encode_opaque``;
                                                                    decodes to ``Opaque``
====================  ============================================  ===============================

Subclasses of these types other than the four ``collections`` ones above (a namedtuple, an
``IntEnum``, a ``str`` subclass, instances of sandbox classes) are not encoded: ``encode`` raises
``CodecError`` naming the type, and the caller records the value with ``encode_opaque`` instead.
Shared references are encoded once per occurrence (identity is not kept); a container that
contains itself is refused. Dict order is part of the value: two equal dicts built in different
orders give different texts (and restore to their own order). ``Definition`` and ``Opaque``
objects encode back to their own tags, so ``encode(decode(text)) == text`` for any text ``encode``
or ``encode_opaque`` made.
"""

from __future__ import annotations

import hashlib
from typing import Any

from cove.codec import arrays
from cove.codec.chunks import ChunkSource, Tree, closure, refs
from cove.codec.decoder import Decoder
from cove.codec.encoder import Encoder
from cove.codec.preview import display, preview, size_of, utf8_safe
from cove.codec.shapes import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_DEPTH,
    Definition,
    MakeDefinition,
    Opaque,
    SourceOf,
    dumps,
)
from cove.codec.tree import encode_tree

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_DEPTH",
    "ChunkSource",
    "Definition",
    "MakeDefinition",
    "Opaque",
    "SourceOf",
    "Tree",
    "closure",
    "data_fingerprint",
    "decode",
    "display",
    "encode",
    "encode_opaque",
    "encode_tree",
    "fingerprint",
    "is_data",
    "is_restorable",
    "preview",
    "refs",
    "size_of",
]

_OPAQUE_MARK = '{"opaque":'  # only a tag can produce this: quotes inside strings are escaped


def encode(
    value: object,
    *,
    source_of: SourceOf | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> str:
    """Encode ``value`` as deterministic tagged-JSON text.

    Args:
        value: The value; see the module docstring for the supported types.
        source_of: Returns the source of a function or class defined in the sandbox, or its
            recorded ``Definition`` (None when unknown); without it, functions and classes
            cannot be encoded.
        max_bytes: The largest accepted encoding, in UTF-8 bytes. Checked while encoding, so a
            huge value fails after about this much work.
        max_depth: The deepest accepted nesting of containers in containers.

    Returns:
        The encoded text (valid UTF-8, no newlines).

    Raises:
        ValueTooLarge: The encoding would exceed ``max_bytes`` or the nesting ``max_depth``.
        CodecError: The value holds an unsupported type (named in the message), a function
            whose source is unknown, or a container that contains itself.
    """
    return Encoder(max_bytes=max_bytes, max_depth=max_depth, source_of=source_of).encode(value)


def decode(
    text: str,
    *,
    make_definition: MakeDefinition | None = None,
    max_depth: int = DEFAULT_MAX_DEPTH,
    chunks: ChunkSource | None = None,
) -> Any:
    """Decode text made by ``encode`` (or ``encode_opaque``, or the root of ``encode_tree``)
    back into a value.

    Args:
        text: The encoded text.
        make_definition: Builds the live function or class of each ``Definition``; without it,
            definitions decode as ``Definition`` objects.
        max_depth: The deepest accepted nesting of containers in containers.
        chunks: Gives the chunks a root of ``encode_tree`` names; without it, such a root
            cannot be decoded.

    Returns:
        The value; ``Opaque`` for an opaque record.

    Raises:
        CodecError: The text is malformed, uses an unknown tag or a wrong payload shape, or is
            nested too deeply (``ValueTooLarge``). Exceptions raised by ``make_definition``
            propagate unchanged.
    """
    return Decoder(max_depth=max_depth, make_definition=make_definition, chunks=chunks).decode(text)


def encode_opaque(value: object, *, limit: int = 200) -> str:
    """Record a value that cannot be encoded: its type name, a cut repr and its size.

    Never raises. ``decode`` turns the text into an ``Opaque``; ``is_restorable`` is False for it.

    Args:
        value: Any object.
        limit: The maximum length of the kept repr.
    """
    record = Opaque(utf8_safe(type(value).__qualname__), preview(value, limit), size_of(value))
    return dumps({"opaque": [record.type_name, record.repr, record.size]})


def is_restorable(text: str) -> bool:
    """Whether encoded ``text`` decodes to the full value (False when it holds an opaque record).

    A cheap text scan: it does not validate the text; ``decode`` does.
    """
    return _OPAQUE_MARK not in text


def fingerprint(text: str) -> str:
    """A short stable hash of encoded text (16 hex digits): equal values give equal fingerprints."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def is_data(value: object) -> bool:
    """Whether ``value`` is a numpy array or a pandas Series, DataFrame or Index (``arrays.py``)."""
    return arrays.is_data(value)


def data_fingerprint(value: object) -> str | None:
    """A fingerprint of an array's or a pandas value's buffers, without encoding it; None for
    other values and for those whose buffers do not decide them (object arrays)."""
    return arrays.fingerprint(value)
