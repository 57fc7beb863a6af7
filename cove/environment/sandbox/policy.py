"""What sandbox code may say and which names it sees: the restricted compiler and the builtins.

A block is parsed once, split REPL style (the statements, then a trailing expression whose value
is the block's value) and each part is compiled with RestrictedPython's transformer, which turns
attribute, item and write access into calls of the guards in ``guards.py`` and refuses names
starting with ``_``. The builtins dict is built afresh for every worker from an allow-list:
RestrictedPython's ``safe_builtins`` is a shared module-level dict and is never handed out.
"""

from __future__ import annotations

import ast
import builtins
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from types import CodeType, SimpleNamespace
from typing import Any

from RestrictedPython.transformer import RestrictingNodeTransformer

from cove.environment.sandbox import guards as g

BLOCK_FILENAME = g.BLOCK_FILENAME
"""The file name of every code object compiled from sandbox code (how tracebacks find them)."""

SAFE_BUILTINS = (
    "abs", "all", "any", "ascii", "bin", "bool", "bytes", "callable", "chr", "classmethod",
    "complex", "dict", "divmod", "enumerate", "filter", "float", "format", "frozenset", "hash",
    "hex", "int", "isinstance", "issubclass", "iter", "len", "list", "map", "max", "min", "next",
    "object", "oct", "ord", "pow", "property", "range", "repr", "reversed", "round", "set",
    "slice", "sorted", "staticmethod", "str", "sum", "super", "tuple", "zip",
    "None", "False", "True", "Ellipsis", "NotImplemented",
    "ArithmeticError", "AssertionError", "AttributeError", "BaseException", "Exception",
    "FloatingPointError", "ImportError", "IndexError", "KeyError", "LookupError", "MemoryError",
    "ModuleNotFoundError", "NameError", "NotImplementedError", "OverflowError", "RecursionError",
    "RuntimeError", "StopIteration", "TimeoutError", "TypeError", "UnboundLocalError",
    "UnicodeDecodeError", "UnicodeEncodeError", "UnicodeError", "ValueError", "ZeroDivisionError",
    "Warning", "UserWarning", "DeprecationWarning", "RuntimeWarning",
)  # fmt: skip
"""Builtins the sandbox sees under their usual names. Deliberately absent: ``open``, ``exec``,
``eval``, ``compile``, ``__import__`` (replaced), ``globals``, ``locals``, ``vars``, ``type``,
``getattr``/``hasattr``/``dir`` (replaced by guarded versions), ``setattr``, ``delattr``,
``memoryview``, ``bytearray``, ``breakpoint``, ``input``, ``help``, ``exit``, ``quit``, ``id``
(nondeterministic), ``SystemExit`` and ``KeyboardInterrupt``."""


class BlockSyntaxError(Exception):
    """A block was refused by the parser or the restricted compiler."""

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


class SandboxPolicy(RestrictingNodeTransformer):
    """RestrictedPython's policy plus annotated assignments (``x: int = 1``, dataclass fields).

    The annotation and the value are ordinary expressions visited (and guarded) as usual; only
    plain names may be targets.
    """

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        if not isinstance(node.target, ast.Name):
            self.error(node, "Annotated assignments are only allowed to plain names.")
            return node
        return self.node_contents_visit(node)


@dataclass
class CompiledBlock:
    """A block ready to run: its statements, its trailing expression, and its definitions."""

    body: CodeType | None
    tail: CodeType | None
    definitions: dict[str, str] = field(default_factory=dict)
    """Top-level ``def``/``class``/``name = lambda`` statements: bound name -> source text."""


def compile_block(source: str) -> CompiledBlock:
    """Compile a block REPL style.

    Raises:
        BlockSyntaxError: The code does not parse or breaks the policy.
    """
    try:
        tree = ast.parse(source, BLOCK_FILENAME, "exec")
    except SyntaxError as exc:
        raise BlockSyntaxError(exc.msg, exc.lineno) from None
    definitions = _definitions(source, tree.body)
    tail_node: ast.Expression | None = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body.pop()
        assert isinstance(last, ast.Expr)
        tail_node = ast.Expression(last.value)
        ast.copy_location(tail_node, last)
    body = _compile(tree, "exec") if tree.body else None
    tail = _compile(tail_node, "eval") if tail_node is not None else None
    return CompiledBlock(body, tail, definitions)


