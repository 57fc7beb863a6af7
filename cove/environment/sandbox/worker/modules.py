"""The modules sandbox code may import, as curated read-only namespaces.

A real module object is never handed to the sandbox: its public attributes chain to everything
(``re.enum.sys``, ``json.codecs.open``, ``datetime.sys``, ``uuid.os``). ``import x`` yields a
``ModuleNamespace`` holding only selected functions, classes and constants of ``x``. Modules whose
behaviour depends on the outside world are bound to the block: ``random`` and ``uuid.uuid4`` to one
``random.Random`` seeded per block, ``time.time`` to the block's recorded clock (``datetime``'s
``now``/``today`` are redirected by the attribute guard). Callables that generate code or take
names from data are replaced by checked stand-ins (``wrapped.py``). Every name handed out here
has an audit verdict in ``docs/sandbox-allowlist.md`` (a test keeps the two in sync), and every
module is covered by a reachability test (``tests/environment/test_policy.py``) and escape tests.
"""

from __future__ import annotations

import base64
import bisect
import collections
import csv
import dataclasses
import datetime
import decimal
import enum
import fractions
import hashlib
import heapq
import itertools
import json
import math
import random
import re
import statistics
import string
import textwrap
import time
import typing
import unicodedata
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from cove.environment.sandbox.worker import wrapped
from cove.environment.sandbox.worker.guards import BlockClock, ReadOnlyNamespace


class ModuleNamespace(ReadOnlyNamespace):
    """A read-only stand-in for a module: attribute access to selected members only."""

    __slots__ = ("_members", "_module_name")

    def __init__(self, name: str, members: dict[str, Any]) -> None:
        object.__setattr__(self, "_module_name", name)
        object.__setattr__(self, "_members", dict(members))

    def __getattr__(self, name: str) -> Any:
        try:
            return self._members[name]
        except KeyError:
            raise AttributeError(
                f"module {self._module_name!r} has no attribute {name!r} in the sandbox"
            ) from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"module {self._module_name!r} is read-only")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"module {self._module_name!r} is read-only")

    def __dir__(self) -> list[str]:
        return sorted(self._members)

    def __repr__(self) -> str:
        return f"<module {self._module_name!r}>"

    @property
    def module_name(self) -> str:
        """The name the sandbox imports this namespace under."""
        return str(object.__getattribute__(self, "_module_name"))

    def members(self) -> dict[str, Any]:
        """A copy of the members (host side only: the sandbox cannot reach underscore names)."""
        return dict(object.__getattribute__(self, "_members"))


def _pick(module: Any, names: Iterable[str]) -> dict[str, Any]:
    return {name: getattr(module, name) for name in names}


def _public(module: Any, *, exclude: Iterable[str] = ()) -> dict[str, Any]:
    skip = set(exclude)
    return {
        name: getattr(module, name)
        for name in dir(module)
        if not name.startswith("_") and name not in skip
    }


class BlockRandom:
    """The one source of randomness of a worker, reseeded by the host before every block."""

    def __init__(self) -> None:
        self.rng = random.Random(0)

    def seed(self, seed: int) -> None:
        """Reseed for a block."""
        self.rng.seed(seed)

    def new_random(self, seed: Any = None) -> random.Random:
        """A private ``Random``; without a seed it derives one from the block's generator."""
        return random.Random(self.rng.getrandbits(64) if seed is None else seed)

    def uuid4(self) -> uuid.UUID:
        """A version-4 UUID drawn from the block's generator."""
        return uuid.UUID(int=self.rng.getrandbits(128), version=4)


_RANDOM_FUNCTIONS = (
    "random", "uniform", "randint", "randrange", "choice", "choices", "shuffle", "sample",
    "gauss", "normalvariate", "lognormvariate", "expovariate", "vonmisesvariate",
    "gammavariate", "triangular", "betavariate", "paretovariate", "weibullvariate",
    "getrandbits", "randbytes", "seed",
)  # fmt: skip


