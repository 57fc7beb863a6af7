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
import importlib
import itertools
import json
import math
import random
import re
import statistics
import string
import sys
import textwrap
import time
import typing
import unicodedata
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from cove.environment.sandbox.worker import wrapped
from cove.environment.sandbox.worker.data.libraries import LIBRARY_ROOTS
from cove.environment.sandbox.worker.guards import BlockClock, ModuleNamespaceLike
from cove.environment.sandbox.worker.witness import Witness, pure_member


class ModuleNamespace(ModuleNamespaceLike):
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


Members = dict[str, Any]
Builder = Callable[[BlockRandom, BlockClock], Members]


def _picked(module: Any, *names: str) -> Builder:
    """A builder of the named members of ``module``."""
    return lambda chance, clock: _pick(module, names)


def _all_public(module: Any, *exclude: str) -> Builder:
    """A builder of every public member of ``module`` but ``exclude``."""
    return lambda chance, clock: _public(module, exclude=exclude)


def _random(chance: BlockRandom, clock: BlockClock) -> Members:
    members = _pick(chance.rng, _RANDOM_FUNCTIONS)
    members["Random"] = chance.new_random
    return members


def _re(chance: BlockRandom, clock: BlockClock) -> Members:
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


def _time(chance: BlockRandom, clock: BlockClock) -> Members:
    return {"time": lambda: clock.now, "sleep": time.sleep}


def _collections(chance: BlockRandom, clock: BlockClock) -> Members:
    members = _pick(collections, ("Counter", "OrderedDict", "defaultdict", "deque", "ChainMap"))
    members["namedtuple"] = wrapped.namedtuple
    return members


def _uuid(chance: BlockRandom, clock: BlockClock) -> Members:
    members = _pick(
        uuid, ("UUID", "uuid3", "uuid5", "NAMESPACE_DNS", "NAMESPACE_URL", "NAMESPACE_OID",
               "NAMESPACE_X500"),
    )  # fmt: skip
    members["uuid4"] = chance.uuid4
    return members


def _dataclasses(chance: BlockRandom, clock: BlockClock) -> Members:
    # No make_dataclass: its namespace argument would let code define dunder methods.
    members = _pick(
        dataclasses,
        ("field", "fields", "asdict", "astuple", "replace", "is_dataclass",
         "FrozenInstanceError", "KW_ONLY"),
    )  # fmt: skip
    members["dataclass"] = wrapped.dataclass
    return members


def _enum(chance: BlockRandom, clock: BlockClock) -> Members:
    members = _pick(enum, ("auto", "unique"))
    members.update(wrapped.ENUM_CLASSES)
    return members


_BUILDERS: dict[str, Builder] = {
    "base64": _picked(
        base64,
        "b64encode", "b64decode", "standard_b64encode", "standard_b64decode", "urlsafe_b64encode",
        "urlsafe_b64decode", "b32encode", "b32decode", "b32hexencode", "b32hexdecode",
        "b16encode", "b16decode", "b85encode", "b85decode", "a85encode", "a85decode",
        "encodebytes", "decodebytes",
    ),
    "bisect": _picked(
        bisect, "bisect", "bisect_left", "bisect_right", "insort", "insort_left", "insort_right"
    ),
    "collections": _collections,
    "csv": _picked(
        csv,
        "reader", "writer", "DictReader", "DictWriter", "Sniffer", "Error", "QUOTE_ALL",
        "QUOTE_MINIMAL", "QUOTE_NONE", "QUOTE_NONNUMERIC", "excel", "excel_tab", "unix_dialect",
    ),
    "dataclasses": _dataclasses,
    "datetime": _picked(
        datetime,
        "datetime", "date", "time", "timedelta", "timezone", "tzinfo", "MINYEAR", "MAXYEAR",
    ),
    # Not the shared template contexts (DefaultContext...): writable module-wide state.
    "decimal": _all_public(decimal, "DefaultContext", "BasicContext", "ExtendedContext"),
    "enum": _enum,
    "fractions": _picked(fractions, "Fraction"),
    "hashlib": _picked(
        hashlib,
        "md5", "sha1", "sha224", "sha256", "sha384", "sha512", "sha3_224", "sha3_256",
        "sha3_384", "sha3_512", "shake_128", "shake_256", "blake2b", "blake2s", "new",
        "algorithms_available", "algorithms_guaranteed", "pbkdf2_hmac",
    ),
    "heapq": _picked(
        heapq,
        "heappush", "heappop", "heapify", "heapreplace", "heappushpop", "nlargest", "nsmallest",
        "merge",
    ),
    "itertools": _all_public(itertools),
    "json": _picked(json, "dumps", "loads", "JSONDecodeError"),
    "math": _all_public(math),
    "random": _random,
    "re": _re,
    "statistics": _picked(
        statistics,
        "mean", "fmean", "geometric_mean", "harmonic_mean", "median", "median_low", "median_high",
        "median_grouped", "mode", "multimode", "quantiles", "pstdev", "pvariance", "stdev",
        "variance", "correlation", "covariance", "linear_regression", "NormalDist",
        "StatisticsError",
    ),
    # Constants only: Formatter and Template reach attributes through format strings.
    "string": _picked(
        string,
        "ascii_letters", "ascii_lowercase", "ascii_uppercase", "digits", "hexdigits", "octdigits",
        "punctuation", "printable", "whitespace", "capwords",
    ),
    "textwrap": _picked(textwrap, "wrap", "fill", "dedent", "indent", "shorten", "TextWrapper"),
    "time": _time,
    # No get_type_hints: it evaluates annotation strings with the real eval.
    "typing": _picked(
        typing,
        "Any", "Callable", "Dict", "FrozenSet", "Generator", "Iterable", "Iterator", "List",
        "Literal", "Mapping", "NamedTuple", "Optional", "Sequence", "Set", "Tuple", "Union",
        "cast",
    ),
    "unicodedata": _all_public(unicodedata, "ucd_3_2_0"),
    "uuid": _uuid,
}  # fmt: skip
"""How each allowed module's members are built (a module object itself is never handed out)."""


