"""The names a block binds in the sandbox's namespace, found before it runs.

Only the variable-name rule (``sandbox/names.py``) is checked here: the host refuses a name that
breaks it as a protocol error, so the worker refuses the block first, with a message the model
can act on, and runs nothing of it. A block binds a namespace name by any binding at module scope
(assignments, loop and ``with`` targets, imports, definitions, ``except ... as``, ``match``
captures, ``:=`` — in a comprehension too, where it binds the enclosing scope) and by a
``global`` declaration anywhere. Names starting with ``_`` are left to the restricted compiler,
which refuses them everywhere.
"""

from __future__ import annotations

import ast
from collections.abc import Collection

from cove.environment.sandbox.names import name_problem


def binding_problem(tree: ast.Module, reserved: Collection[str]) -> tuple[str, int] | None:
    """``(message, line)`` for the first namespace binding that breaks the name rule, or None."""
    finder = _Bindings()
    finder.visit(tree)
    for name, line in finder.found:
        if name.startswith("_"):
            continue
        problem = name_problem(name, reserved)
        if problem is not None:
            return f"{problem}: choose another variable name", line
    return None


class _Bindings(ast.NodeVisitor):
    """Collects ``(name, line)`` of every binding that lands in the module's namespace."""

    def __init__(self) -> None:
        self.found: list[tuple[str, int]] = []
        self._depth = 0  # 0: module scope; more inside functions, lambdas and class bodies
        self._comprehension = 0

    def _add(self, name: str | None, node: ast.AST) -> None:
        if name is not None:
            self.found.append((name, getattr(node, "lineno", 0)))

    def _module_scope(self) -> bool:
        return self._depth == 0 and self._comprehension == 0

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Store) and self._module_scope():
            self._add(node.id, node)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        if self._depth == 0:  # binds the enclosing scope, out of a comprehension too
            self._add(node.target.id, node)
        self.visit(node.value)

    def visit_Global(self, node: ast.Global) -> None:
        for name in node.names:
            self._add(name, node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if self._module_scope():
            self._add(node.name, node)
        self._visit_all(
            [*node.decorator_list, node.args, *([node.returns] if node.returns else [])]
        )
        self._inside(node.body)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        if self._module_scope():
            self._add(node.name, node)
        self._visit_all([*node.decorator_list, node.args])
        self._inside(node.body)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.visit(node.args)
        self._inside([node.body])

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if self._module_scope():
            self._add(node.name, node)
        self._visit_all([*node.decorator_list, *node.bases, *node.keywords])
        self._inside(node.body)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if self._module_scope():
                self._add(alias.asname or alias.name.split(".")[0], node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            if self._module_scope():
                self._add(alias.asname or alias.name, node)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if self._module_scope():
            self._add(node.name, node)
        self.generic_visit(node)

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        if self._module_scope():
            self._add(node.name, node)
        self.generic_visit(node)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        if self._module_scope():
            self._add(node.name, node)

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        if self._module_scope():
            self._add(node.rest, node)
        self.generic_visit(node)

    def visit_ListComp(self, node: ast.ListComp) -> None:
        self._comprehend(node)

    def visit_SetComp(self, node: ast.SetComp) -> None:
        self._comprehend(node)

    def visit_DictComp(self, node: ast.DictComp) -> None:
        self._comprehend(node)

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> None:
        self._comprehend(node)

    def _comprehend(self, node: ast.AST) -> None:
        self._comprehension += 1
        self.generic_visit(node)
        self._comprehension -= 1

    def _visit_all(self, nodes: list[ast.AST]) -> None:
        for node in nodes:
            self.visit(node)

    def _inside(self, body: list[ast.stmt] | list[ast.expr]) -> None:
        self._depth += 1
        for node in body:
            self.visit(node)
        self._depth -= 1
