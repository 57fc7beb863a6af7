"""Escape attempts, each run in a real worker: every one must fail inside the sandbox (or come
back empty-handed), and the host — and the worker itself — must be fine afterwards.

The families follow the published RestrictedPython advisories and the classic Python sandbox
escapes: class hierarchy walks, function globals, frames reached through generators, coroutines
and tracebacks, attribute access smuggled through format strings, ``try/except*`` and ``match``
type confusion, unicode look-alike identifiers, and chains through allowed modules.
"""

from __future__ import annotations

import os

import pytest

from cove.environment.sandbox.host.client import SandboxClient
from tests.environment.conftest import library_fixtures, ok, read_proc, run

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]


pool, client = library_fixtures()


ESCAPES = {
    # class hierarchy walks
    "subclasses": "().__class__.__bases__[0].__subclasses__()",
    "subclasses via getattr": "getattr(getattr((), '__class__'), '__base__')",
    "mro": "int.mro()",
    "mro via getattr": "getattr(int, 'mro')()",
    "dict of a type": "str.__dict__",
    "type builtin": "type(1)",
    "object subclasses": "object.__subclasses__()",
    # function internals
    "function globals": "def f():\n    pass\nf.__globals__",
    "function globals via getattr": "def f():\n    pass\ngetattr(f, '__globals__')",
    "func_globals": "def f():\n    pass\ngetattr(f, 'func_globals')",
    "builtin self": "getattr(len, '__self__')",
    "method of a module member": "import json\ngetattr(json.dumps, '__globals__')",
    # frames via generators, coroutines and tracebacks
    "generator frame": "g = (i for i in [1])\ng.gi_frame.f_back.f_globals",
    "generator frame via getattr": "g = (i for i in [1])\ngetattr(g, 'gi_frame')",
    "generator code": "def gen():\n    yield 1\ngetattr(gen(), 'gi_code')",
    "generator yieldfrom": "def gen():\n    yield 1\ngetattr(gen(), 'gi_yieldfrom')",
    "coroutine": "async def c():\n    pass",
    "await": "def f():\n    await g()",
    "traceback attribute": "try:\n    1/0\nexcept Exception as e:\n    t = e.__traceback__",
    "traceback via getattr": (
        "try:\n    1/0\nexcept Exception as e:\n    getattr(e, '__traceback__')"
    ),
    "traceback frame": "try:\n    1/0\nexcept Exception as e:\n    e.with_traceback(None).tb_frame",
    "frame back": "def f():\n    pass\ngetattr(f, 'f_back')",
    "exception context": "try:\n    1/0\nexcept Exception as e:\n    e.__context__",
    "attribute error obj": "try:\n    len.nothing\nexcept AttributeError as e:\n    e.obj",
    # format strings
    "format attribute": "'{0.__class__}'.format(1)",
    "format nested attribute": "def f():\n    pass\n'{0.__globals__}'.format(f)",
    "format index": "'{0[0]}'.format([1])",
    "format_map attribute": "def f():\n    pass\n'{x.__init__.__globals__}'.format_map({'x': f})",
    "unbound str.format": "str.format('{0.__class__}', 1)",
    "format through map": "list(map(str.format, ['{0.__class__}'], [1]))",
    "format subclass": "class S(str):\n    pass\nS('{0.__class__}').format(1)",
    "f-string attribute": "f'{(1).__class__}'",
    "string formatter": "import string\nstring.Formatter().format('{0.__class__}', 1)",
    "string template": "import string\nstring.Template",
    # getattr and friends
    "operator attrgetter": "import operator\noperator.attrgetter('__class__')(1)",
    "functools": "import functools",
    "getattr dunder string": "getattr(1, '__class__')",
    "hasattr does not leak": "hasattr(1, '__class__') or 1/0",
    "dir hides internals": "[n for n in dir(1) if n.startswith('_')] or 1/0",
    "vars": "vars()",
    "globals": "globals()",
    "locals": "locals()",
    "setattr": "setattr(1, 'x', 1)",
    # unicode look-alikes (NFKC normalised by the parser)
    "fullwidth eval": "ｅval('1')",
    "fullwidth exec": "ｅｘｅｃ('1')",
    "fullwidth dunder": "(1).＿＿class＿＿",
    "fullwidth dunder in getattr": "getattr(1, '＿＿class＿＿')",
    "mathematical letters": "𝐞𝐯𝐚𝐥('1')",
    # decorators and class bodies
    "decorator reaching globals": "@lambda f: f.__globals__\ndef g():\n    pass",
    "decorator getattr": "@lambda f: getattr(f, '__globals__')\ndef g():\n    pass",
    "class body dunder": "class A:\n    __slots__ = ()",
    "class metaclass": "class A(metaclass=type):\n    pass",
    "class dunder method": "class A:\n    def __getattribute__(self, n):\n        return 1",
    "class reaching init globals": (
        "class A:\n    def __init__(self):\n        self.g = self.__init__.__globals__\nA()"
    ),
    "super internals": "class A:\n    def m(self):\n        return super().__thisclass__\nA().m()",
    "writing a builtin": "len.x = 1",
    "writing a module": "import math\nmath.sqrt = None",
    # try/except* and match
    "except star": "try:\n    1/0\nexcept* ZeroDivisionError as g:\n    g.exceptions",
    "match class pattern": "match 1:\n    case int(__class__=c):\n        pass",
    "match mapping": "match {}:\n    case {'a': x}:\n        pass",
    # the outside world
    "os environ": "import os\nos.environ",
    "open passwd": "open('/etc/passwd').read()",
    "dunder import": "__import__('os')",
    "builtins import": "import builtins",
    "sys modules": "import sys\nsys.modules",
    "socket": "import socket",
    "subprocess": "import subprocess",
    "gc": "import gc\ngc.get_objects()",
    "ctypes": "import ctypes",
    "importlib": "import importlib",
    "inspect": "import inspect",
    "pickle": "import pickle",
    "io": "import io",
    "relative import": "from . import x",
    "dotted import": "import os.path",
    "star import": "from math import *",
    "exec": "exec('1')",
    "eval": "eval('1')",
    "compile": "compile('1', 'x', 'eval')",
    "breakpoint": "breakpoint()",
    "input": "input()",
    "help": "help()",
    "memoryview": "memoryview(b'x')",
    "bytearray": "bytearray(1)",
    # chains through allowed modules
    "re enum": "import re\nre.enum.sys",
    "json codecs": "import json\njson.codecs.open",
    "datetime sys": "import datetime\ndatetime.sys",
    "uuid os": "import uuid\nuuid.os",
    "collections abc": "from collections import abc",
    "random os": "import random\nrandom._os",
    "random os via getattr": "import random\ngetattr(random, '_os')",
    "typing sys": "import typing\ntyping.sys",
    "typing get_type_hints": "import typing\ntyping.get_type_hints",
    "dataclasses sys": "import dataclasses\ndataclasses.sys",
    "dataclasses make_dataclass": "import dataclasses\ndataclasses.make_dataclass",
    "enum sys": "import enum\nenum.sys",
    "decimal sys": "import decimal\ndecimal.sys",
    "statistics math module": "import statistics\nstatistics.math",
    "csv re": "import csv\ncsv.re",
    "string formatter class": "import string\nstring.Formatter",
    "random SystemRandom": "import random\nrandom.SystemRandom",
    "uuid getnode": "import uuid\nuuid.getnode()",
    "time module": "import time\ntime.monotonic()",
    "module members have no module": "import json\njson.dumps.__module__",
}


