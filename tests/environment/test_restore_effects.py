"""Restoring a definition runs its statement again: it must do nothing the first run did not.

A conversation reopened from the database (a new ``Environment`` on a fresh worker, as ``cove run
-c`` in a new process builds it) or a worker restarted mid-conversation gets its functions and
classes back by running their recorded ``def``/``class`` statement again. That statement's
decorators, default values, bases and class body run again too. So:

- no extension call runs during a restore (a file written again, a title set again): a definition
  whose statement called one is reported lost;
- a restored object is the one that ran or it is lost: when a name its statement read when it
  first ran (a decorator, a default value, a base class, a name its class body or a function it
  called read) holds something else now, the definition is reported lost, like any variable a
  restore cannot bring back, rather than coming back different.
"""

from __future__ import annotations

import pytest

from cove.environment.sandbox.host.client import SandboxClient
from tests.environment.conftest import Extensions, ok
from tests.environment.test_environment import FakeTurn, Harness, harness

__all__ = ["harness"]


async def reopened(h: Harness, *blocks: str, hooks: FakeTurn | None = None) -> list[str]:
    """Run ``blocks`` in one turn, close, reopen from the store: the names the reopen lost."""
    env = await h.open()
    ran = await h.turn(env, *blocks, hooks=hooks)
    assert all(outcome.result.ok for outcome, _ in ran), [o.result.error for o, _ in ran]
    await env.aclose()
    (h.workspace / "again.txt").unlink(missing_ok=True)  # what a block wrote, to see it rewritten
    env = await h.open()
    lost = list(env.restored.lost)
    await env.aclose()
    return lost


async def test_a_default_argument_does_not_write_its_file_again(harness: Harness) -> None:
    made = harness.workspace / "made.txt"
    env = await harness.open()
    await harness.turn(env, "def f(x=write_file('made.txt', 'data')):\n    return x", "n = 1")
    assert made.read_text() == "data"
    await env.aclose()
    made.unlink()

    env = await harness.open()
    assert not made.exists()
    assert env.restored.lost == ("f",) and env.restored.restored == ("n",)
    ran = await harness.turn(env, "n + 1")
    assert [(v.name, v.kind) for v in ran[0][1]] == [("f", "deleted")]
    assert ran[0][1][0].preview.startswith("lost: not restorable")
    assert not made.exists()
    await env.aclose()


async def test_a_class_body_does_not_set_the_title_again(harness: Harness) -> None:
    hooks = FakeTurn()
    env = await harness.open()
    await harness.turn(env, "class K:\n    t = set_title('from the class body')", hooks=hooks)
    assert hooks.titles == ["from the class body"]  # it ran once, live
    await env.aclose()
    await harness.store.set_title(harness.conversation_id, "the user's title")

    for _ in range(2):  # a second reopen sets nothing either
        env = await harness.open()
        record = await harness.store.get_conversation(harness.conversation_id)
        assert record.title == "the user's title"
        assert env.restored.lost == ("K",)
        await env.aclose()


async def test_a_rebound_decorator_makes_the_definition_lost(harness: Harness) -> None:
    env = await harness.open()
    ran = await harness.turn(
        env,
        "def deco(fn):\n    return fn",
        "@deco\ndef g():\n    return 'original'",
        "def deco(fn):\n    return lambda: 'different'",
        "g()",
    )
    assert ran[3][0].result.result_preview == "'original'"
    await env.aclose()

    env = await harness.open()
    assert env.restored.lost == ("g",)
    ran = await harness.turn(env, "deco(len)()", "g()")
    assert ran[0][0].result.result_preview == "'different'"  # the new deco came back
    assert [(v.name, v.kind) for v in ran[0][1]] == [("g", "deleted")]  # recorded as lost
    assert "NameError" in (ran[1][0].result.error or "")  # never a g that returns 'different'
    await env.aclose()


