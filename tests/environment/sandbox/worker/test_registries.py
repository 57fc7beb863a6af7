"""Sandbox code cannot change process-wide registries of the worker.

``typing``'s aliases forward public attributes to the ``collections.abc`` class they stand for,
so ``typing.Mapping.register(C)`` would call ``ABCMeta.register`` on the real ABC: every
``isinstance(x, Mapping)`` in the worker — the worker's own code included — would then answer
for a class the sandbox chose. Every route to ``ABCMeta.register`` is refused, whatever the
alias (subscripted or not) and whatever the class: stdlib classes that are ABCs themselves
(``collections.ChainMap``, ``fractions.Fraction``) and sandbox subclasses of an ABC are consulted
by the ABCs above them, so registering ``int`` under one would make ints pass as mappings.
"""

from __future__ import annotations

import pytest

from cove.environment.sandbox.host.client import SandboxClient
from tests.environment.conftest import ok, run

ROUTES = {
    "Mapping": "typing.Mapping.register(C)",
    "subscripted Mapping": "typing.Mapping[str, int].register(C)",
    "Sequence": "typing.Sequence.register(C)",
    "Iterable": "typing.Iterable.register(C)",
    "Iterator": "typing.Iterator.register(C)",
    "Generator": "typing.Generator.register(C)",
    "Callable": "typing.Callable.register(C)",
    "subscripted Callable": "typing.Callable[[int], int].register(C)",
    "through getattr": "getattr(typing.Mapping, 'register')(C)",
    "bound first": "r = typing.Sequence.register\nr(C)",
    "collections.ChainMap (a MutableMapping)": "collections.ChainMap.register(C)",
    "fractions.Fraction (a numbers.Rational)": "import fractions\nfractions.Fraction.register(int)",
    "a sandbox subclass of an ABC": (
        "class M(typing.Mapping):\n    pass\nM.register(C)\nM.register(int)"
    ),
}


@pytest.mark.parametrize("route", list(ROUTES))
async def test_abc_register_is_refused(route: str, client: SandboxClient) -> None:
    await ok(client, "import typing\nimport collections\nclass C:\n    pass")
    outcome = await run(client, ROUTES[route])
    assert not outcome.result.ok
    assert outcome.result.error is not None and "register" in outcome.result.error
    checks = (
        "[isinstance(C(), typing.Mapping), isinstance(C(), typing.Sequence), "
        "isinstance(C(), typing.Iterable), isinstance(C(), typing.Callable), "
        "isinstance(1, typing.Mapping), issubclass(C, typing.Iterator), "
        "issubclass(C, typing.Generator), issubclass(C, collections.ChainMap)]"
    )
    assert (await ok(client, checks)).result.result_preview == "[" + ", ".join(["False"] * 8) + "]"


async def test_hasattr_and_a_default_see_no_register(client: SandboxClient) -> None:
    outcome = await ok(
        client,
        "import typing\n[hasattr(typing.Mapping, 'register'), "
        "getattr(typing.Mapping, 'register', 'none')]",
    )
    assert outcome.result.result_preview == "[False, 'none']"


async def test_typing_aliases_still_work(client: SandboxClient) -> None:
    code = (
        "import typing\n"
        "def f(x: typing.Mapping[str, typing.List[int]]) -> typing.Optional[int]:\n"
        "    return len(x)\n"
        "P = typing.NamedTuple('P', [('a', int)])\n"
        "[f({'a': [1]}), isinstance({}, typing.Mapping), isinstance([], typing.Sequence), "
        "typing.cast(int, 3), P(1).a, typing.Mapping.get({'k': 2}, 'k')]"
    )
    assert (await ok(client, code)).result.result_preview == "[1, True, True, 3, 1, 2]"