def _build(name: str, chance: BlockRandom, clock: BlockClock) -> Members:
    """The members of the curated module ``name`` (the module list is ``ALLOWED_MODULES``)."""
    return _BUILDERS[name](chance, clock)


ALLOWED_MODULES = tuple(sorted(_BUILDERS))
"""Every standard-library module sandbox code may import."""

DATA_MODULES = (
    "matplotlib", "matplotlib.colors", "matplotlib.dates", "matplotlib.pyplot",
    "matplotlib.ticker", "numpy", "numpy.fft", "numpy.lib", "numpy.lib.stride_tricks",
    "numpy.linalg", "numpy.random", "pandas",
)  # fmt: skip
"""The data library modules sandbox code may import when the libraries are installed
(``data/support.py`` builds them)."""


LibraryBuilder = Callable[["ModuleTable"], Members]
"""Builds the members of a data library module (``data/support.py``), given the table (for
its submodules)."""


class ModuleTable:
    """The curated modules of one worker, built on first import, and the guarded importer.

    Args:
        chance: The block's random source.
        clock: The block's clock.
        libraries: How the data library modules are built (``DataSupport.builders``); None when
            the libraries are not installed (importing them then says so).
    """

    def __init__(
        self,
        chance: BlockRandom,
        clock: BlockClock,
        libraries: Mapping[str, LibraryBuilder] | None = None,
    ) -> None:
        self._chance = chance
        self._clock = clock
        self._libraries = dict(libraries or {})
        self._loaded: dict[str, ModuleNamespace] = {}

    def get(self, name: str) -> ModuleNamespace:
        """The namespace of module ``name``.

        Raises:
            ImportError: The module is not on the allow-list.
        """
        namespace = self._loaded.get(name)
        if namespace is None:
            if name in self._libraries:
                members = self._libraries[name](self)
            elif name in ALLOWED_MODULES:
                members = _build(name, self._chance, self._clock)
            elif name in DATA_MODULES:
                raise ImportError(
                    f"{name} is not installed in this sandbox (cove was installed without its "
                    "data extra: pip install 'cove[data]')"
                )
            else:
                raise ImportError(
                    f"import of {name!r} is not allowed in the sandbox; allowed modules: "
                    + ", ".join(self.names())
                )
            namespace = ModuleNamespace(name, members)
            self._loaded[name] = namespace
        return namespace

    def names(self) -> tuple[str, ...]:
        """Every module this worker's sandbox code may import."""
        return tuple(sorted({*ALLOWED_MODULES, *self._libraries}))

    def loaded(self) -> dict[str, ModuleNamespace]:
        """The namespaces imported so far."""
        return dict(self._loaded)

    def importer(self, witness: Witness | None = None) -> Callable[..., ModuleNamespace]:
        """The sandbox's ``__import__``.

        Args:
            witness: Told when a ``from`` import binds a member that may change its arguments
                (its later calls pass no guard; ``witness.py``).
        """

        def sandbox_import(
            name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
        ) -> Any:
            if type(fromlist) is list and not fromlist and not level:
                # C code importing for itself (PyImport_Import passes an empty list; an import
                # statement passes None or a tuple): the module never reaches sandbox code.
                return library_import(name)
            if level:
                raise ImportError("relative imports are not allowed in the sandbox")
            namespace = self.get(name)
            if witness is not None and not all(
                type(m) is str and pure_member(name, m) for m in fromlist or ()
            ):
                witness.flag()
            if not fromlist and "." in name:
                return self.get(name.partition(".")[0])  # ``import a.b`` binds ``a``
            return namespace

        return sandbox_import


_C_IMPORTS = frozenset(
    {"_strptime", "encodings", "warnings", "copyreg", "io", "time", "datetime", "calendar",
     "locale", "re", "math", "operator", "numbers", "decimal", "zoneinfo", "unicodedata"}
)  # fmt: skip
"""Standard-library modules C code may import for itself while a block runs."""


def library_import(name: str) -> Any:
    """The real module for an import made by C code (numpy's ``numpy._core._methods``...).

    Only the data libraries' own modules (imported now if need be: the zygote loaded them all,
    so this is rare) and a few standard-library helpers; never handed to sandbox code.

    Raises:
        ImportError: Any other module.
    """
    root = name.partition(".")[0]
    if root in LIBRARY_ROOTS:
        return sys.modules.get(name) or importlib.import_module(name)
    if root in _C_IMPORTS and name in sys.modules:
        return sys.modules[name]
    raise ImportError(f"import of {name!r} is not allowed in the sandbox")
