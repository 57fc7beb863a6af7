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
from tests.environment.sandbox.worker import library_audit

TABLE = Path(__file__).parents[4] / "docs" / "sandbox-allowlist.md"
ROW = re.compile(r"^\| `([^`]+)` \| (kept|wrapped|removed) \| (.+) \|$")
# Builtins whose names start with "_" but are part of the sandbox's interface.
PUBLIC_DUNDERS = ("__import__", "__build_class__", "__name__")
ABSENT = object()  # a sandbox name with no stdlib counterpart (ExtensionError) is "kept"


def verdicts(*, libraries: bool = False) -> dict[str, str]:
    """The table's verdicts: of the standard library and builtins, or of the data libraries."""
    found: dict[str, str] = {}
    for line in TABLE.read_text(encoding="utf-8").splitlines():
        match = ROW.match(line)
        if match:
            name, verdict, why = match.groups()
            assert name not in found, f"{name} has two rows"
            assert why.strip(), f"{name} has no reason"
            found[name] = verdict
    stdlib = {n: v for n, v in found.items() if n.split(".")[0] in {*ALLOWED_MODULES, "builtins"}}
    return {n: v for n, v in found.items() if n not in stdlib} if libraries else stdlib


def reachable_names() -> dict[str, tuple[Any, Any]]:
    """``name -> (the sandbox's object, the stdlib's object or None)`` for every direct name."""
    runtime = Runtime(request=lambda frame: frame, output_limit=100, value_limit=100)
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


def test_every_data_library_name_has_the_verdict_the_code_gives() -> None:
    code = {name: verdict for name, (verdict, _) in library_audit.rows().items()}
    unaudited = sorted(n for n, v in code.items() if v == "unaudited")
    assert unaudited == [], f"library attributes without a verdict in the code: {unaudited}"
    table = verdicts(libraries=True)
    missing = sorted(set(code) - set(table))
    assert missing == [], f"names without an audit verdict in {TABLE.name}: {missing}"
    stale = sorted(set(table) - set(code))
    assert stale == [], f"rows for names the code no longer decides: {stale}"
    differ = sorted(n for n in code if table[n] != code[n])
    assert differ == [], f"verdicts that differ from the code: {differ}"


def test_removed_library_attributes_are_refused() -> None:
    runtime = Runtime(request=lambda frame: frame, output_limit=100, value_limit=100)
    assert runtime.data is not None
    for cls, surface in runtime.data.surfaces.by_class.items():
        for name in surface.removed:
            try:
                runtime.data.surfaces.lookup(cls, name)
            except AttributeError:
                continue
            raise AssertionError(f"{surface.path}.{name} is removed but reachable")


def test_the_refusals_the_issue_names_are_in_the_table() -> None:
    table = verdicts(libraries=True)
    for name in (
        "numpy.fromfile", "numpy.memmap", "numpy.seterrcall", "numpy.bmat", "numpy.recarray",
        "pandas.eval", "pandas.read_pickle", "pandas.set_option", "pandas.read_clipboard",
        "pandas.read_sql", "pandas.DataFrame.eval", "pandas.DataFrame.query",
        "pandas.DataFrame.to_pickle", "pandas.DataFrame.style", "pandas.DataFrame.to_clipboard",
        "pandas.DataFrame.to_sql", "numpy.ndarray.ctypes", "numpy.ndarray.tofile",
        "numpy.ndarray.dump", "numpy.ndarray.dumps", "matplotlib.pyplot.switch_backend",
        "matplotlib.pyplot.rc_file",
    ):  # fmt: skip
        assert table[name] == "removed", name
    wrapped = (
        "numpy.load", "numpy.ndarray", "numpy.frombuffer", "pandas.read_csv",
        "pandas.DataFrame.to_csv", "pandas.DataFrame.agg", "matplotlib.pyplot.rcParams",
    )  # fmt: skip
    for name in wrapped:
        assert table[name] == "wrapped", name
    assert "numpy.lib.stride_tricks.as_strided" not in table
    assert table["numpy.lib.stride_tricks.sliding_window_view"] == "kept"
