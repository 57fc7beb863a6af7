"""The policy in process: compiler rules, guards, builtins, and what curated modules can reach."""

from __future__ import annotations

import builtins
import types
from datetime import date, datetime
from typing import Any

import pytest
from RestrictedPython.Guards import safe_builtins

from cove.environment.sandbox.worker.guards import (
    BlockClock,
    Guards,
    check_attribute,
    guarded_write,
)
from cove.environment.sandbox.worker.modules import ALLOWED_MODULES, BlockRandom, ModuleTable
from cove.environment.sandbox.worker.output import BlockOutput
from cove.environment.sandbox.worker.policy import (
    SAFE_BUILTINS,
    BlockSyntaxError,
    compile_block,
    defined_name,
    make_builtins,
)

FORBIDDEN_OBJECTS = {
    id(obj)
    for obj in (
        builtins.open, builtins.exec, builtins.eval, builtins.compile, builtins.__import__,
        builtins.getattr, builtins.setattr, builtins.delattr, builtins.globals, builtins.locals,
        builtins.vars, builtins.type, builtins.memoryview, builtins.bytearray,
        builtins.breakpoint, builtins.input, builtins.help, builtins.dir, builtins.id,
    )
}  # fmt: skip
FORBIDDEN_ORIGINS = {
    "os", "posix", "sys", "subprocess", "socket", "_socket", "io", "_io", "gc", "ctypes",
    "_ctypes", "importlib", "inspect", "pickle", "_pickle", "shutil", "pathlib", "signal",
    "threading", "_thread", "marshal", "operator", "_operator", "functools", "builtins.open",
}  # fmt: skip
SEALED = (types.ModuleType, types.FrameType, types.CodeType, types.TracebackType)


def sandbox_parts() -> tuple[Guards, ModuleTable, dict[str, Any]]:
    clock = BlockClock()
    modules = ModuleTable(BlockRandom(), clock)
    guards = Guards(clock)
    table = make_builtins(
        guards, print_factory=lambda *_: None, importer=modules.importer(), extras={}
    )
    return guards, modules, table


def reachable(guards: Guards, roots: dict[str, Any], depth: int) -> dict[str, Any]:
    """Every object reachable from ``roots`` through attributes the guard lets through."""
    found: dict[int, tuple[str, Any]] = {}
    frontier = list(roots.items())
    for _ in range(depth):
        following: list[tuple[str, Any]] = []
        for path, obj in frontier:
            if id(obj) in found:
                continue
            found[id(obj)] = (path, obj)
            try:
                names = guards.dir(obj)
            except Exception:
                continue
            for name in names:
                try:
                    following.append((f"{path}.{name}", guards.getattr(obj, name)))
                except Exception:
                    continue
        frontier = following
    for path, obj in frontier:
        found.setdefault(id(obj), (path, obj))
    return {path: obj for path, obj in found.values()}


@pytest.mark.parametrize("module", ALLOWED_MODULES)
def test_curated_modules_reach_no_module_frame_or_dangerous_function(module: str) -> None:
    guards, modules, _ = sandbox_parts()
    for path, obj in reachable(guards, {module: modules.get(module)}, depth=4).items():
        assert not isinstance(obj, SEALED), path
        assert id(obj) not in FORBIDDEN_OBJECTS, path
        origin = getattr(obj, "__module__", None)
        assert not (isinstance(origin, str) and origin.split(".")[0] in FORBIDDEN_ORIGINS), path


def test_builtins_reach_nothing_dangerous() -> None:
    guards, _, table = sandbox_parts()
    roots = {name: value for name, value in table.items() if not name.startswith("_")}
    for path, obj in reachable(guards, roots, depth=3).items():
        assert not isinstance(obj, SEALED), path
        assert id(obj) not in FORBIDDEN_OBJECTS, path


def test_builtins_are_fresh_for_each_worker_and_leave_out_the_dangerous_ones() -> None:
    first, second = sandbox_parts()[2], sandbox_parts()[2]
    assert first is not second and first is not safe_builtins
    for name in ("open", "exec", "eval", "compile", "globals", "locals", "vars", "type",
                 "memoryview", "bytearray", "breakpoint", "input", "help", "setattr", "id",
                 "SystemExit", "KeyboardInterrupt"):  # fmt: skip
        assert name not in first
    assert first["getattr"] is not builtins.getattr
    assert first["__import__"] is not builtins.__import__
    assert set(SAFE_BUILTINS) <= set(first)


