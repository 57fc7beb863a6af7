"""Escapes through allowed stdlib callables that generate code or use names taken from data.

Each payload combines allowed functions with attacker-chosen strings: field names that end up in
code ``dataclasses`` or ``namedtuple`` generate, dunder names smuggled in through enum's
functional API, writable attributes of stdlib objects (``Field.name``), subclasses that make
``dataclasses`` generate code again, and every path to the real ``str.format``. Every payload
runs in the worker's own ``Runtime`` (the code a worker runs), after which everything the
sandbox namespace can reach is walked on the host side: no real module, frame, traceback, code
object, builtins dict or module globals may be among it, and no text of one. The payloads then
run again in a real worker, which must survive with its state intact.
"""

from __future__ import annotations

import builtins
import sys
import types
from typing import Any

import pytest

from cove.environment.sandbox.host.client import SandboxClient
from cove.environment.sandbox.worker.runtime import Runtime
from tests.environment.conftest import library_fixtures, ok, run

pool, client = library_fixtures()


EVIL = r"""'q"+str(self.box.append(__import__("builtins").__dict__))\n  #'"""
"""A field name that, pasted into the ``__repr__`` dataclasses generates, appends the real
builtins dict to ``self.box`` (the classes below hold the namespace's ``box`` as ``box``)."""
EVIL_VALUE = EVIL.replace("self.box", "self.value")
"""The same for enum members whose value is ``box``."""

SETUP = "box = []\n"

DATACLASS = "import dataclasses\n@dataclasses.dataclass\nclass D:\n    x: int = 0\n    box = box\n"