def _build(name: str, chance: BlockRandom, clock: BlockClock) -> dict[str, Any]:
    """The members of the curated module ``name`` (the module list is ``ALLOWED_MODULES``)."""
    if name == "math":
        return _public(math)
    if name == "random":
        members = _pick(chance.rng, _RANDOM_FUNCTIONS)
        members["Random"] = chance.new_random
        return members
    if name == "re":
        members = _pick(
            re,
            ("compile", "search", "match", "fullmatch", "split", "findall", "finditer", "sub",
             "subn", "escape", "error", "Pattern", "Match"),
        )  # fmt: skip
        # Plain ints: the RegexFlag enum class is not needed to combine flags.
        for flag in ("A", "ASCII", "I", "IGNORECASE", "M", "MULTILINE", "S", "DOTALL",
                     "X", "VERBOSE", "U", "UNICODE", "NOFLAG"):  # fmt: skip
            members[flag] = int(getattr(re, flag))
        return members
    if name == "json":
        return _pick(json, ("dumps", "loads", "JSONDecodeError"))
    if name == "datetime":
        return _pick(
            datetime,
            ("datetime", "date", "time", "timedelta", "timezone", "tzinfo", "MINYEAR", "MAXYEAR"),
        )
    if name == "time":
        return {"time": lambda: clock.now, "sleep": time.sleep}
    if name == "itertools":
        return _public(itertools)
    if name == "collections":
        members = _pick(collections, ("Counter", "OrderedDict", "defaultdict", "deque", "ChainMap"))
        members["namedtuple"] = wrapped.namedtuple
        return members
    if name == "heapq":
        return _pick(
            heapq,
            ("heappush", "heappop", "heapify", "heapreplace", "heappushpop", "nlargest",
             "nsmallest", "merge"),
        )  # fmt: skip
    if name == "bisect":
        return _pick(
            bisect,
            ("bisect", "bisect_left", "bisect_right", "insort", "insort_left", "insort_right"),
        )
    if name == "decimal":
        # Not the shared template contexts (DefaultContext...): writable module-wide state.
        return _public(decimal, exclude=("DefaultContext", "BasicContext", "ExtendedContext"))
    if name == "fractions":
        return _pick(fractions, ("Fraction",))
    if name == "statistics":
        return _pick(
            statistics,
            ("mean", "fmean", "geometric_mean", "harmonic_mean", "median", "median_low",
             "median_high", "median_grouped", "mode", "multimode", "quantiles", "pstdev",
             "pvariance", "stdev", "variance", "correlation", "covariance", "linear_regression",
             "NormalDist", "StatisticsError"),
        )  # fmt: skip
    if name == "textwrap":
        return _pick(textwrap, ("wrap", "fill", "dedent", "indent", "shorten", "TextWrapper"))
    if name == "unicodedata":
        return _public(unicodedata, exclude=("ucd_3_2_0",))
    if name == "base64":
        return _pick(
            base64,
            ("b64encode", "b64decode", "standard_b64encode", "standard_b64decode",
             "urlsafe_b64encode", "urlsafe_b64decode", "b32encode", "b32decode", "b32hexencode",
             "b32hexdecode", "b16encode", "b16decode", "b85encode", "b85decode", "a85encode",
             "a85decode", "encodebytes", "decodebytes"),
        )  # fmt: skip
    if name == "hashlib":
        return _pick(
            hashlib,
            ("md5", "sha1", "sha224", "sha256", "sha384", "sha512", "sha3_224", "sha3_256",
             "sha3_384", "sha3_512", "shake_128", "shake_256", "blake2b", "blake2s", "new",
             "algorithms_available", "algorithms_guaranteed", "pbkdf2_hmac"),
        )  # fmt: skip
    if name == "uuid":
        members = _pick(
            uuid, ("UUID", "uuid3", "uuid5", "NAMESPACE_DNS", "NAMESPACE_URL", "NAMESPACE_OID",
                   "NAMESPACE_X500"),
        )  # fmt: skip
        members["uuid4"] = chance.uuid4
        return members
    if name == "csv":
        return _pick(
            csv,
            ("reader", "writer", "DictReader", "DictWriter", "Sniffer", "Error", "QUOTE_ALL",
             "QUOTE_MINIMAL", "QUOTE_NONE", "QUOTE_NONNUMERIC", "excel", "excel_tab",
             "unix_dialect"),
        )  # fmt: skip
    if name == "string":
        # Constants only: Formatter and Template reach attributes through format strings.
        return _pick(
            string,
            ("ascii_letters", "ascii_lowercase", "ascii_uppercase", "digits", "hexdigits",
             "octdigits", "punctuation", "printable", "whitespace", "capwords"),
        )  # fmt: skip
    if name == "dataclasses":
        # No make_dataclass: its namespace argument would let code define dunder methods.
        members = _pick(
            dataclasses,
            ("field", "fields", "asdict", "astuple", "replace", "is_dataclass",
             "FrozenInstanceError", "KW_ONLY"),
        )  # fmt: skip
        members["dataclass"] = wrapped.dataclass
        return members
    if name == "typing":
        # No get_type_hints: it evaluates annotation strings with the real eval.
        return _pick(
            typing,
            ("Any", "Callable", "Dict", "FrozenSet", "Generator", "Iterable", "Iterator", "List",
             "Literal", "Mapping", "NamedTuple", "Optional", "Sequence", "Set", "Tuple", "Union",
             "cast"),
        )  # fmt: skip
    if name == "enum":
        members = _pick(enum, ("auto", "unique"))
        members.update(wrapped.ENUM_CLASSES)
        return members
    raise KeyError(name)


ALLOWED_MODULES = (
    "base64", "bisect", "collections", "csv", "dataclasses", "datetime", "decimal", "enum",
    "fractions", "hashlib", "heapq", "itertools", "json", "math", "random", "re", "statistics",
    "string", "textwrap", "time", "typing", "unicodedata", "uuid",
)  # fmt: skip
"""Every module sandbox code may import."""


class ModuleTable:
    """The curated modules of one worker, built on first import, and the guarded importer."""

    def __init__(self, chance: BlockRandom, clock: BlockClock) -> None:
        self._chance = chance
        self._clock = clock
        self._loaded: dict[str, ModuleNamespace] = {}

    def get(self, name: str) -> ModuleNamespace:
        """The namespace of module ``name``.

        Raises:
            ImportError: The module is not on the allow-list.
        """
        namespace = self._loaded.get(name)
        if namespace is None:
            if name not in ALLOWED_MODULES:
                raise ImportError(
                    f"import of {name!r} is not allowed in the sandbox; allowed modules: "
                    + ", ".join(ALLOWED_MODULES)
                )
            namespace = ModuleNamespace(name, _build(name, self._chance, self._clock))
            self._loaded[name] = namespace
        return namespace

    def loaded(self) -> dict[str, ModuleNamespace]:
        """The namespaces imported so far."""
        return dict(self._loaded)

    def importer(self) -> Callable[..., ModuleNamespace]:
        """The sandbox's ``__import__``."""

        def sandbox_import(
            name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
        ) -> ModuleNamespace:
            if level:
                raise ImportError("relative imports are not allowed in the sandbox")
            return self.get(name)

        return sandbox_import