def compile_definition(source: str) -> CodeType:
    """Compile a recorded definition (``def``/``class``/lambda statement) for restoring it.

    Raises:
        BlockSyntaxError: The source does not parse or breaks the policy.
    """
    try:
        tree = ast.parse(source, BLOCK_FILENAME, "exec")
    except SyntaxError as exc:
        raise BlockSyntaxError(exc.msg, exc.lineno) from None
    return _compile(tree, "exec")


def defined_name(source: str) -> str | None:
    """The name a recorded definition binds (the last top-level definition in ``source``)."""
    try:
        tree = ast.parse(source, BLOCK_FILENAME, "exec")
    except SyntaxError:
        return None
    names = list(_definitions(source, tree.body))
    return names[-1] if names else None


_ERROR_LINE = re.compile(r"^Line (\d+): (.*)$", re.DOTALL)


def _compile(tree: ast.Module | ast.Expression, mode: str) -> CodeType:
    errors: list[str] = []
    SandboxPolicy(errors, [], {}).visit(tree)
    if errors:
        match = _ERROR_LINE.match(errors[0])
        if match:
            raise BlockSyntaxError(match.group(2), int(match.group(1)))
        raise BlockSyntaxError(errors[0], None)
    # dont_inherit: RestrictedPython's own compile() call would pass on its module's
    # ``from __future__ import annotations`` and turn every annotation into a string.
    return compile(tree, BLOCK_FILENAME, mode, dont_inherit=True)


def _definitions(source: str, statements: list[ast.stmt]) -> dict[str, str]:
    found: dict[str, str] = {}
    for statement in statements:
        if isinstance(statement, ast.FunctionDef | ast.ClassDef):
            first = min([d.lineno for d in statement.decorator_list] + [statement.lineno])
            span = SimpleNamespace(
                lineno=first,
                col_offset=statement.col_offset,
                end_lineno=statement.end_lineno,
                end_col_offset=statement.end_col_offset,
            )
            text = ast.get_source_segment(source, span, padded=True)  # type: ignore[arg-type]
            if text is not None:
                found[statement.name] = textwrap.dedent(text)
        elif (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
            and isinstance(statement.value, ast.Lambda)
        ):
            text = ast.get_source_segment(source, statement)
            if text is not None:
                found[statement.targets[0].id] = text
        elif isinstance(statement, ast.If | ast.For | ast.While | ast.With | ast.Try):
            for part in ("body", "orelse", "finalbody"):
                found.update(_definitions(source, getattr(statement, part, [])))
            for handler in getattr(statement, "handlers", []):
                found.update(_definitions(source, handler.body))
    return found


def make_builtins(
    guards: g.Guards,
    *,
    print_factory: Callable[..., Any],
    importer: Callable[..., Any],
    extras: dict[str, Any],
) -> dict[str, Any]:
    """A fresh builtins dict for one worker.

    Args:
        guards: The worker's guards (bound to its block clock).
        print_factory: RestrictedPython's ``_print_``: returns the collector for a scope.
        importer: Replaces ``__import__``: returns curated module namespaces only.
        extras: Further names (e.g. ``ExtensionError``).
    """
    table: dict[str, Any] = {name: getattr(builtins, name) for name in SAFE_BUILTINS}
    table.update(
        {
            "__build_class__": builtins.__build_class__,
            "__name__": g.SANDBOX_MODULE,
            # RestrictedPython gives every class statement ``metaclass=__metaclass__``.
            "__metaclass__": type,
            "__import__": importer,
            "_getattr_": guards.getattr,
            "_getitem_": g.guarded_getitem,
            "_write_": g.guarded_write,
            "_getiter_": g.guarded_iter,
            "_iter_unpack_sequence_": g.iter_unpack_sequence,
            "_unpack_sequence_": g.unpack_sequence,
            "_inplacevar_": g.inplace_var,
            "_apply_": g.apply,
            "_print_": print_factory,
            "getattr": guards.getattr,
            "hasattr": guards.hasattr,
            "dir": guards.dir,
        }
    )
    table.update(extras)
    return table