# name -> (code, must the block fail?)
PAYLOADS: dict[str, tuple[str, bool]] = {
    # -- the three escapes of the report ----------------------------------------------------
    "enum annotations into dataclass": (
        "import enum, dataclasses\n"
        f"E = enum.Enum('E', [('A', box), ('__annotations__', {{{EVIL_VALUE}: int}})])\n"
        "dataclasses.dataclass(init=False, eq=False)(E)\nrepr(E.A)",
        True,
    ),
    "Field.name rewritten, subclass regenerates": (
        DATACLASS + f"dataclasses.fields(D)[0].name = {EVIL}\n"
        "@dataclasses.dataclass(init=False, eq=False)\nclass S(D):\n    pass\nrepr(S())",
        True,
    ),
    "super() reaches str.format": (
        "class S(str):\n    pass\ndef f():\n    pass\n"
        "leak = super(S, S('{0.__globals__}')).format(f)",
        True,
    ),
    # -- generated code: dataclasses --------------------------------------------------------
    "field object renamed after decoration": (
        "import dataclasses\nfd = dataclasses.field(default=0)\n"
        "@dataclasses.dataclass\nclass D:\n    x: int = fd\n    box = box\n"
        f"fd.name = {EVIL}\n@dataclasses.dataclass\nclass S(D):\n    pass\nrepr(S())",
        True,
    ),
    "field object renamed before decoration": (
        f"import dataclasses\nfd = dataclasses.field(default=0)\nfd.name = {EVIL}",
        True,
    ),
    "field type rewritten": (
        DATACLASS + "dataclasses.fields(D)[0].type = 'x'",
        True,
    ),
    "field default factory rewritten": (
        DATACLASS + "dataclasses.fields(D)[0].default_factory = list",
        True,
    ),
    "field name deleted": (DATACLASS + "del dataclasses.fields(D)[0].name", True),
    "enum mapping annotations into dataclass": (
        "import enum, dataclasses\n"
        f"E = enum.Enum('E', {{'A': box, '__annotations__': {{{EVIL_VALUE}: int}}}})\n"
        "dataclasses.dataclass(init=False, eq=False)(E)\nrepr(E.A)",
        True,
    ),
    "dataclass fields smuggled through enum": (
        "import enum, dataclasses\nfd = dataclasses.field()\n"
        "E = enum.Enum('E', [('A', 1), ('__dataclass_fields__', {'x': fd})])",
        True,
    ),
    "dataclass of an enum with a post init hook": (
        "import enum, dataclasses\ndef hook(self):\n    box.append(1)\n"
        "E = enum.Enum('E', [('A', 1), ('__post_init__', hook)])",
        True,
    ),
    "make_dataclass namespace": (
        "import dataclasses\ndataclasses.make_dataclass('D', [('x', int)], "
        "namespace={'__repr__': lambda self: 1})",
        True,
    ),
    "replace with a dunder keyword": (
        DATACLASS + "dataclasses.replace(D(), **{'__class__': int})",
        True,
    ),
    "asdict with a hostile factory": (
        DATACLASS + "leak = dataclasses.asdict(D(), dict_factory=lambda items: items)",
        False,
    ),
    "dataclass applied twice to a subclass chain": (
        DATACLASS + "@dataclasses.dataclass\nclass S(D):\n    y: int = 1\n"
        "S2 = dataclasses.dataclass(S)\nleak = repr(S2(1, 2))",
        False,
    ),
    "dataclass on a non-class": ("import dataclasses\ndataclasses.dataclass(len)", True),
    # -- generated code: namedtuple, NamedTuple ---------------------------------------------
    "namedtuple injected field": (
        f"import collections\ncollections.namedtuple('N', ['a', {EVIL}])",
        True,
    ),
    "namedtuple dunder field": (
        "import collections\ncollections.namedtuple('N', '__class__')",
        True,
    ),
    "namedtuple injected type name": (
        "import collections\ncollections.namedtuple('N(): pass\\nimport os\\n#', 'a')",
        True,
    ),
    "namedtuple module keyword": (
        "import collections\ncollections.namedtuple('N', 'a', module='builtins')",
        True,
    ),
    "namedtuple renamed fields": (
        f"import collections\nN = collections.namedtuple('N', ['a', {EVIL}], rename=True)\n"
        "leak = repr(N(1, 2))",
        False,
    ),
    "typing NamedTuple injected field": (
        f"import typing\ntyping.NamedTuple('N', [({EVIL}, int)])",
        True,
    ),
    "typing NamedTuple dunder field": (
        "import typing\ntyping.NamedTuple('N', [('__globals__', int)])",
        True,
    ),
    # -- dunder names through data: enum's functional API -----------------------------------
    "enum dunder in a name string": ("import enum\nenum.Enum('E', 'A __getattr__')", True),
    "enum dunder pair": ("import enum\nenum.Enum('E', [('__init_subclass__', len)])", True),
    "enum sunder pair": ("import enum\nenum.Enum('E', [('_missing_', len)])", True),
    "IntEnum dunder": ("import enum\nenum.IntEnum('E', [('__index__', len)])", True),
    "StrEnum dunder": ("import enum\nenum.StrEnum('E', [('__format__', len)])", True),
    "Flag dunder": ("import enum\nenum.Flag('E', [('__set_name__', len)])", True),
    "IntFlag dunder": ("import enum\nenum.IntFlag('E', {'__get__': len})", True),
    "enum module keyword": ("import enum\nenum.Enum('E', 'A', module='os')", True),
    "enum qualname keyword": ("import enum\nenum.Enum('E', 'A', qualname='os.E')", True),
    "enum str subclass name": (
        "import enum\nclass S(str):\n    pass\nenum.Enum('E', [(S('__class__'), 1)])",
        True,
    ),
    "enum non-identifier name": (f"import enum\nenum.Enum('E', [({EVIL}, 1)])", True),
    # -- writable attributes of stdlib objects ----------------------------------------------
    "stdlib class method replaced": (
        "import collections\ncollections.Counter.update = lambda *a: None",
        True,
    ),
    "csv dialect class rewritten": ("import csv\ncsv.excel.delimiter = ';'", True),
    "enum base property replaced": ("import enum\nenum.Enum.name = 1", True),
    "exception class rewritten": ("import json\njson.JSONDecodeError.msg = 1", True),
    "bound random method written": ("import random\nrandom.choice.x = 1", True),
    "super object written": (
        "class A:\n    def m(self):\n        super().x = 1\nA().m()",
        True,
    ),
    "extension function written": ("echo.x = 1", True),
    # -- every path to str.format -----------------------------------------------------------
    "super format_map": (
        "class S(str):\n    pass\ndef f():\n    pass\n"
        "leak = super(S, S('{x.__globals__}')).format_map({'x': f})",
        True,
    ),
    "zero-argument super in a str subclass": (
        "class S(str):\n    def leak(self, v):\n        return super().format(v)\n"
        "def f():\n    pass\nleak = S('{0.__globals__}').leak(f)",
        True,
    ),
    "getattr on a super object": (
        "class S(str):\n    pass\ndef f():\n    pass\n"
        "leak = getattr(super(S, S('{0.__globals__}')), 'format')(f)",
        True,
    ),
    "super format through map": (
        "class S(str):\n    pass\ndef f():\n    pass\n"
        "leak = list(map(super(S, S('{0.__globals__}')).format, [f]))",
        True,
    ),
    "StrEnum member format": (
        "import enum\nclass E(enum.StrEnum):\n    A = '{0.__globals__}'\n"
        "def f():\n    pass\nleak = E.A.format(f)",
        True,
    ),
    "str.format aliased on a class": (
        "class S(str):\n    fmt = str.format\ndef f():\n    pass\n"
        "leak = S('{0.__globals__}').fmt(f)",
        True,
    ),
    "nested format spec field": (
        "def f():\n    pass\nleak = '{0:{1.__globals__}}'.format(1, f)",
        True,
    ),
    "unbound format_map": (
        "def f():\n    pass\nleak = str.format_map('{x.__globals__}', {'x': f})",
        True,
    ),
    "format index through super": (
        "class S(str):\n    pass\nleak = super(S, S('{0[0]}')).format([1])",
        True,
    ),
    "string Formatter subclass": (
        "import string\nclass F(string.Formatter):\n    pass\nF().format('{0.__class__}', 1)",
        True,
    ),
    "format builtin with a field spec": (
        "def f():\n    pass\nleak = format(f, '{0.__globals__}')",
        True,
    ),
}


