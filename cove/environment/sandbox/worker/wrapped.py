"""Safe stand-ins for the stdlib callables that generate code or take names from data.

``dataclasses.dataclass`` and ``collections.namedtuple`` build source text from field names and
run it with ``exec``/``eval``; ``enum``'s functional API (``Enum("E", names)``) puts any name —
dunders included — into a new class's namespace. Sandbox code controls those names, so each is
wrapped here: every name that will end up in generated code or a class namespace must be a plain
``str`` that is a public identifier (no leading ``_``, not a keyword), checked on a copy the
sandbox cannot change afterwards. Arguments that pick a module (``module=``, ``qualname=``) are
refused: they would make a class look as if the stdlib had defined it.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import keyword
from collections.abc import Mapping
from typing import Any

SANDBOX_MODULE = "sandbox"
"""The ``__module__`` of classes and functions defined by sandbox code."""


def check_name(name: object, what: str) -> str:
    """``name`` when it is a plain public identifier, else a ``ValueError`` naming ``what``."""
    if type(name) is not str or not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError(f"{what} {name!r} is not a valid identifier")
    if name.startswith("_"):
        raise ValueError(f"{what} {name!r} may not start with '_' in the sandbox")
    return name


# -- dataclasses ---------------------------------------------------------------------------------


def _check_dataclass(cls: object) -> type:
    """Refuse a class whose dataclass fields (own or inherited) could inject generated code.

    ``dataclasses`` writes field names into the source of ``__init__``/``__repr__``/``__eq__``...
    The fields are its own annotations (from a class body, so identifiers — unless put there
    another way) and the ``Field`` objects of dataclass bases, whose ``name`` is an ordinary
    attribute. Both are checked right before the real decorator runs; ``Field`` objects are not
    writable from the sandbox (``guards.guarded_write``) and sandbox classes cannot define the
    dunder hooks that would let code run in between.
    """
    if not isinstance(cls, type):
        raise TypeError("dataclass() takes a class")
    # Exactly what dataclasses reads (not inspect.get_annotations, which may differ).
    annotations = cls.__dict__.get("__annotations__", {})  # noqa: RUF063
    if not isinstance(annotations, dict):
        raise TypeError("dataclass(): the class annotations are not a dict")
    for name in annotations:
        check_name(name, "dataclass field")
    for value in cls.__dict__.values():
        if isinstance(value, dataclasses.Field) and type(value) is not dataclasses.Field:
            raise TypeError("dataclass(): field objects must come from dataclasses.field()")
    for base in cls.__mro__[1:]:
        inherited = base.__dict__.get("__dataclass_fields__")
        if inherited is None:
            continue
        if not isinstance(inherited, dict):
            raise TypeError("dataclass(): a base class has malformed fields")
        for key, field in inherited.items():
            if type(field) is not dataclasses.Field:
                raise TypeError("dataclass(): a base class has malformed fields")
            check_name(key, "dataclass field")
            check_name(field.name, "dataclass field")
    return cls


def dataclass(cls: Any = None, /, **options: Any) -> Any:
    """``dataclasses.dataclass`` after checking every field name that goes into generated code."""

    def wrap(target: Any) -> Any:
        return dataclasses.dataclass(_check_dataclass(target), **options)

    return wrap if cls is None else wrap(cls)


# -- collections.namedtuple ----------------------------------------------------------------------


def namedtuple(
    typename: str,
    field_names: Any,
    *,
    rename: bool = False,
    defaults: Any = None,
) -> type:
    """``collections.namedtuple`` without ``module=``, names checked before ``eval`` sees them."""
    if isinstance(field_names, str):
        names = field_names.replace(",", " ").split()
    else:
        names = list(field_names)
    check_name(typename, "namedtuple name")
    checked = [check_name(name, "namedtuple field") for name in names] if not rename else names
    make: Any = collections.namedtuple  # called with runtime values (mypy wants literals)
    result: type = make(typename, [str(name) for name in checked], rename=rename, defaults=defaults)
    result.__module__ = SANDBOX_MODULE
    return result


# -- enum ---------------------------------------------------------------------------------------


def _member_items(names: Any) -> list[Any]:
    """The functional API's ``names`` as a fresh list the sandbox cannot change under us."""
    if isinstance(names, str):
        items: list[Any] = names.replace(",", " ").split()
    elif isinstance(names, Mapping):
        items = [(key, names[key]) for key in list(names)]
    else:
        items = [item if isinstance(item, str) else tuple(item) for item in names]
    if items and all(type(item) is str for item in items):
        return [check_name(item, "enum member") for item in items]
    pairs = []
    for item in items:
        if isinstance(item, str) or len(item) != 2:
            raise TypeError("enum members must be all names or all (name, value) pairs")
        pairs.append((check_name(item[0], "enum member"), item[1]))
    return pairs


class SandboxEnumType(enum.EnumType):
    """The metaclass of the sandbox's enums: the functional API only takes public names."""

    def __call__(cls, value: Any, names: Any = None, *args: Any, **kwargs: Any) -> Any:
        if names is None and not args and not kwargs:
            return super().__call__(value)  # a member lookup: Color(1)
        for refused in ("module", "qualname"):
            if refused in kwargs:
                raise TypeError(f"{refused}= is not allowed in the sandbox")
        check_name(value, "enum name")
        return super().__call__(value, _member_items(names), *args, **kwargs)


# Subclasses of the real bases with the checking metaclass: ``class Color(Enum)`` works as usual
# and members are still instances of ``enum.Enum``.
class Enum(enum.Enum, metaclass=SandboxEnumType):
    """``enum.Enum`` whose functional API only takes public member names."""

    __module__ = "enum"


class IntEnum(enum.IntEnum, metaclass=SandboxEnumType):
    """``enum.IntEnum`` whose functional API only takes public member names."""

    __module__ = "enum"


class StrEnum(enum.StrEnum, metaclass=SandboxEnumType):
    """``enum.StrEnum`` whose functional API only takes public member names."""

    __module__ = "enum"


class Flag(enum.Flag, metaclass=SandboxEnumType):
    """``enum.Flag`` whose functional API only takes public member names."""

    __module__ = "enum"


class IntFlag(enum.IntFlag, metaclass=SandboxEnumType):
    """``enum.IntFlag`` whose functional API only takes public member names."""

    __module__ = "enum"


ENUM_CLASSES: dict[str, type] = {
    "Enum": Enum, "IntEnum": IntEnum, "StrEnum": StrEnum, "Flag": Flag, "IntFlag": IntFlag,
}  # fmt: skip
"""``enum``'s base classes as the sandbox sees them."""
