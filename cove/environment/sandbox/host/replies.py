"""Checking what a worker sends back before the host believes it.

A worker runs hostile code; should that code ever take the worker over, its replies are hostile
too. Every reply is checked for shape and types here, and anything malformed becomes a
``ProtocolError`` (the worker is then replaced) rather than an arbitrary exception in the host.
Names are checked against the rule a well-behaved worker keeps (``sandbox/names.py``): they
reach the database, the next prompt and every channel's display. A restore reply may only name
variables the host asked to restore.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, get_args

from cove.environment.sandbox.frames import Frame, ProtocolError
from cove.environment.sandbox.host.figures import parse_figures
from cove.environment.sandbox.names import module_problem, name_problem
from cove.results import BlockFigure, VarKind, VarVersion

_KINDS = frozenset(get_args(VarKind))


@dataclass(frozen=True)
class BlockReply:
    """A checked ``done`` reply of the worker."""

    ok: bool
    value_preview: str | None
    value_encoded: str | None
    stdout: str
    error: str | None
    error_type: str | None
    fatal: bool
    changes: tuple[VarVersion, ...]
    imports: dict[str, tuple[str, str | None]]
    figures: tuple[BlockFigure, ...] = ()
    chunks: Any = None  # [[name, base64], ...]: checked by the client's ``ChunkBook``


def block_reply(reply: Frame, reserved: Collection[str] = ()) -> BlockReply:
    """Check a reply to ``execute``.

    Args:
        reply: The frame.
        reserved: The names extensions bind, which no variable may have.

    Raises:
        ProtocolError: The reply is not a well-formed ``done`` frame.
    """
    if reply.get("op") != "done":
        raise ProtocolError(f"unexpected reply {str(reply.get('op'))[:40]!r} to a block")
    changes = reply.get("changes", [])
    imports = reply.get("imports", {})
    if not isinstance(changes, list) or not isinstance(imports, dict):
        raise ProtocolError("malformed block reply")
    return BlockReply(
        ok=_typed(reply.get("ok"), bool),
        value_preview=_optional_str(reply.get("value_preview")),
        value_encoded=_optional_str(reply.get("value_encoded")),
        stdout=_typed(reply.get("stdout", ""), str),
        error=_optional_str(reply.get("error")),
        error_type=_optional_str(reply.get("error_type")),
        fatal=_typed(reply.get("fatal", False), bool),
        changes=tuple(snapshot(item, reserved) for item in changes),
        imports={_name(k, reserved): _import_ref(v) for k, v in imports.items()},
        figures=parse_figures(reply.get("figures")),
        chunks=reply.get("chunks", []),
    )


def restore_reply(reply: Frame, sent: Collection[str]) -> tuple[list[str], list[str]]:
    """Check a reply to ``restore``: the restored and the lost names.

    Args:
        reply: The frame.
        sent: The names of the snapshots the host sent: the only names the reply may hold.

    Raises:
        ProtocolError: The reply is not a well-formed ``restored`` frame.
    """
    if reply.get("op") != "restored":
        raise ProtocolError(f"unexpected reply {str(reply.get('op'))[:40]!r} to a restore")
    restored, lost = reply.get("restored"), reply.get("lost")
    if not isinstance(restored, list) or not isinstance(lost, list):
        raise ProtocolError("malformed restore reply")
    for name in [*restored, *lost]:
        if type(name) is not str or name not in sent:
            raise ProtocolError("a restore reply names a variable that was not sent")
    return restored, lost


def snapshot(item: Any, reserved: Collection[str] = ()) -> VarVersion:
    """A ``VarVersion`` from its wire form.

    Raises:
        ProtocolError: The item is malformed, or its name is not a variable name.
    """
    if not isinstance(item, dict) or item.get("kind") not in _KINDS:
        raise ProtocolError("malformed variable snapshot")
    size = item.get("size")
    if size is not None and (type(size) is not int):
        raise ProtocolError("malformed variable snapshot size")
    return VarVersion(
        name=_name(item.get("name"), reserved),
        kind=item["kind"],
        encoded=_optional_str(item.get("encoded")),
        type_name=_typed(item.get("type_name", ""), str),
        preview=_typed(item.get("preview", ""), str),
        size=size,
        signature=_optional_str(item.get("signature")),
    )


def _name(value: Any, reserved: Collection[str]) -> str:
    problem = name_problem(value, reserved)
    if problem is not None:
        raise ProtocolError(f"bad variable name from the worker: {problem}")
    return str(value)


def _typed(value: Any, kind: type[Any]) -> Any:
    if type(value) is not kind:
        raise ProtocolError(f"expected {kind.__name__} in a worker reply")
    return value


def _optional_str(value: Any) -> str | None:
    return None if value is None else _typed(value, str)


def _import_ref(value: Any) -> tuple[str, str | None]:
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise ProtocolError("malformed import binding")
    problem = module_problem(value[0], value[1])
    if problem is not None:
        raise ProtocolError(f"bad import binding from the worker: {problem}")
    return value[0], value[1]