@pytest.mark.parametrize("name", list(ESCAPES))
async def test_escape_attempt_fails_and_the_host_is_fine(name: str, client: SandboxClient) -> None:
    await ok(client, "canary = [1, 2, 3]")
    pid = client.pid
    outcome = await run(client, ESCAPES[name])
    assert not outcome.result.ok, (
        f"{name}: the block succeeded with {outcome.result.result_preview!r}"
    )
    assert outcome.result.error is not None
    # The worker survived (no restart was needed), its state is intact, and the host is alive.
    assert outcome.restart is None and client.pid == pid
    assert (await ok(client, "sum(canary)")).result.result_preview == "6"
    assert os.getpid() > 0


async def test_module_namespaces_hide_their_origin(client: SandboxClient) -> None:
    outcome = await ok(client, "import re, json\n(repr(re), sorted(dir(json)))")
    assert (
        outcome.result.result_preview
        == "(\"<module 're'>\", ['JSONDecodeError', 'dumps', 'loads'])"
    )


async def test_safe_formatting_still_works(client: SandboxClient) -> None:
    code = "x = 3\n('{} + {n} = {:>3}'.format(1, 4, n=x), f'{x!r:>4}', '%s-%d' % ('a', 2))"
    outcome = await ok(client, code)
    assert outcome.result.result_preview == "('1 + 3 =   4', '   3', 'a-2')"


async def test_the_worker_cannot_read_the_host_environment(client: SandboxClient) -> None:
    # Even with a way out of RestrictedPython, the worker process holds no secret: its
    # environment is empty and the host's /proc entries are closed to it (non-dumpable host).
    host_environ = f"/proc/{os.getpid()}/environ"
    assert client.pid is not None
    worker_environ = read_proc(client.pid, "environ")
    assert b"OPENAI" not in worker_environ and b"PATH=" not in worker_environ
    assert os.stat(host_environ).st_uid == 0  # owned by root once the host is non-dumpable
