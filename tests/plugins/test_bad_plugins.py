"""A broken plugin is left out with a clear reason, and cove goes on without it."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from cove.config import Settings
from cove.conversation import Conversations
from cove.environment.extensions.installed import GROUP, builtin_catalog, discover
from cove.errors import ConfigError

MODULE = "tests.plugins.broken_plugins"


def point(name: str, value: str) -> EntryPoint:
    return EntryPoint(name=name, value=value, group=GROUP)


POINTS = [
    point("greet", f"{MODULE}:greet"),
    point("missing_module", "no_such_plugin_module:thing"),
    point("untyped", f"{MODULE}:untyped"),
    point("read_file", f"{MODULE}:read_file"),
    point("greet", f"{MODULE}:greet"),  # a second package with the same name
    point("not_callable", f"{MODULE}:NOT_CALLABLE"),
    point("misnamed", f"{MODULE}:MISNAMED"),
    point("bad_effect", f"{MODULE}:BAD_EFFECT"),
]


def test_each_broken_plugin_is_reported_with_its_reason_and_the_good_one_is_kept() -> None:
    catalog = discover(POINTS)
    assert catalog.names == ("core", "files", "llm", "greet")
    problems = {p.name: p.message for p in catalog.problems}
    assert problems == {
        "bad_effect": "shout: effect 'LOUD!' is not a short lowercase word",
        "greet": "the name 'greet' is already taken by another extension",
        "misnamed": (
            "its entry point is called 'misnamed' but the extension 'something_else': "
            "they must be the same"
        ),
        "missing_module": (
            "it cannot be imported: ModuleNotFoundError: No module named 'no_such_plugin_module'"
        ),
        "not_callable": "it is a int, not an Extension or a function with type hints",
        "read_file": "extension 'read_file' binds 'read_file', already bound by 'files'",
        "untyped": "untyped: parameter(s) without a type hint: name",
    }
    assert {p.source for p in catalog.problems} >= {f"an unnamed distribution: {MODULE}:untyped"}


def test_the_same_function_under_another_name_is_another_extension() -> None:
    catalog = discover([point("shadow", f"{MODULE}:read_file"), point("hi", f"{MODULE}:greet")])
    assert catalog.names == ("core", "files", "llm", "hi", "shadow")  # bound by their names
    assert not catalog.problems


async def test_cove_runs_with_what_loaded_and_names_what_did_not(tmp_path: Path) -> None:
    settings = Settings.load(env={}, data_dir=tmp_path)
    async with await Conversations.open(settings, catalog=discover(POINTS)) as convs:
        record = await convs.create()
        assert record.id
        with pytest.raises(ConfigError) as refused:
            await convs.create(extensions=["core", "untyped"])
        assert str(refused.value) == (
            "extension(s) not installed: untyped (untyped: parameter(s) without a type hint: "
            "name); installed: core, files, llm, greet (`cove extensions` lists them)"
        )
        assert len(await convs.list()) == 1  # the refused one was never created


async def test_a_conversation_whose_extension_is_gone_cannot_be_replayed_and_says_why(
    tmp_path: Path,
) -> None:
    settings = Settings.load(env={}, data_dir=tmp_path)
    with_greet = discover([point("greet", f"{MODULE}:greet")])
    async with await Conversations.open(settings, catalog=with_greet) as convs:
        conversation = await convs.create()
    async with await Conversations.open(settings, catalog=builtin_catalog()) as convs:
        with pytest.raises(ConfigError) as refused:
            async for _ in convs.replay(conversation.id):
                pass
    assert str(refused.value) == (
        f"conversation {conversation.id} cannot be replayed: it was created with extension(s) "
        "not installed: greet; installed: core, files, llm (`cove extensions` lists them)"
    )
