"""A definition's record of what its statement read travels with it, exactly."""

from __future__ import annotations

import pytest

from cove import codec
from cove.codec.shapes import Definition
from cove.errors import CodecError


def test_reads_round_trip_and_older_records_still_decode() -> None:
    recorded = Definition("function", "g", "@deco\ndef g():\n    return 1", (("deco", "value:ab"),))
    text = codec.encode(recorded)
    assert codec.decode(text) == recorded
    assert codec.encode(codec.decode(text)) == text
    older = codec.encode(Definition("function", "g", "def g():\n    return 1"))
    assert older == '{"def":["function","g","def g():\\n    return 1"]}'
    assert codec.decode(older).reads is None
    none_read = Definition("class", "K", "class K:\n    pass", ())
    assert codec.decode(codec.encode(none_read)) == none_read


def test_a_function_encodes_with_its_recorded_definition() -> None:
    def g() -> int:
        return 1

    recorded = Definition("class", "whatever", "def g():\n    return 1", (("x", "absent"),))
    decoded = codec.decode(codec.encode([g], source_of=lambda value: recorded))
    assert decoded == [Definition("function", "g", recorded.source, recorded.reads)]


@pytest.mark.parametrize(
    "text",
    [
        '{"def":["function","g","src",[["a"]]]}',
        '{"def":["function","g","src",[["a",1]]]}',
        '{"def":["function","g","src","reads"]}',
        '{"def":["function","g","src",[],"more"]}',
    ],
)
def test_malformed_reads_are_refused(text: str) -> None:
    with pytest.raises(CodecError):
        codec.decode(text)
