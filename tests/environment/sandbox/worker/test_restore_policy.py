"""Restore runs stored definitions again — under exactly the policy of live code, and nothing else.

A definition's source comes back from the database (which may have been edited) on every
restart, reopen, fork and replay. What runs is one ``def``/``class``/lambda statement (its
decorators, default values, annotations and class body included), compiled by the same
restricted compiler with the same builtins and guards as a live block; anything else is lost.
"""

from __future__ import annotations

import pytest

from cove import codec
from cove.codec.shapes import Definition
from cove.environment.sandbox.host.client import SandboxClient
from cove.environment.sandbox.outcome import VarSnapshot
from tests.environment.conftest import ok

EVIL = r"""'q"+str(self.value.append(__import__("builtins").__dict__))\n  #'"""
ESCAPE = (
    "enum.Enum('E', [('A', box), ('__annotations__', {" + EVIL + ": int})])"
)  # the first escape of the report, as an expression: appends the builtins dict to box

FORGED = {
    "extra statements after the def": (
        "def f():\n    return 1\n"
        f"E = {ESCAPE}\ndataclasses.dataclass(init=False, eq=False)(E)\nrepr(E.A)\n"
        "box.append(E.A.value[0])"
    ),
    "escape in a decorator": (
        f"@(lambda fn: [repr(dataclasses.dataclass(init=False, eq=False)({ESCAPE}).A), fn][1])\n"
        "def f():\n    return 1"
    ),
    "escape in a default value": (f"def f(e={ESCAPE}):\n    return 1"),
    "escape in a class body": (f"class f:\n    e = {ESCAPE}"),
    "a refused name": "def f(x=().__class__):\n    return 1",
    "a real import": "def f(os=__import__('os')):\n    return 1",
}


def forged_snapshots(source: str) -> list[VarSnapshot]:
    box = VarSnapshot("box", "value", codec.encode([]), "list", "[]")
    definition = codec.encode(Definition("function", "f", source))
    return [box, VarSnapshot("f", "function", definition, "function", "f()")]


@pytest.mark.parametrize("name", list(FORGED))
async def test_a_forged_definition_is_lost_and_escapes_nothing(
    name: str, client: SandboxClient
) -> None:
    imports = {"enum": ("enum", None), "dataclasses": ("dataclasses", None)}
    report = await client.restore(forged_snapshots(FORGED[name]), imports=imports)
    assert "f" in report.lost and "box" in report.restored
    assert (await ok(client, "box")).value_preview == "[]"
    for _ in range(2):  # and again after a restart, which restores the same snapshots
        await client.kill()
        assert (await ok(client, "(box, 'f' in [n for n in ['f'] if n])")).value_preview == (
            "([], True)"
        )


async def test_a_genuine_definition_with_decorator_and_body_comes_back(
    client: SandboxClient,
) -> None:
    await ok(
        client,
        "import dataclasses\n@dataclasses.dataclass\nclass P:\n    x: int = 1\n"
        "    def twice(self):\n        return self.x * 2",
    )
    await client.kill()
    assert (await ok(client, "P(4).twice()")).value_preview == "8"
