"""The error tree: one base class, structured fields and messages a user can act on."""

from __future__ import annotations

import pytest

from cove import errors
from cove.errors import (
    AmbiguousId,
    Busy,
    CodecError,
    ConfigError,
    CoveError,
    ModelError,
    NotADatabase,
    NotFound,
    SchemaTooNew,
    StoreError,
    ValueTooLarge,
)


def test_every_error_is_a_cove_error_with_a_docstring() -> None:
    classes = [
        obj
        for obj in vars(errors).values()
        if isinstance(obj, type)
        and issubclass(obj, Exception)
        and obj.__module__ == errors.__name__
    ]
    assert len(classes) >= 12
    for cls in classes:
        assert issubclass(cls, CoveError)
        assert cls.__doc__ and cls.__doc__.strip(), cls.__name__
        assert cls.__name__ in (errors.__doc__ or ""), f"{cls.__name__} missing from the tree"


def test_the_tree_has_the_designed_shape() -> None:
    assert issubclass(AmbiguousId, NotFound)
    assert issubclass(NotADatabase, StoreError)
    assert issubclass(SchemaTooNew, StoreError)
    assert issubclass(ValueTooLarge, CodecError)


def test_message_is_str_and_attribute() -> None:
    error = ConfigError("setting x is bad")
    assert str(error) == error.message == "setting x is bad"


def test_busy_names_the_conversation_and_the_lease_holder() -> None:
    error = Busy("c0ffee", owner="host-1:4242")
    assert "conversation c0ffee is busy" in str(error)
    assert "host-1:4242" in str(error)
    assert "try again" in str(error)
    assert (error.conversation_id, error.owner) == ("c0ffee", "host-1:4242")
    assert "unknown" in str(Busy("c0ffee"))
    assert str(Busy("c0ffee", message="queued")) == "queued"


def test_not_found_names_what_was_looked_up() -> None:
    error = NotFound("conversation", "abc")
    assert str(error) == "no conversation matches 'abc'"
    assert (error.kind, error.key) == ("conversation", "abc")


def test_ambiguous_id_lists_the_candidates() -> None:
    error = AmbiguousId("conversation", "ab", ["ab12", "ab34"])
    assert str(error) == "conversation prefix 'ab' is ambiguous: it matches ab12, ab34"
    assert error.candidates == ["ab12", "ab34"]


def test_ambiguous_id_caps_a_long_candidate_list() -> None:
    candidates = [f"ab{i:02}" for i in range(25)]
    message = str(AmbiguousId("conversation", "ab", candidates))
    assert "ab09" in message and "ab10" not in message
    assert message.endswith("(and 15 more)")


def test_schema_too_new_names_both_versions_and_the_remedy() -> None:
    error = SchemaTooNew("/data/cove.db", found=7, supported=3)
    message = str(error)
    assert "/data/cove.db" in message
    assert "schema version 7" in message and "up to version 3" in message
    assert "upgrade cove" in message
    assert (error.found, error.supported) == (7, 3)


def test_not_a_database_promises_the_file_was_left_alone() -> None:
    message = str(NotADatabase("/tmp/notes.txt"))
    assert "/tmp/notes.txt is not a cove database" in message
    assert "not modified" in message


def test_model_error_carries_status_and_retryability() -> None:
    error = ModelError("rate limited", status=429, retryable=True)
    assert (str(error), error.status, error.retryable) == ("rate limited", 429, True)


def test_errors_chain_the_foreign_cause() -> None:
    with pytest.raises(StoreError) as caught:
        try:
            raise OSError("disk full")
        except OSError as exc:
            raise StoreError("cannot write the database") from exc
    assert isinstance(caught.value.__cause__, OSError)