def _leaks(text: str) -> bool:
    markers = ("'__builtins__':", "'__loader__':", "<module 'builtins'", "<module 'os'", "environ(")
    return any(marker in text for marker in markers)


def _forbidden() -> dict[int, object]:
    """The real builtins and every module and its globals, by id (held, so that no id is taken
    by another object while the walk runs: a ``__dict__`` read may make a new object)."""
    held: dict[int, object] = {id(builtins.__dict__): builtins.__dict__, id(builtins): builtins}
    for name, module in list(sys.modules.items()):
        # "sandbox" is where sandbox classes live; its globals hold only the sandbox's builtins.
        if module is not None and name != "sandbox":
            namespace = getattr(module, "__dict__", None)
            held[id(module)] = module
            if namespace is not None:
                held[id(namespace)] = namespace
    return held


def escaped(roots: list[Any]) -> list[str]:
    """What, among everything reachable from ``roots``, is a way out (empty when nothing is)."""
    forbidden = _forbidden()
    found: list[str] = []
    seen: set[int] = set()
    frontier = list(roots)
    while frontier and len(seen) < 50_000:
        obj = frontier.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, types.ModuleType | types.FrameType | types.TracebackType):
            found.append(f"{type(obj).__name__} {obj!r:.80}")
        elif isinstance(obj, types.CodeType) and obj.co_filename != "<block>":
            found.append(f"code object of {obj.co_filename}")
        elif id(obj) in forbidden:
            found.append(f"real module globals or builtins ({type(obj).__name__})")
        elif isinstance(obj, str):
            if _leaks(obj):
                found.append(f"leaked text {obj[:80]!r}")
            continue
        if isinstance(obj, dict):
            frontier.extend(obj.keys())
            frontier.extend(obj.values())
        elif isinstance(obj, list | tuple | set | frozenset):
            frontier.extend(obj)
        instance_dict = getattr(obj, "__dict__", None) if not isinstance(obj, type) else None
        if isinstance(obj, type) and obj.__module__ == "sandbox":
            instance_dict = dict(obj.__dict__)
        if isinstance(instance_dict, dict):
            frontier.append(instance_dict)
    return found


