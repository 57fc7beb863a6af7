"""What is derived from a set of extensions is computed once per set, by identity."""

from __future__ import annotations

import dataclasses

import pytest

from cove.environment.extensions import builtin_extensions, render_docs
from cove.environment.extensions.base import Extension, ExtensionConstant, ExtensionFunction
from cove.environment.extensions.memo import per_extension_set
from cove.environment.extensions.registry import registry_for
from cove.errors import ConfigError


def shout(ctx: object, text: str) -> str:
    return text.upper()


def extension(name: str = "loud", function: str = "shout") -> Extension:
    return Extension(
        name=name,
        doc="says things loudly",
        functions=(ExtensionFunction(function, shout, "Shout it.", f"{function}(text) -> str"),),
        # An unhashable value: the cache must not need to hash an extension.
        constants=(ExtensionConstant("LIMITS", "the limits", value={"max": 3}),),
    )


def test_the_same_extensions_share_one_registry_and_one_rendering() -> None:
    extensions = builtin_extensions()
    assert registry_for(extensions) is registry_for(list(extensions))
    assert render_docs(extensions) is render_docs(tuple(extensions))


def test_equal_but_distinct_extensions_are_worked_out_anew() -> None:
    loud = extension()
    again = dataclasses.replace(loud, doc="says things loudly, again")
    assert registry_for([loud]) is registry_for([loud])
    assert registry_for([loud]) is not registry_for([again])
    assert "again" in render_docs([again]) and "again" not in render_docs([loud])
    assert render_docs([loud]) != render_docs([loud, *builtin_extensions()])


def test_a_set_that_cannot_be_built_fails_every_time() -> None:
    clash = [extension("one"), extension("two")]
    for _ in range(2):
        with pytest.raises(ConfigError, match="'shout', already bound by 'one'"):
            registry_for(clash)


async def test_a_cached_registry_still_checks_each_call() -> None:
    registry = registry_for([extension()])
    assert await registry.dispatch(None, "shout", ["hi"], {}) == "HI"  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"shout\(\): missing a required argument: 'text'"):
        await registry.dispatch(None, "shout", [], {})  # type: ignore[arg-type]


def test_a_derivation_runs_once_per_set() -> None:
    built: list[tuple[Extension, ...]] = []

    def names(extensions: tuple[Extension, ...]) -> str:
        built.append(extensions)
        return ",".join(e.name for e in extensions)

    cached = per_extension_set(names)
    loud, other = extension(), extension("other", "yell")
    assert [cached([loud]), cached([loud]), cached([loud, other]), cached([loud])] == [
        "loud",
        "loud",
        "loud,other",
        "loud",
    ]
    assert built == [(loud,), (loud, other)]
