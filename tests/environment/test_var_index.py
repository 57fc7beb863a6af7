"""The variable index: most recently written first, deletions remove, numbering never goes back."""

from __future__ import annotations

from cove.environment.var_index import VarEntry, VarIndex
from cove.results import VarKind, VarVersion


def _v(
    name: str,
    version: int,
    kind: VarKind,
    type_name: str,
    preview: str,
    size: int | None = None,
    signature: str | None = None,
) -> VarVersion:
    encoded = None if kind == "deleted" else preview
    return VarVersion(name, kind, encoded, type_name, preview, size, signature, version=version)


def test_entries_most_recently_written_first() -> None:
    index = VarIndex()
    index.add(_v("a", 1, "value", "int", "1"))
    index.add(_v("b", 1, "value", "str", "'x'", size=1))
    index.add(_v("a", 2, "value", "int", "2"))
    assert [(e.var.name, e.var.version) for e in index.entries()] == [("a", 2), ("b", 1)]
    assert len(index) == 2
    assert "a" in index and "zz" not in index
    entry = index.get("b")
    assert isinstance(entry, VarEntry)
    assert (entry.var.type_name, entry.var.size, entry.var.preview) == ("str", 1, "'x'")


def test_deletion_removes_the_entry_but_keeps_the_numbering() -> None:
    index = VarIndex()
    index.add(_v("f", 1, "function", "function", "f(x)", signature="f(x)"))
    index.add(_v("f", 2, "deleted", "function", "deleted"))
    assert len(index) == 0 and index.get("f") is None
    assert index.next_version("f") == 3
    assert index.next_version("never") == 1


def test_reserve_advances_numbering_only() -> None:
    index = VarIndex()
    index.reserve("x", 5)
    index.reserve("x", 2)
    assert index.latest_version("x") == 5 and len(index) == 0
    index.add(_v("x", 3, "value", "int", "3"))  # older than known: numbering only, no entry
    assert index.get("x") is None
    index.add(_v("x", 6, "value", "int", "6"))
    assert index.get("x") == VarEntry(
        VarVersion("x", "value", None, "int", "6", version=6), updated_seq=1
    )


def test_recent_gives_the_latest_few_without_the_rest() -> None:
    index = VarIndex()
    for i in range(100):
        index.add(_v(f"v{i}", 1, "value", "int", str(i)))
    index.add(_v("v3", 2, "value", "int", "33"))
    index.add(_v("v99", 2, "deleted", "int", "deleted"))
    assert [e.var.name for e in index.recent(3)] == ["v3", "v98", "v97"]
    assert index.recent(3) == index.entries()[:3]
    assert index.recent(0) == [] and len(index.recent(1000)) == 99
