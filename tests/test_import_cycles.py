"""No import cycle in ``cove/``: each module can be read, and imported, before those using it.

The graph is read from the source, and counts every import statement wherever it stands (in a
function, under ``if TYPE_CHECKING:``): a cycle hidden from the interpreter is still two modules
that cannot be understood one without the other.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "cove"

ALLOWED: set[frozenset[str]] = set()
"""Cycles tolerated, each as the set of its modules: none."""


def module_files(root: Path) -> dict[str, Path]:
    """Every module of the package at ``root``, by dotted name (a package by its own name)."""
    modules = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of ``modules`` that module ``name`` (at ``path``) imports, anywhere in it."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                above = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*above, base] if base else above)
            # ``from package import module`` names the module (the package's ``__init__`` runs
            # before any of its modules: not a dependency); ``from module import name`` the module.
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def cycles(root: Path) -> list[frozenset[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    modules = module_files(root)
    graph = {name: imported(name, path, modules) for name, path in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def visit(name: str) -> None:
        index[name] = low[name] = len(index)
        stack.append(name)
        for other in graph[name]:
            if other not in index:
                visit(other)
                low[name] = min(low[name], low[other])
            elif other in stack:
                low[name] = min(low[name], index[other])
        if low[name] == index[name]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == name:
                    break
            if len(group) > 1:
                found.append(frozenset(group))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return found


def _described(groups: list[frozenset[str]]) -> Iterator[str]:
    for group in groups:
        yield " <-> ".join(sorted(group))


def test_cove_has_no_import_cycle() -> None:
    unexpected = [group for group in cycles(ROOT) if group not in ALLOWED]
    assert not unexpected, "import cycles: " + "; ".join(_described(unexpected))


def test_a_cycle_is_found_wherever_its_import_stands(tmp_path: Path) -> None:
    """The check itself: a cycle through a function-level, a TYPE_CHECKING and a relative
    import is one cycle."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from pkg.sub import b\n")
    (package / "sub" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import c\n"
    )
    (package / "sub" / "c.py").write_text("from ..a import f\n")
    (package / "d.py").write_text("import pkg.a\n")
    assert cycles(package) == [frozenset({"pkg.a", "pkg.sub.b", "pkg.sub.c"})]
