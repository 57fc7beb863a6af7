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
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from types import CodeType, SimpleNamespace
from typing import Any

from RestrictedPython.transformer import IOPERATOR_TO_STR, RestrictingNodeTransformer

from cove.environment.sandbox.worker import guards as g
from cove.environment.sandbox.worker.bindings import binding_problem
from cove.environment.sandbox.worker.statements import StatementReads, statement_reads

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


AUGMENTED_ITEM = "_augitem_"
AUGMENTED_ATTRIBUTE = "_augattr_"
SLICE = "_slice_"


class SandboxPolicy(RestrictingNodeTransformer):
    """RestrictedPython's policy plus annotated assignments (``x: int = 1``, dataclass fields)
    and augmented assignment to items and attributes.

    The annotation and the value are ordinary expressions visited (and guarded) as usual; only
    plain names may be targets. ``a[k] += v`` becomes ``_augitem_(a, k, "+=", v)`` and
    ``a.b += v`` ``_augattr_(a, "b", "+=", v)``: the read, the operation and the write each go
    through their guard (``Guards.augmented_item``/``augmented_attribute``); slices in the key
    become ``slice`` objects. The target and key are evaluated once, the value before the item is
    read (Python reads the item first).
    """

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        if not isinstance(node.target, ast.Name):
            self.error(node, "Annotated assignments are only allowed to plain names.")
            return node
        return self.node_contents_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        target = node.target
        if isinstance(target, ast.Subscript):
            parts = [self.visit(target.value), self._key(target.slice)]
            hook = AUGMENTED_ITEM
        elif isinstance(target, ast.Attribute):
            if target.attr.startswith("_"):
                self.error(node, f'"{target.attr}" is an invalid attribute name because it '
                           'starts with "_".')  # fmt: skip
                return node
            parts = [self.visit(target.value), ast.Constant(target.attr)]
            hook = AUGMENTED_ATTRIBUTE
        else:
            result: ast.AST = super().visit_AugAssign(node)  # type: ignore[assignment]
            return result
        operator = ast.Constant(IOPERATOR_TO_STR[type(node.op)])
        call = ast.Call(ast.Name(hook, ast.Load()), [*parts, operator, self.visit(node.value)], [])
        statement = ast.Expr(call)
        ast.copy_location(statement, node)
        ast.fix_missing_locations(statement)
        return statement

    def _key(self, node: ast.expr) -> ast.expr:
        """A subscript key as an expression: slices become ``_slice_(lower, upper, step)``."""
        if isinstance(node, ast.Slice):
            bounds = [
                self.visit(part) if part is not None else ast.Constant(None)
                for part in (node.lower, node.upper, node.step)
            ]
            return ast.copy_location(ast.Call(ast.Name(SLICE, ast.Load()), bounds, []), node)
        if isinstance(node, ast.Tuple):
            items = [self._key(item) for item in node.elts]
            return ast.copy_location(ast.Tuple(items, ast.Load()), node)
        result: ast.expr = self.visit(node)
        return result


DEFINE_HOOK = "_define_"
"""The builtin each top-level definition of a block reports the object it made to.

Inserted by the compiler after the policy check (sandbox code cannot name it: it starts with
``_``): ``@_define_(k)`` as the outermost decorator of the k-th ``def``/``class`` statement, and
``_define_(k)(lambda ...)`` around a lambda assigned to a name. The worker thereby learns which
statement made which object — the branch that actually ran, whatever names were re-bound later —
and records that statement's source for the object (``tracking.VariableTracker.remember``).
"""


GENERATOR_END = "_generator_end_"
"""The builtin a sandbox generator that holds a ``try`` calls when it ends (``witness.flag``).

Its ``finally`` or ``except`` clauses may run when the generator is collected, outside any block
and any guard: the outermost ``try``/``finally`` the compiler wraps its body in tells the witness
that something may have changed which no guard saw."""


def _mark_generator_ends(tree: ast.AST) -> None:
    """Wrap the body of every generator function holding a ``try`` in ``try: ... finally:
    _generator_end_()``."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        own = list(_own_nodes(node))
        if any(isinstance(n, ast.Yield | ast.YieldFrom) for n in own) and any(
            isinstance(n, ast.Try | ast.TryStar) for n in own
        ):
            end = ast.Expr(ast.Call(ast.Name(GENERATOR_END, ast.Load()), [], []))
            wrapped = ast.Try(body=node.body, handlers=[], orelse=[], finalbody=[end])
            ast.copy_location(wrapped, node.body[0])
            ast.copy_location(end, node.body[-1])
            node.body = [wrapped]


def _own_nodes(function: ast.FunctionDef) -> list[ast.AST]:
    """The nodes of ``function``'s body outside nested functions, lambdas and classes."""
    found: list[ast.AST] = []
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        found.append(node)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return found


