"""The allow-list audit table (``docs/sandbox-allowlist.md``) agrees with the code.

Every name sandbox code reaches directly — curated module members and builtins — must have one
verdict; "wrapped" must mean the sandbox's object is not the stdlib's own; "removed" names must
not be reachable. A new module member or builtin without a verdict fails here.
"""

from __future__ import annotations

import builtins
import importlib
import re
from pathlib import Path
from typing import Any

from cove.environment.sandbox.worker.modules import ALLOWED_MODULES
from cove.environment.sandbox.worker.runtime import Runtime

TABLE = Path(__file__).parents[4] / "docs" / "sandbox-allowlist.md"
ROW = re.compile(r"^\| `([^`]+)` \| (kept|wrapped|removed) \| (.+) \|$")
# Builtins whose names start with "_" but are part of the sandbox's interface.
PUBLIC_DUNDERS = ("__import__", "__build_class__", "__name__")
ABSENT = object()  # a sandbox name with no stdlib counterpart (ExtensionError) is "kept"


def verdicts() -> dict[str, str]:
    found: dict[str, str] = {}
    for line in TABLE.read_text(encoding="utf-8").splitlines():
        match = ROW.match(line)
        if match:
            name, verdict, why = match.groups()
            assert name not in found, f"{name} has two rows"
            assert why.strip(), f"{name} has no reason"
            found[name] = verdict
    return found


def reachable_names() -> dict[str, tuple[Any, Any]]:
    """``name -> (the sandbox's object, the stdlib's object or None)`` for every direct name."""
    runtime = Runtime(request=lambda frame: frame, output_limit=100, snapshot_limit=100)
    names: dict[str, tuple[Any, Any]] = {}
    for module in ALLOWED_MODULES:
        real = importlib.import_module(module)
        for member, obj in runtime.modules.get(module).members().items():
            names[f"{module}.{member}"] = (obj, getattr(real, member, ABSENT))
    for name, obj in runtime.builtins.items():
        if name.startswith("_") and name not in PUBLIC_DUNDERS:
            continue  # the compiler's guard hooks (_getattr_...), unreachable by name
        names[f"builtins.{name}"] = (obj, getattr(builtins, name, ABSENT))
    return names


def test_every_reachable_name_has_a_verdict() -> None:
    table = verdicts()
    missing = sorted(set(reachable_names()) - set(table))
    assert missing == [], f"names without an audit verdict in {TABLE.name}: {missing}"


def test_kept_and_wrapped_rows_name_reachable_objects_and_removed_ones_do_not() -> None:
    table = verdicts()
    names = reachable_names()
    stale = sorted(n for n, v in table.items() if v != "removed" and n not in names)
    assert stale == [], f"rows for names the sandbox no longer has: {stale}"
    present = sorted(n for n, v in table.items() if v == "removed" and n in names)
    assert present == [], f"names marked removed but reachable: {present}"


def test_wrapped_means_the_sandbox_object_is_not_the_stdlib_one() -> None:
    table = verdicts()
    for name, (ours, real) in reachable_names().items():
        expected = "kept" if ours is real or real is ABSENT else "wrapped"
        assert table[name] == expected, f"{name}: the table says {table[name]}, code is {expected}"


def test_the_generated_code_checks_are_in_the_table() -> None:
    table = verdicts()
    for name in ("dataclasses.dataclass", "collections.namedtuple", "enum.Enum", "enum.StrEnum"):
        assert table[name] == "wrapped"
    for name in ("dataclasses.make_dataclass", "typing.get_type_hints", "string.Formatter"):
        assert table[name] == "removed"