def _no_host(frame: dict[str, Any]) -> dict[str, Any]:
    return {"op": "reply", "ok": True, "value": "null"}


@pytest.mark.parametrize("name", list(PAYLOADS))
def test_payload_reaches_nothing_real(name: str) -> None:
    code, must_fail = PAYLOADS[name]
    runtime = Runtime(request=_no_host, output_limit=10_000, value_limit=1_000_000)
    runtime.configure(["echo"], {})
    reply = runtime.execute(SETUP + code, 1, 0.0)
    if must_fail:
        assert not reply["ok"], f"{name}: the block succeeded ({reply['value_preview']!r})"
    namespace = {k: v for k, v in runtime.namespace.items() if k != "__builtins__"}
    assert escaped([namespace]) == [], name
    assert not _leaks(reply["stdout"] or "") and not _leaks(reply["error"] or "")
    # The block's own scratch list stayed empty: no generated code ever ran the payload.
    assert runtime.namespace["box"] == []
    # Code dataclasses generates runs with the globals of module "sandbox": sandbox builtins.
    assert vars(sys.modules["sandbox"])["__builtins__"] is runtime.builtins


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("name", list(PAYLOADS))
async def test_payload_in_a_worker_leaves_it_intact(name: str, client: SandboxClient) -> None:
    code, must_fail = PAYLOADS[name]
    await ok(client, "canary = [1, 2, 3]")
    pid = client.pid
    outcome = await run(client, SETUP + code)
    assert outcome.result.ok is not must_fail, outcome.result.error
    assert outcome.restart is None and client.pid == pid
    for snapshot in outcome.changes:
        assert not _leaks(snapshot.preview) and not _leaks(snapshot.encoded or "")
    assert (await ok(client, "(sum(canary), box)")).result.result_preview == "(6, [])"


def test_there_are_enough_payloads() -> None:
    assert len(PAYLOADS) >= 43


def test_checked_stand_ins_still_do_their_job() -> None:
    runtime = Runtime(request=_no_host, output_limit=10_000, value_limit=1_000_000)
    code = (
        "import dataclasses, enum, collections, typing\n"
        "@dataclasses.dataclass(order=True)\nclass P:\n    x: int\n    y: int = 0\n"
        "@dataclasses.dataclass\nclass Q(P):\n"
        "    z: list = dataclasses.field(default_factory=list)\n"
        "class Color(enum.Enum):\n    RED = 1\n    GREEN = 2\n"
        "N = collections.namedtuple('N', 'a b', defaults=[0])\n"
        "T = typing.NamedTuple('T', [('a', int)])\n"
        "E = enum.Enum('E', 'A B')\nF = enum.IntFlag('F', {'R': 4, 'W': 2})\n"
        "q = Q(1, 2)\nq.z.append(3)\nq.x = 5\n"
        "(repr(q), P(1) < P(2), Color(2).name, N(1), T(2), E.B.value, int(F.R | F.W), "
        "dataclasses.asdict(q), '{} {x}'.format(1, x=2))"
    )
    reply = runtime.execute(code, 1, 0.0)
    assert reply["ok"], reply["error"]
    assert reply["value_preview"] is not None
    assert "Q(x=5, y=2, z=[3])" in reply["value_preview"]