LOST = {
    "a default value that changed": (
        "f", ("limit = 10", "def f(x=limit):\n    return x", "limit = 20"),
    ),
    "a base class redefined": (
        "B", ("class A:\n    v = 1", "class B(A):\n    pass", "class A:\n    v = 2"),
    ),
    "a label that is also read": (
        "Line",
        (
            "class Point:\n    pass",
            "class Line:\n    a: Point = Point\n",
            "class Point:\n    x = 1",
        ),
    ),
    "a name the class body read": (
        "Price", ("rate = 3", "class Price:\n    double = rate * 2", "rate = 4"),
    ),
    "a decorator with a side effect": (
        "h",
        (
            "seen = []",
            "def register(fn):\n    seen.append(1)\n    return fn",
            "@register\ndef h():\n    return 1",
        ),
    ),
    "a decorator that calls the function": (
        "h",
        (
            "base = 1",
            "def once(fn):\n    value = fn()\n    return lambda: value",
            "@once\ndef h():\n    return base + 1",
            "base = 5",
        ),
    ),
    "a random default": ("f", ("import random", "def f(x=random.random()):\n    return x")),
    "the clock in a class body": (
        "Stamp", ("import datetime", "class Stamp:\n    at = datetime.datetime.now()"),
    ),
    "an extension call caught by the statement itself": (
        "f",
        (
            "def quiet(call):\n    try:\n        return call()\n    except ExtensionError:\n"
            "        return None",
            "def f(x=quiet(lambda: write_file('again.txt', 'x'))):\n    return x",
        ),
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(LOST))
async def test_a_definition_that_would_come_back_different_is_lost(
    case: str, harness: Harness
) -> None:
    name, blocks = LOST[case]
    assert await reopened(harness, *blocks) == [name]
    assert not (harness.workspace / "again.txt").exists()


KEPT = {
    "a plain function": ("def f(a, b=2):\n    return a + b", "f(1)", "3"),
    "a class": ("class P:\n    def __init__(self, x):\n        self.x = x", "P(4).x", "4"),
    "a decorator that did not change": (
        "def deco(fn):\n    return fn\n@deco\ndef g():\n    return 'g'",
        "g()",
        "'g'",
    ),
    "a wrapping decorator, its helper changed later": (
        "def helper(v):\n    return v\n"
        "def deco(fn):\n    def wrapper():\n        return helper(fn())\n    return wrapper\n"
        "@deco\ndef g():\n    return 1\n"
        "def helper(v):\n    return v * 10",
        "g()",
        "10",
    ),
    "a dataclass": (
        "import dataclasses\n@dataclasses.dataclass\nclass Point:\n    x: int = 0\n    y: int = 0",
        "Point(1, 2)",
        "Point(x=1, y=2)",
    ),
    "a subclass of an unchanged class": (
        "class A:\n    v = 1\nclass B(A):\n    w = A.v + 1",
        "(B.v, B.w)",
        "(1, 2)",
    ),
    "defaults from unchanged values and imports": (
        "import math\nlimit = 10\ndef f(x=limit, y=math.pi, z=len([1, 2])):\n    return x + z",
        "f()",
        "12",
    ),
    "a function using a global that changed later": (
        "total = 1\ndef f():\n    return total\ntotal = 2",
        "f()",
        "2",
    ),
    "classes labelled with a class redefined later": (
        "import dataclasses\nclass Point:\n    pass\n"
        "@dataclasses.dataclass\nclass Line:\n    a: Point = None\n"
        "    def longer(self, other: Point) -> Point:\n        return other\n"
        "def area(p: Point) -> float:\n    return 0.0\n"
        "class Point:\n    x = 1",
        "(Line().a, area(None))",
        "(None, 0.0)",
    ),
    "the date through datetime, not the clock": (
        "import datetime\nclass Day:\n    first = datetime.date(2024, 1, 1)",
        "Day.first.year",
        "2024",
    ),
}


@pytest.mark.parametrize("case", list(KEPT))
async def test_ordinary_definitions_still_come_back(case: str, harness: Harness) -> None:
    code, probe, expected = KEPT[case]
    assert await reopened(harness, code) == []
    for _ in range(2):  # a restored definition reads as it was recorded, and restores again
        env = await harness.open()
        assert env.restored.lost == ()
        ran = await harness.turn(env, probe)
        assert ran[0][0].result.result_preview == expected, ran[0][0].result.error
        assert ran[0][1] == ()  # nothing it reached encodes differently from its record
        await env.aclose()


async def test_a_restarted_worker_loses_what_would_differ(client: SandboxClient) -> None:
    await ok(
        client,
        "def deco(fn):\n    return fn\ndef same(fn):\n    return fn\n"
        "@deco\ndef g():\n    return 'original'\n@same\ndef kept():\n    return 'kept'",
    )
    await ok(client, "def deco(fn):\n    return lambda: 'different'\nfrom_g = g()")
    await client.kill()
    outcome = await ok(client, "[kept(), from_g]")
    assert outcome.result.result_preview == "['kept', 'original']"
    assert "g" not in client.snapshots() and "kept" in client.snapshots()


async def test_no_extension_call_is_served_while_restoring(
    client: SandboxClient, extensions: Extensions
) -> None:
    await ok(client, "def f(x=echo('at definition')):\n    return x")
    calls = len(extensions.calls)
    report = await client.restore(list(client.snapshots().values()))
    assert report.lost == ("f",)
    assert len(extensions.calls) == calls


async def test_restore_var_refuses_a_definition_that_would_differ(harness: Harness) -> None:
    env = await harness.open()
    await harness.turn(
        env,
        "def deco(fn):\n    return fn",
        "@deco\ndef g():\n    return 'original'",
        "def g():\n    return 'second'",
    )
    ran = await harness.turn(env, "old = restore_var('g', 1)\nold()")
    assert ran[0][0].result.result_preview == "'original'", ran[0][0].result.error
    ran = await harness.turn(
        env, "def deco(fn):\n    return lambda: 'different'", "old = restore_var('g', 1)"
    )
    error = ran[1][0].result.error or ""
    assert "g cannot be rebuilt as it ran: 'deco' holds another value" in error
    await env.aclose()