@dataclass
class CompiledBlock:
    """A block ready to run: its statements, its trailing expression, and its definitions."""

    body: CodeType | None
    tail: CodeType | None
    definitions: list[tuple[str, str]] = field(default_factory=list)
    """Top-level ``def``/``class``/``name = lambda`` statements in source order: ``(bound name,
    source text)``; the k-th reports its object through ``_define_(k)``."""
    reads: list[StatementReads] = field(default_factory=list)
    """For each definition, what its statement's own parts read (``statements.py``)."""


def compile_block(source: str, reserved: Collection[str] = ()) -> CompiledBlock:
    """Compile a block REPL style.

    Args:
        source: The block's code.
        reserved: Names the block may not bind in the namespace (the extensions' names).

    Raises:
        BlockSyntaxError: The code does not parse, breaks the policy or would bind a name that
            cannot name a variable (``sandbox/names.py``).
    """
    try:
        tree = ast.parse(source, BLOCK_FILENAME, "exec")
    except SyntaxError as exc:
        raise BlockSyntaxError(exc.msg, exc.lineno) from None
    problem = binding_problem(tree, reserved)
    if problem is not None:
        raise BlockSyntaxError(*problem)
    definitions: list[tuple[str, str]] = []
    _definitions(source, tree.body, definitions)
    sites: list[ast.stmt] = []
    _hook_sites(tree.body, sites)  # before compiling: the restricting transformer rewrites nodes
    reads = [statement_reads(site) for site in sites]
    tail_node: ast.Expression | None = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body.pop()
        assert isinstance(last, ast.Expr)
        tail_node = ast.Expression(last.value)
        ast.copy_location(tail_node, last)
    body = _compile(tree, "exec", definitions) if tree.body else None
    tail = _compile(tail_node, "eval") if tail_node is not None else None
    return CompiledBlock(body, tail, definitions, reads)


def compile_definition(source: str) -> CodeType:
    """Compile a recorded definition (``def``/``class``/lambda statement) for restoring it.

    Exactly the policy of a live block: the same parser, restricted compiler and guards. On top
    of it, the source must be one definition statement — all a block ever records — so a
    stored source (from a database that may have been edited) cannot carry other statements.

    Raises:
        BlockSyntaxError: The source does not parse, breaks the policy or is not one definition.
    """
    try:
        tree = ast.parse(source, BLOCK_FILENAME, "exec")
    except SyntaxError as exc:
        raise BlockSyntaxError(exc.msg, exc.lineno) from None
    if len(tree.body) != 1 or _bound_name_or_none(tree.body[0]) is None:
        raise BlockSyntaxError("a recorded definition must be one def, class or lambda", None)
    # No definition hook: the runtime records the restored object's source itself.
    return _compile(tree, "exec")


def defined_name(source: str) -> str | None:
    """The name a recorded definition binds (the last top-level definition in ``source``)."""
    try:
        tree = ast.parse(source, BLOCK_FILENAME, "exec")
    except SyntaxError:
        return None
    found: list[tuple[str, str]] = []
    _definitions(source, tree.body, found)
    return found[-1][0] if found else None


_ERROR_LINE = re.compile(r"^Line (\d+): (.*)$", re.DOTALL)


def _compile(
    tree: ast.Module | ast.Expression,
    mode: str,
    definitions: list[tuple[str, str]] | None = None,
) -> CodeType:
    errors: list[str] = []
    SandboxPolicy(errors, [], {}).visit(tree)
    if errors:
        match = _ERROR_LINE.match(errors[0])
        if match:
            raise BlockSyntaxError(match.group(2), int(match.group(1)))
        raise BlockSyntaxError(errors[0], None)
    _mark_generator_ends(tree)
    if definitions and isinstance(tree, ast.Module):
        # After the policy check, which refuses the hook's name as it must for user code. The
        # transformer keeps the statement structure, so the k-th definition found now is the
        # k-th found in the source; if not, no hook is set (the definitions stay unrecorded).
        hooks: list[ast.stmt] = []
        _hook_sites(tree.body, hooks)
        if [_bound_name(site) for site in hooks] == [name for name, _ in definitions]:
            for index, site in enumerate(hooks):
                _set_hook(site, index)
            ast.fix_missing_locations(tree)
    ast.fix_missing_locations(tree)
    # dont_inherit: RestrictedPython's own compile() call would pass on its module's
    # ``from __future__ import annotations`` and turn every annotation into a string.
    return compile(tree, BLOCK_FILENAME, mode, dont_inherit=True)


