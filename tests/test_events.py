"""Events: frozen dataclasses with a ``type`` discriminator that serialise to JSON-safe dicts."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import Any

import pytest

from cove import events
from cove.events import Event, ModelReply, TurnFinished, VarsChanged
from cove.results import VarVersion


def all_event_classes() -> list[type[Event]]:
    found: list[type[Event]] = []
    pending = [Event]
    while pending:
        cls = pending.pop()
        for sub in cls.__subclasses__():
            found.append(sub)
            pending.append(sub)
    return sorted(found, key=lambda cls: cls.__name__)


EVENT_CLASSES = all_event_classes()


def sample(hint: Any) -> Any:
    """A non-default example value of the annotated type (so every field is exercised)."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return sample(next(a for a in args if a is not type(None)))
    if origin is tuple:
        return (sample(args[0]),) if args[-1] is Ellipsis else tuple(sample(a) for a in args)
    if origin is list:
        return [sample(args[0])]
    if origin is typing.Literal:
        return args[0]
    if dataclasses.is_dataclass(hint):
        return build(hint)
    examples = {str: "text", int: 3, float: 1.5, bool: True, bytes: b"\x89PNG"}
    if hint not in examples:
        raise AssertionError(f"add an example for {hint!r} to tests/test_events.py")
    return examples[hint]


def build(cls: Any) -> Any:
    hints = typing.get_type_hints(cls)
    return cls(**{f.name: sample(hints[f.name]) for f in dataclasses.fields(cls) if f.init})


def json_names(cls: Any) -> set[str]:
    """The keys of a dataclass's JSON: its fields, a ``FLAT`` one's own fields in its place."""
    hints = typing.get_type_hints(cls)
    names: set[str] = set()
    for f in dataclasses.fields(cls):
        names |= json_names(hints[f.name]) if f.metadata.get("flat") else {f.name}
    return names


def test_the_vocabulary_has_the_designed_events() -> None:
    names = {cls.__name__ for cls in EVENT_CLASSES}
    assert {
        "TurnQueued",
        "TurnStarted",
        "IterationStarted",
        "ModelDelta",
        "ModelRetry",
        "ModelReply",
        "BlockStarted",
        "BlockFinished",
        "VarsChanged",
        "Nudge",
        "TurnFinished",
    } <= names


def test_type_discriminators_are_unique_snake_case() -> None:
    kinds = [cls.type for cls in EVENT_CLASSES]
    assert len(kinds) == len(set(kinds))
    for cls in EVENT_CLASSES:
        assert cls.type != Event.type, f"{cls.__name__} needs its own type"
        assert cls.type.replace("_", "").isalpha() and cls.type.islower()


@pytest.mark.parametrize("cls", EVENT_CLASSES, ids=lambda cls: cls.__name__)
def test_every_event_serialises_to_a_json_safe_dict(cls: type[Event]) -> None:
    event = build(cls)
    data = event.to_json()
    assert next(iter(data)) == "type"
    assert data["type"] == cls.type
    assert set(data) == {"type"} | json_names(cls)
    text = json.dumps(data, allow_nan=False)
    assert json.loads(text) == data  # only JSON types: no tuples, dataclasses or paths left


@pytest.mark.parametrize("cls", EVENT_CLASSES, ids=lambda cls: cls.__name__)
def test_every_event_is_frozen(cls: type[Event]) -> None:
    event = build(cls)
    first = dataclasses.fields(cls)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(event, first, None)


def test_nested_values_become_plain_json() -> None:
    change = VarVersion(
        name="total", kind="value", encoded="42", type_name="int", preview="42", version=2
    )
    event = VarsChanged(turn_id=1, iteration=0, changes=(change,))
    assert event.to_json() == {
        "type": "vars_changed",
        "conversation_id": "",
        "seq": 0,
        "turn_id": 1,
        "iteration": 0,
        "changes": [  # the encoded value stays out of events
            {
                "name": "total",
                "kind": "value",
                "type_name": "int",
                "preview": "42",
                "size": None,
                "signature": None,
                "version": 2,
                "block_position": 0,
            }
        ],
    }
    reply = ModelReply(turn_id=1, iteration=0, thinking="t", code=("a = 1", "a"))
    assert reply.to_json()["code"] == ["a = 1", "a"]


def test_final_statuses_match_the_design() -> None:
    expected = {"done", "max_iterations", "error_budget", "cancelled", "failed", "interrupted"}
    assert expected == events.FINAL_STATUSES
    finished = build(TurnFinished)
    assert finished.to_json()["type"] == "turn_finished"


@pytest.mark.parametrize("cls", EVENT_CLASSES, ids=lambda cls: cls.__name__)
def test_every_event_carries_its_conversation_and_sequence(cls: type[Event]) -> None:
    event = dataclasses.replace(build(cls), conversation_id="c1", seq=7)
    data = event.to_json()
    assert (data["conversation_id"], data["seq"]) == ("c1", 7)


def test_a_nudge_names_the_rule_that_gave_it() -> None:
    title = events.Nudge(turn_id=1, text="The conversation has no title yet", kind="title")
    assert title.to_json()["kind"] == "title"
    assert events.Nudge(turn_id=1, text="from an extension").kind == "extension"
