"""What a definition statement reads and writes while it runs, found from its syntax.

A ``def``/``class``/``name = lambda`` statement runs more than the definition: its decorators,
default values, bases and class keywords, its class body (and the class bodies, method decorators
and default values inside it), and the comprehensions among them. What those parts read decides
what the statement makes; ``provenance.py`` records a token of each such name before the
statement runs. Function and lambda bodies do not run then, so their names are not counted here
(sandbox code the statement calls is followed as it runs). Annotations are labels, not reads,
unless they call something: ``x: Point`` does not make a class depend on ``Point``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


@dataclass(frozen=True)
class StatementReads:
    """What the compiler knows of a definition statement before it runs."""

    names: frozenset[str] = frozenset()
    """Global names its own parts read (see the module docstring)."""
    writes: frozenset[str] = frozenset()
    """Global names its class bodies bind (``global x``)."""
    calls_itself: bool = False
    """Whether a class body reads a name it binds itself (``x = helper()`` after ``def
    helper``): it may call sandbox code it defines."""


def statement_reads(statement: ast.stmt) -> StatementReads:
    """What a definition statement's own parts read and write while it runs."""
    finder = _Parts()
    if isinstance(statement, ast.Assign):
        finder.visit(statement.value)
    else:
        finder.visit(statement)
    names = frozenset(n for n in finder.reads if not n.startswith("_"))
    return StatementReads(names, frozenset(finder.writes), finder.calls_itself)


def _calls(node: ast.expr) -> bool:
    return any(isinstance(n, ast.Call | ast.NamedExpr) for n in ast.walk(node))


def _annotations(args: ast.arguments, returns: ast.expr | None) -> list[ast.expr]:
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    found = [a.annotation for a in every if a is not None and a.annotation is not None]
    return [*found, *([returns] if returns is not None else [])]


class _Parts(ast.NodeVisitor):
    """Collects the names the definition-time parts of a statement read and write."""

    def __init__(self) -> None:
        self.reads: set[str] = set()
        self.writes: set[str] = set()
        self.calls_itself = False
        self.in_comprehension = False
        self._scopes: list[tuple[set[str], set[str]]] = []  # class bodies: (binds, reads)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.reads.add(node.id)
            if self._scopes:
                self._scopes[-1][1].add(node.id)
        elif self._scopes:
            self._scopes[-1][0].add(node.id)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        if self.in_comprehension:  # binds the enclosing scope: the namespace, on a restore too
            self.writes.add(node.target.id)
        self.visit(node.value)

    def visit_Global(self, node: ast.Global) -> None:
        self.writes.update(node.names)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._bind(node.name)
        self._signature(node.decorator_list, node.args, node.returns)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._bind(node.name)
        self._signature(node.decorator_list, node.args, node.returns)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._signature([], node.args, None)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._bind(node.name)
        for part in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
            self.visit(part)
        self._scopes.append((set(), set()))
        for statement in node.body:
            self.visit(statement)
        binds, reads = self._scopes.pop()
        self.calls_itself = self.calls_itself or not binds.isdisjoint(reads)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.visit(node.target)
        if _calls(node.annotation):
            self.visit(node.annotation)
        if node.value is not None:
            self.visit(node.value)

    def visit_ListComp(self, node: ast.ListComp) -> None:
        self._comprehension(node)

    def visit_SetComp(self, node: ast.SetComp) -> None:
        self._comprehension(node)

    def visit_DictComp(self, node: ast.DictComp) -> None:
        self._comprehension(node)

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> None:
        self._comprehension(node)

    def _comprehension(self, node: ast.AST) -> None:
        """Its names, less its own loop variables (which may shadow globals)."""
        inner = _Parts()
        inner.in_comprehension = True
        inner.generic_visit(node)
        targets = {
            n.id
            for generator in getattr(node, "generators", [])
            for n in ast.walk(generator.target)
            if isinstance(n, ast.Name)
        }
        self.reads |= inner.reads - targets
        self.writes |= inner.writes
        self.calls_itself = self.calls_itself or inner.calls_itself
        if self._scopes:
            self._scopes[-1][1].update(inner.reads - targets)

    def _signature(
        self, decorators: list[ast.expr], args: ast.arguments, returns: ast.expr | None
    ) -> None:
        for part in [*decorators, *args.defaults, *args.kw_defaults]:
            if part is not None:
                self.visit(part)
        for annotation in _annotations(args, returns):
            if _calls(annotation):
                self.visit(annotation)

    def _bind(self, name: str) -> None:
        if self._scopes:
            self._scopes[-1][0].add(name)