def _is_lambda_assignment(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name)
        and isinstance(statement.value, ast.Lambda)
    )


def _nested(statement: ast.stmt) -> list[list[ast.stmt]]:
    """The statement lists inside a compound statement whose definitions count as top level."""
    if not isinstance(statement, ast.If | ast.For | ast.While | ast.With | ast.Try):
        return []
    parts = [getattr(statement, part, []) for part in ("body", "orelse", "finalbody")]
    return parts + [handler.body for handler in getattr(statement, "handlers", [])]


def _hook_sites(statements: list[ast.stmt], sites: list[ast.stmt]) -> None:
    for statement in statements:
        if isinstance(statement, ast.FunctionDef | ast.ClassDef) or _is_lambda_assignment(
            statement
        ):
            sites.append(statement)
        for part in _nested(statement):
            _hook_sites(part, sites)


def _bound_name(statement: ast.stmt) -> str:
    if isinstance(statement, ast.FunctionDef | ast.ClassDef):
        return statement.name
    assert isinstance(statement, ast.Assign) and isinstance(statement.targets[0], ast.Name)
    return statement.targets[0].id


def _set_hook(statement: ast.stmt, index: int) -> None:
    def hook(where: ast.AST) -> ast.Call:
        call = ast.Call(ast.Name(DEFINE_HOOK, ast.Load()), [ast.Constant(index)], [])
        return ast.copy_location(call, where)

    if isinstance(statement, ast.FunctionDef | ast.ClassDef):
        anchor = statement.decorator_list[0] if statement.decorator_list else statement
        statement.decorator_list.insert(0, hook(anchor))
    elif isinstance(statement, ast.Assign):
        value = statement.value
        statement.value = ast.copy_location(ast.Call(hook(value), [value], []), value)


def _definitions(source: str, statements: list[ast.stmt], found: list[tuple[str, str]]) -> None:
    """Append ``(name, source)`` of each top-level definition, in the order of the hook sites."""
    for statement in statements:
        text: str | None = None
        if isinstance(statement, ast.FunctionDef | ast.ClassDef):
            first = min([d.lineno for d in statement.decorator_list] + [statement.lineno])
            span = SimpleNamespace(
                lineno=first,
                col_offset=statement.col_offset,
                end_lineno=statement.end_lineno,
                end_col_offset=statement.end_col_offset,
            )
            text = ast.get_source_segment(source, span, padded=True)  # type: ignore[arg-type]
            text = textwrap.dedent(text) if text is not None else None
        elif _is_lambda_assignment(statement):
            text = ast.get_source_segment(source, statement)
        name = _bound_name_or_none(statement)
        if name is not None:  # one entry per hook site, even without text (then never recorded)
            found.append((name, text or ""))
        for part in _nested(statement):
            _definitions(source, part, found)


def _bound_name_or_none(statement: ast.stmt) -> str | None:
    if isinstance(statement, ast.FunctionDef | ast.ClassDef) or _is_lambda_assignment(statement):
        return _bound_name(statement)
    return None


def _no_hook(index: int) -> Callable[[Any], Any]:
    """The definition hook where nothing records definitions (the runtime binds its own)."""
    return lambda value: value


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
            "__build_class__": guards.build_class,
            "__name__": g.SANDBOX_MODULE,
            # RestrictedPython gives every class statement ``metaclass=__metaclass__``.
            "__metaclass__": type,
            "__import__": importer,
            "_getattr_": guards.getattr,
            "_getitem_": g.guarded_getitem,
            "_write_": guards.write,
            AUGMENTED_ITEM: guards.augmented_item,
            AUGMENTED_ATTRIBUTE: guards.augmented_attribute,
            SLICE: slice,
            "_getiter_": g.guarded_iter,
            "_iter_unpack_sequence_": g.iter_unpack_sequence,
            "_unpack_sequence_": g.unpack_sequence,
            "_inplacevar_": guards.inplace,
            GENERATOR_END: guards.witness.flag,
            "_apply_": g.apply,
            "_print_": print_factory,
            DEFINE_HOOK: _no_hook,
            "getattr": guards.getattr,
            "hasattr": guards.hasattr,
            "dir": guards.dir,
        }
    )
    table.update(extras)
    return table