def test_imports_yield_curated_namespaces_only() -> None:
    table = sandbox_parts()[2]
    importer = table["__import__"]
    math = importer("math")
    assert not isinstance(math, types.ModuleType)
    assert math.sqrt(4) == 2.0
    for name in ("os", "sys", "operator", "functools", "io", "gc", "importlib", "os.path"):
        with pytest.raises(ImportError):
            importer(name)
    with pytest.raises(ImportError):
        importer("math", level=1)
    with pytest.raises(AttributeError):
        math.pi = 3
    with pytest.raises(TypeError):
        guarded_write(math)


@pytest.mark.parametrize(
    ("obj", "name"),
    [
        (1, "__class__"),
        (1, "＿＿class＿＿"),
        ((i for i in ()), "gi_frame"),
        ((i for i in ()), "gi_code"),
        (len, "mro"),
        (int, "mro"),
        (types.SimpleNamespace(co_code=1), "co_code"),
        (ValueError("x"), "obj"),
    ],
)
def test_check_attribute_refuses(obj: object, name: str) -> None:
    with pytest.raises(AttributeError):
        check_attribute(obj, name)


def test_str_format_refuses_attribute_and_index_fields() -> None:
    guards = Guards(BlockClock())
    fmt = guards.getattr("{} and {name!r:>6}", "format")
    assert fmt(1, name="x") == "1 and    'x'"
    for template in ("{0.__class__}", "{0[0]}", "{x.real}"):
        with pytest.raises(ValueError):
            guards.getattr(template, "format")(1, x=1)
        with pytest.raises(ValueError):
            guards.getattr(str, "format")(template, 1, x=1)
        with pytest.raises(ValueError):
            guards.getattr(template, "format_map")({"x": 1})


def test_clock_methods_return_the_block_clock() -> None:
    clock = BlockClock()
    clock.now = 86_400.0
    guards = Guards(clock)
    assert guards.getattr(date, "today")() == date(1970, 1, 2)
    assert guards.getattr(datetime(2020, 1, 1), "now")() == datetime(1970, 1, 2)
    assert guards.getattr(datetime, "utcnow")() == datetime(1970, 1, 2)


def test_compile_block_splits_the_trailing_expression() -> None:
    block = compile_block("x = 1\nx + 1")
    assert block.body is not None and block.tail is not None
    assert compile_block("x = 1").tail is None
    assert compile_block("1").body is None


def test_compile_block_records_top_level_definitions_with_decorators() -> None:
    source = "@deco\ndef f(a):\n    return a\nif True:\n    class C:\n        pass\ng = lambda: 1"
    block = compile_block(source)
    assert block.definitions == [
        ("f", "@deco\ndef f(a):\n    return a"),
        ("C", "class C:\n    pass"),
        ("g", "g = lambda: 1"),
    ]
    assert defined_name("@deco\ndef f(a):\n    return a") == "f"


@pytest.mark.parametrize(
    ("code", "line"),
    [
        ("x = 1\ny = (", 2),
        ("a = 1\nb = a.__dict__", 2),
        ("match 1:\n    case int(real=r):\n        pass", 1),
        ("try:\n    pass\nexcept* ValueError:\n    pass", 1),
        ("async def f():\n    pass", 1),
        ("x.y: int = 1", 1),
        ("class A(metaclass=M):\n    pass", 1),
        ("_secret = 1", 1),
    ],
)
def test_refused_code_reports_its_line(code: str, line: int) -> None:
    with pytest.raises(BlockSyntaxError) as caught:
        compile_block(code)
    assert caught.value.line == line


def test_annotations_are_real_objects_not_strings() -> None:
    block = compile_block("class P:\n    x: int = 1")
    namespace: dict[str, Any] = {"__builtins__": sandbox_parts()[2]}
    assert block.body is not None
    exec(block.body, namespace)
    assert namespace["P"].__annotations__ == {"x": int}


def test_output_is_cut_while_it_is_produced() -> None:
    output = BlockOutput(10)
    output.write("12345")
    output.write("67890abc")
    output.write("more")
    assert output.text() == "1234567890\n[… output cut at 10 chars]\n"


def test_the_reachability_walk_would_find_a_planted_module() -> None:
    import os

    planted = types.SimpleNamespace(inner=types.SimpleNamespace(door=os))
    found = reachable(Guards(BlockClock()), {"planted": planted}, depth=4)
    assert any(isinstance(obj, types.ModuleType) for obj in found.values())
